package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
)

// Schema is a compiled tool input schema. It is immutable and safe for
// concurrent use.
type Schema struct {
	root *node
}

// node is one compiled (sub)schema.
type node struct {
	types      []string // allowed JSON types; empty allows any
	properties []property
	required   map[string]bool
	closed     bool // additionalProperties: false
	enum       []*value
	minimum    *bound
	maximum    *bound
	hasDefault bool
	items      *node
}

type property struct {
	name string
	node *node
}

// bound is a numeric limit; exclusive makes the limit itself invalid.
type bound struct {
	limit     float64
	exclusive bool
}

var knownTypes = []string{"object", "string", "number", "integer", "boolean", "array", "null"}

// Compile parses a JSON Schema. Keywords outside the supported subset (such
// as description or format) are ignored; malformed supported keywords are
// an error.
func Compile(schema json.RawMessage) (*Schema, error) {
	v, err := parse(schema, false)
	if err != nil {
		return nil, fmt.Errorf("schema: parse: %w", err)
	}
	root, err := compileNode(v, "#")
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return &Schema{root: root}, nil
}

func compileNode(v *value, at string) (*node, error) {
	if v.kind == kindBool && v.boolean {
		return &node{}, nil // "true" accepts anything
	}
	if v.kind != kindObject {
		return nil, fmt.Errorf("%s: a schema must be an object", at)
	}
	n := &node{required: make(map[string]bool)}
	var exclMinFlag, exclMaxFlag bool
	for _, m := range v.members {
		kw, val := m.key, m.val
		where := at + "/" + kw
		switch kw {
		case "type":
			switch val.kind {
			case kindString:
				n.types = []string{val.str}
			case kindArray:
				for _, t := range val.items {
					if t.kind != kindString {
						return nil, fmt.Errorf("%s: type names must be strings", where)
					}
					n.types = append(n.types, t.str)
				}
			default:
				return nil, fmt.Errorf("%s: must be a string or an array", where)
			}
			for _, t := range n.types {
				if !slices.Contains(knownTypes, t) {
					return nil, fmt.Errorf("%s: unknown type %q", where, t)
				}
			}
		case "properties":
			if val.kind != kindObject {
				return nil, fmt.Errorf("%s: must be an object", where)
			}
			for _, p := range val.members {
				child, err := compileNode(p.val, where+"/"+p.key)
				if err != nil {
					return nil, err
				}
				n.properties = append(n.properties, property{name: p.key, node: child})
			}
		case "required":
			if val.kind != kindArray {
				return nil, fmt.Errorf("%s: must be an array", where)
			}
			for _, r := range val.items {
				if r.kind != kindString {
					return nil, fmt.Errorf("%s: names must be strings", where)
				}
				n.required[r.str] = true
			}
		case "additionalProperties":
			// Only false changes anything: a schema for extra members is
			// not needed by any tool.
			if val.kind == kindBool {
				n.closed = !val.boolean
			}
		case "enum":
			if val.kind != kindArray || len(val.items) == 0 {
				return nil, fmt.Errorf("%s: must be a non-empty array", where)
			}
			n.enum = val.items
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			switch val.kind {
			case kindNumber:
				b := &bound{limit: val.float(), exclusive: kw == "exclusiveMinimum" || kw == "exclusiveMaximum"}
				if kw == "minimum" || kw == "exclusiveMinimum" {
					if n.minimum == nil || b.limit > n.minimum.limit || (b.limit == n.minimum.limit && b.exclusive) {
						n.minimum = b
					}
				} else if n.maximum == nil || b.limit < n.maximum.limit || (b.limit == n.maximum.limit && b.exclusive) {
					n.maximum = b
				}
			case kindBool: // draft-04 form: modifies minimum/maximum
				if kw == "exclusiveMinimum" {
					exclMinFlag = val.boolean
				} else if kw == "exclusiveMaximum" {
					exclMaxFlag = val.boolean
				} else {
					return nil, fmt.Errorf("%s: must be a number", where)
				}
			default:
				return nil, fmt.Errorf("%s: must be a number", where)
			}
		case "default":
			n.hasDefault = true
		case "items":
			child, err := compileNode(val, where)
			if err != nil {
				return nil, err
			}
			n.items = child
		}
	}
	if exclMinFlag && n.minimum != nil {
		n.minimum.exclusive = true
	}
	if exclMaxFlag && n.maximum != nil {
		n.maximum.exclusive = true
	}
	return n, nil
}

