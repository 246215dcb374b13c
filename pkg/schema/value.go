package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// kind is the JSON type of a value, in the names the validator uses.
type kind int

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k kind) String() string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "boolean"
	case kindNumber:
		return "number"
	case kindString:
		return "string"
	case kindArray:
		return "array"
	case kindObject:
		return "object"
	}
	return "unknown"
}

// value is a parsed JSON value that keeps the order of object members, so
// that a normalized input reads like the one the model wrote.
type value struct {
	kind    kind
	boolean bool
	num     json.Number // the number's text as written
	str     string
	items   []*value
	members []member
}

type member struct {
	key string
	val *value
}

// get returns the member named key.
func (v *value) get(key string) (*value, bool) {
	for _, m := range v.members {
		if m.key == key {
			return m.val, true
		}
	}
	return nil, false
}

// duplicateKeyError: an object names key twice.
type duplicateKeyError struct {
	key  string
	path []any // the object's
}

func (e *duplicateKeyError) Error() string { return "duplicate key " + e.key }

// parse decodes one JSON text. With strict, an object that names a key
// twice is a *duplicateKeyError (JSON.parse would keep the last value,
// other readers the first); without, the key keeps its first position and
// its last value, as JSON.parse does (for schemas, which the model did not
// write).
func parse(data []byte, strict bool) (*value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := parser{dec: dec, strict: strict}
	v, err := p.value(nil)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// parser reads values from a decoder.
type parser struct {
	dec    *json.Decoder
	strict bool
}

func (p *parser) value(path []any) (*value, error) {
	dec := p.dec
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &value{kind: kindNull}, nil
	case bool:
		return &value{kind: kindBool, boolean: t}, nil
	case json.Number:
		return &value{kind: kindNumber, num: t}, nil
	case string:
		return &value{kind: kindString, str: t}, nil
	case json.Delim:
		switch t {
		case '[':
			v := &value{kind: kindArray}
			for dec.More() {
				item, err := p.value(appendPath(path, len(v.items)))
				if err != nil {
					return nil, err
				}
				v.items = append(v.items, item)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return v, nil
		case '{':
			v := &value{kind: kindObject}
			index := make(map[string]int)
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is %v, not a string", kt)
				}
				i, dup := index[key]
				if dup && p.strict {
					return nil, &duplicateKeyError{key: key, path: path}
				}
				item, err := p.value(appendPath(path, key))
				if err != nil {
					return nil, err
				}
				if dup {
					v.members[i].val = item
					continue
				}
				index[key] = len(v.members)
				v.members = append(v.members, member{key: key, val: item})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return v, nil
		}
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// float returns the number's value. Numbers too large for a float64 come
// out as ±Inf, as JavaScript reads them.
func (v *value) float() float64 {
	f, _ := strconv.ParseFloat(string(v.num), 64) // on ErrRange f is ±Inf or 0
	return f
}

// encode writes v as compact JSON.
func (v *value) encode(buf *bytes.Buffer) {
	switch v.kind {
	case kindNull:
		buf.WriteString("null")
	case kindBool:
		buf.WriteString(strconv.FormatBool(v.boolean))
	case kindNumber:
		buf.WriteString(string(v.num))
	case kindString:
		writeString(buf, v.str)
	case kindArray:
		buf.WriteByte('[')
		for i, item := range v.items {
			if i > 0 {
				buf.WriteByte(',')
			}
			item.encode(buf)
		}
		buf.WriteByte(']')
	case kindObject:
		buf.WriteByte('{')
		for i, m := range v.members {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, m.key)
			buf.WriteByte(':')
			m.val.encode(buf)
		}
		buf.WriteByte('}')
	}
}

// writeString writes s as a JSON string without HTML escaping, the way
// JSON.stringify does.
func writeString(buf *bytes.Buffer, s string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	buf.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// formatNumber prints f the way JavaScript's Number#toString does for the
// values schemas hold.
func formatNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	abs := f
	if abs < 0 {
		abs = -abs
	}
	if abs >= 1e21 || abs < 1e-6 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Go writes e+21, JavaScript e+21 as well, but Go pads e-07.
		return trimExponent(s)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func trimExponent(s string) string {
	i := bytes.IndexByte([]byte(s), 'e')
	if i < 0 || i+2 >= len(s) {
		return s
	}
	sign, digits := s[i+1], s[i+2:]
	for len(digits) > 1 && digits[0] == '0' {
		digits = digits[1:]
	}
	return s[:i+1] + string(sign) + digits
}
