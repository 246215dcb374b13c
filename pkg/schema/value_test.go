package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// decoderParse reads data with encoding/json's token stream: the reference
// parse must agree with, value for value.
func decoderParse(data []byte, strict bool) (*value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var read func(path []any) (*value, error)
	read = func(path []any) (*value, error) {
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
			if t == '[' {
				v := &value{kind: kindArray}
				for dec.More() {
					item, err := read(append(path[:len(path):len(path)], len(v.items)))
					if err != nil {
						return nil, err
					}
					v.items = append(v.items, item)
				}
				_, err := dec.Token()
				return v, err
			}
			v := &value{kind: kindObject}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key := kt.(string)
				i := -1
				for j, m := range v.members {
					if m.key == key {
						i = j
					}
				}
				if i >= 0 && strict {
					return nil, &duplicateKeyError{key: key, path: path}
				}
				item, err := read(append(path[:len(path):len(path)], key))
				if err != nil {
					return nil, err
				}
				if i >= 0 {
					v.members[i].val = item
				} else {
					v.members = append(v.members, member{key: key, val: item})
				}
			}
			_, err := dec.Token()
			return v, err
		}
		return nil, fmt.Errorf("token %v", tok)
	}
	v, err := read(nil)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the value")
	}
	return v, nil
}

// checkParse compares parse with decoderParse on data, strict and not, and
// the encoding of what they read with encoding/json's.
func checkParse(t *testing.T, data string) {
	t.Helper()
	for _, strict := range []bool{true, false} {
		got, gotErr := parse([]byte(data), strict)
		want, wantErr := decoderParse([]byte(data), strict)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("parse(%q, %v): error %v, the decoder's %v", data, strict, gotErr, wantErr)
		}
		var gotDup, wantDup *duplicateKeyError
		if errors.As(wantErr, &wantDup) {
			if !errors.As(gotErr, &gotDup) || gotDup.key != wantDup.key || !reflect.DeepEqual(gotDup.path, wantDup.path) && len(gotDup.path)+len(wantDup.path) > 0 {
				t.Fatalf("parse(%q, %v): error %#v, want %#v", data, strict, gotErr, wantErr)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("parse(%q, %v) = %s, the decoder read %s", data, strict, encodeValue(got), encodeValue(want))
		}
		if got == nil {
			continue
		}
		var buf bytes.Buffer
		got.encode(&buf)
		if !strict {
			continue
		}
		viaJSON, err := decodeAny([]byte(data))
		if err != nil {
			t.Fatal(err)
		}
		if back, err := decodeAny(buf.Bytes()); err != nil || !reflect.DeepEqual(back, viaJSON) {
			t.Fatalf("encode(parse(%q)) = %s, which reads back as %v, not %v", data, buf.Bytes(), back, viaJSON)
		}
	}
}

// decodeAny reads data as encoding/json does, numbers as written.
func decodeAny(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// checkWriteString compares writeString with encoding/json's encoder
// without HTML escaping, byte for byte.
func checkWriteString(t *testing.T, s string) {
	t.Helper()
	var got, want bytes.Buffer
	writeString(&got, s)
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	if w := bytes.TrimSuffix(want.Bytes(), []byte("\n")); !bytes.Equal(got.Bytes(), w) {
		t.Fatalf("writeString(%q) = %s, want %s", s, got.Bytes(), w)
	}
}

var parseSeeds = []string{
	`{}`, `[]`, ` { "a" : [ 1 , -2.5e+3 , true , false , null ] } `, `"x"`, `0`, `-0.0E-7`,
	`{"file_path":"/a/b c.go","offset":"3","limit":10}`,
	`{"s":"quote \" backslash \\ slash \/ \b\f\n\r\t \u00e9 \ud83d\ude00 \u2028"}`,
	`{"a":1,"a":2}`, `{"a":{"b":[{"c":1,"c":2}]}}`, `[{"k":1},{"k":2,"j":[{"k":3,"k":4}]}]`,
	"{\"raw\":\"\xff\xfe\"}", `{"é":"ü","日本":"語"}`, `{"<>&":"<>&"}`, "{\"ls\":\"\u2028\u2029\"}",
	`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k3":33}`,
	"\t\n\r [\"\\u0000\\u001f\"] \n",
}

// TestParseAgreesWithTheDecoder: the one-pass reader reads every value,
// key order, duplicate and escape as encoding/json's decoder does.
func TestParseAgreesWithTheDecoder(t *testing.T) {
	for _, data := range parseSeeds {
		checkParse(t, data)
		checkWriteString(t, data)
	}
	for _, s := range []string{"", "/plain/path.go", "line\u2028sep", "para\u2029sep", "bad\xffbyte", "é", "<>&", "a\tb", "a\\b", "del\x7f", "nul\x00"} {
		checkWriteString(t, s)
	}
	// Past the size at which an object's keys go into a map.
	var b strings.Builder
	b.WriteString("{")
	for i := range 3 * membersIndexed {
		fmt.Fprintf(&b, "%q:%d,", fmt.Sprint("k", i%(2*membersIndexed)), i)
	}
	b.WriteString(`"end":null}`)
	checkParse(t, b.String())
	if _, err := parse([]byte(`{"a":1} x`), false); err == nil {
		t.Fatal("parse accepted data after the value")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		checkWriteString(t, data)
		if !json.Valid([]byte(data)) {
			if _, err := parse([]byte(data), true); err == nil {
				t.Fatalf("parse accepted %q", data)
			}
			return
		}
		checkParse(t, data)
	})
}