// Validate parses input, the raw text the model produced for a call of
// toolName, and checks it against the schema. Empty input stands for {}.
// Input that is not UTF-8, holds half a surrogate pair, names a key twice
// in one object or nests deeper than MaxDepth is refused before the
// schema is looked at.
//
// On success it returns the input as compact JSON, members in the order
// written, with numeric strings given for number or integer properties
// turned into numbers; defaults are not filled in. On failure the error is
// an *Error whose text is what the model should read.
func (s *Schema) Validate(toolName, input string) (json.RawMessage, error) {
	v, err := parseInput(toolName, input)
	if err != nil {
		return nil, err
	}
	var issues []issue
	s.root.check(v, nil, &issues)
	if len(issues) > 0 {
		return nil, newError(toolName, issues)
	}
	return encodeValue(v), nil
}

// cache holds compiled schemas by their text, for Validate.
var cache sync.Map // string -> *Schema or error

// Validate is Compile followed by Schema.Validate, with compiled schemas
// cached by their text. A schema that does not compile gives an error that
// is not an *Error: the tool, not the model, is at fault.
func Validate(toolName string, schema json.RawMessage, input string) (json.RawMessage, error) {
	key := string(schema)
	c, ok := cache.Load(key)
	if !ok {
		s, err := Compile(schema)
		if err != nil {
			c = fmt.Errorf("tool %s: %w", toolName, err)
		} else {
			c = s
		}
		c, _ = cache.LoadOrStore(key, c)
	}
	switch c := c.(type) {
	case *Schema:
		return c.Validate(toolName, input)
	case error:
		return nil, c
	}
	panic("unreachable")
}

// UnknownTool returns the text for a call of a tool that does not exist.
func UnknownTool(name string) string {
	return "Error: No such tool available: " + name
}

// ToolNotEnabled returns the text for a call of a tool that exists but is
// not offered in this session.
func ToolNotEnabled(name string) string {
	return UnknownTool(name) + ". " + name + " exists but is not enabled in this context. Use one of the available tools instead."
}

// check validates v (nil when absent is handled by the caller) against n,
// coercing numeric strings in place, and appends what is wrong.
func (n *node) check(v *value, path []any, issues *[]issue) {
	if n.enum != nil {
		if !slices.ContainsFunc(n.enum, func(e *value) bool { return equal(e, v) }) {
			*issues = append(*issues, issue{code: codeInvalidValue, path: path, values: n.enum})
		}
		return
	}
	if len(n.types) > 0 {
		n.coerce(v)
		if !n.accepts(v.kind) {
			*issues = append(*issues, issue{code: codeInvalidType, path: path, expected: n.expected(), received: v.kind.String()})
			return
		}
	}
	switch v.kind {
	case kindNumber:
		n.checkNumber(v, path, issues)
	case kindObject:
		n.checkObject(v, path, issues)
	case kindArray:
		if n.items != nil {
			for i, item := range v.items {
				n.items.check(item, appendPath(path, i), issues)
			}
		}
	}
}

func (n *node) checkNumber(v *value, path []any, issues *[]issue) {
	f := v.float()
	if math.IsInf(f, 0) && n.hasType("number", "integer") {
		// JSON.parse turns 1e400 into Infinity, which is not a valid number.
		*issues = append(*issues, issue{code: codeInvalidType, path: path, expected: "number", received: "Infinity"})
		return
	}
	if n.hasType("integer") && !n.hasType("number") && f != math.Trunc(f) {
		*issues = append(*issues, issue{code: codeInvalidType, path: path, expected: "int", format: "safeint", received: "number"})
		return
	}
	if b := n.minimum; b != nil && (f < b.limit || (b.exclusive && f == b.limit)) {
		*issues = append(*issues, issue{code: codeTooSmall, path: path, limit: b.limit, inclusive: !b.exclusive})
	}
	if b := n.maximum; b != nil && (f > b.limit || (b.exclusive && f == b.limit)) {
		*issues = append(*issues, issue{code: codeTooBig, path: path, limit: b.limit, inclusive: !b.exclusive})
	}
}

