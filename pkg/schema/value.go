package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
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
	if !json.Valid(data) {
		return nil, errors.New("not a JSON text")
	}
	return parseValid(data, strict)
}

// parseValid is parse for data that json.Valid accepts. It reads the text
// in one pass; strings with an escape or a byte that is not UTF-8 are
// decoded by encoding/json, so they come out exactly as there.
func parseValid(data []byte, strict bool) (*value, error) {
	p := parser{data: data, strict: strict}
	return p.value()
}

// parser reads values from a valid JSON text.
type parser struct {
	data   []byte
	pos    int
	strict bool
}

// membersIndexed is the member count from which an object's keys are
// looked up in a map rather than by a scan.
const membersIndexed = 16

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value() (*value, error) {
	p.skipSpace()
	switch p.data[p.pos] {
	case '{':
		return p.object()
	case '[':
		p.pos++
		v := &value{kind: kindArray}
		for p.skipSpace(); p.data[p.pos] != ']'; p.skipSpace() {
			if len(v.items) > 0 {
				p.pos++ // ','
			}
			item, err := p.value()
			if err != nil {
				return nil, within(err, len(v.items))
			}
			v.items = append(v.items, item)
		}
		p.pos++
		return v, nil
	case '"':
		s, err := p.string()
		return &value{kind: kindString, str: s}, err
	case 't':
		p.pos += len("true")
		return &value{kind: kindBool, boolean: true}, nil
	case 'f':
		p.pos += len("false")
		return &value{kind: kindBool}, nil
	case 'n':
		p.pos += len("null")
		return &value{kind: kindNull}, nil
	}
	start := p.pos
	for p.pos < len(p.data) && strings.IndexByte("+-0123456789.eE", p.data[p.pos]) >= 0 {
		p.pos++
	}
	return &value{kind: kindNumber, num: json.Number(p.data[start:p.pos])}, nil
}

func (p *parser) object() (*value, error) {
	p.pos++
	v := &value{kind: kindObject}
	var index map[string]int
	for p.skipSpace(); p.data[p.pos] != '}'; p.skipSpace() {
		if len(v.members) > 0 {
			p.pos++ // ','
			p.skipSpace()
		}
		key, err := p.string()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		p.pos++ // ':'
		i, ok := index[key]
		if index == nil {
			i = slices.IndexFunc(v.members, func(m member) bool { return m.key == key })
			ok = i >= 0
		}
		if ok && p.strict {
			return nil, &duplicateKeyError{key: key}
		}
		item, err := p.value()
		if err != nil {
			return nil, within(err, key)
		}
		if ok {
			v.members[i].val = item
			continue
		}
		v.members = append(v.members, member{key: key, val: item})
		switch {
		case index != nil:
			index[key] = len(v.members) - 1
		case len(v.members) == membersIndexed:
			index = make(map[string]int, 2*membersIndexed)
			for j, m := range v.members {
				index[m.key] = j
			}
		}
	}
	p.pos++
	return v, nil
}

// within returns err for a value that is elem of its parent: a
// duplicate key's path is made as the error goes up, so that reading
// builds no path.
func within(err error, elem any) error {
	if dup, ok := err.(*duplicateKeyError); ok {
		dup.path = append([]any{elem}, dup.path...)
	}
	return err
}

// string reads the string at p.pos.
func (p *parser) string() (string, error) {
	start := p.pos
	p.pos++
	plain := true
	for {
		switch c := p.data[p.pos]; {
		case c == '"':
			p.pos++
			raw := p.data[start:p.pos]
			if plain && utf8.Valid(raw) {
				return string(raw[1 : len(raw)-1]), nil
			}
			var s string
			err := json.Unmarshal(raw, &s)
			return s, err
		case c == '\\':
			plain = false
			p.pos += 2
		default:
			p.pos++
		}
	}
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
	if !needsEscape(s) {
		buf.WriteByte('"')
		buf.WriteString(s)
		buf.WriteByte('"')
		return
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	buf.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// needsEscape reports whether s holds a byte that JSON.stringify would not
// write as it is: a quote, a backslash, a control character, or anything
// outside ASCII (left to encoding/json, which escapes U+2028 and U+2029 and
// replaces bytes that are not UTF-8).
func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return true
		}
	}
	return false
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
