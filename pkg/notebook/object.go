package notebook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// object is a JSON object that keeps its keys in the order they were read
// and its values as raw JSON, so that writing it back changes nothing but
// what was set.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

func newObject() *object { return &object{vals: map[string]json.RawMessage{}} }

// UnmarshalJSON reads an object, keeping its key order. A repeated key
// keeps its first place and its last value, as encoding/json would.
func (o *object) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("not a JSON object")
	}
	*o = *newObject()
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("value of %q: %w", key, err)
		}
		o.set(key, v)
	}
	_, err = dec.Token()
	return err
}

// MarshalJSON writes the object compactly, its keys in order.
func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		key, err := encode(k)
		if err != nil {
			return nil, err
		}
		b.Write(key)
		b.WriteByte(':')
		if err := json.Compact(&b, o.vals[k]); err != nil {
			return nil, fmt.Errorf("value of %q: %w", k, err)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (o *object) get(key string) (json.RawMessage, bool) {
	v, ok := o.vals[key]
	return v, ok
}

// set gives key a value, at its old place or at the end.
func (o *object) set(key string, v json.RawMessage) {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
}

// setValue sets key to v encoded as JSON.
func (o *object) setValue(key string, v any) {
	raw, err := encode(v)
	if err != nil {
		// Only strings, nil and the fixed values below are set.
		panic(fmt.Sprintf("notebook: encode %q: %v", key, err))
	}
	o.set(key, raw)
}

func (o *object) remove(key string) {
	if _, ok := o.vals[key]; !ok {
		return
	}
	delete(o.vals, key)
	o.keys = slices.DeleteFunc(o.keys, func(k string) bool { return k == key })
}

// str returns the value of key when it is a JSON string.
func (o *object) str(key string) (string, bool) {
	raw, ok := o.vals[key]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// encode writes v as JSON without escaping <, > and &, as Jupyter writes
// notebooks.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