func (n *node) checkObject(v *value, path []any, issues *[]issue) {
	for _, p := range n.properties {
		child, ok := v.get(p.name)
		if !ok {
			if n.required[p.name] && !p.node.hasDefault {
				*issues = append(*issues, issue{code: codeInvalidType, path: appendPath(path, p.name), expected: p.node.expected(), received: "undefined"})
			}
			continue
		}
		p.node.check(child, appendPath(path, p.name), issues)
	}
	// A required name without a property schema must still be present.
	for _, name := range sortedKeys(n.required) {
		if n.property(name) == nil {
			if _, ok := v.get(name); !ok {
				*issues = append(*issues, issue{code: codeInvalidType, path: appendPath(path, name), expected: "unknown", received: "undefined"})
			}
		}
	}
	if n.closed {
		var extra []string
		for _, m := range v.members {
			if n.property(m.key) == nil {
				extra = append(extra, m.key)
			}
		}
		if len(extra) > 0 {
			*issues = append(*issues, issue{code: codeUnrecognizedKeys, path: path, keys: extra})
		}
	}
}

func (n *node) property(name string) *node {
	for _, p := range n.properties {
		if p.name == name {
			return p.node
		}
	}
	return nil
}

func (n *node) hasType(types ...string) bool {
	for _, t := range types {
		if slices.Contains(n.types, t) {
			return true
		}
	}
	return false
}

func (n *node) accepts(k kind) bool {
	for _, t := range n.types {
		if t == k.String() || (t == "integer" && k == kindNumber) {
			return true
		}
	}
	return false
}

// expected names the type in the validator's words: an integer property
// given something that is not a number expects a "number".
func (n *node) expected() string {
	if len(n.types) == 0 {
		if n.enum != nil {
			return "string"
		}
		return "unknown"
	}
	if n.types[0] == "integer" {
		return "number"
	}
	return n.types[0]
}

// coerce turns a numeric string into a number where the schema wants a
// number and not a string, as Claude Code's input schemas do.
func (n *node) coerce(v *value) {
	if v.kind != kindString || !n.hasType("number", "integer") || n.hasType("string") {
		return
	}
	if !isNumeric(v.str) {
		return
	}
	// Written back in JSON's own number form: "00" or "007" become 0 and
	// 7, never a number with leading zeros, which JSON does not allow.
	f, err := strconv.ParseFloat(v.str, 64)
	if err != nil {
		return
	}
	v.kind, v.num, v.str = kindNumber, json.Number(strconv.FormatFloat(f, 'f', -1, 64)), ""
}

// isNumeric reports whether s is an optionally negative decimal number
// such as "2", "-3" or "1.5".
func isNumeric(s string) bool {
	if s == "" {
		return false
	}
	i := 0
	if s[0] == '-' {
		i++
	}
	digits := func() int {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - start
	}
	if digits() == 0 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// equal compares two JSON values by value.
func equal(a, b *value) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case kindNull:
		return true
	case kindBool:
		return a.boolean == b.boolean
	case kindNumber:
		return a.float() == b.float()
	case kindString:
		return a.str == b.str
	case kindArray:
		return slices.EqualFunc(a.items, b.items, equal)
	case kindObject:
		if len(a.members) != len(b.members) {
			return false
		}
		for _, m := range a.members {
			o, ok := b.get(m.key)
			if !ok || !equal(m.val, o) {
				return false
			}
		}
		return true
	}
	return false
}

func appendPath(path []any, elem any) []any {
	return append(slices.Clip(path), elem)
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
