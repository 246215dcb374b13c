package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Error is an input the model got wrong: text that is not JSON, or JSON the
// schema rejects. Error() is the message for the model, without the
// <tool_use_error> tags the executor adds.
type Error struct {
	// Tool is the tool the input was for.
	Tool string
	// Unparsable is true when the input was not JSON at all.
	Unparsable bool
	// Issues lists what the schema rejected, in the order found.
	Issues []Issue
	msg    string
}

// Error returns the message for the model.
func (e *Error) Error() string { return e.msg }

// Issue is one problem found by the schema check.
type Issue struct {
	// Code is the validator's issue code: invalid_type, unrecognized_keys,
	// invalid_value, too_small or too_big.
	Code string
	// Path is the dotted path of the offending value ("" for the input
	// itself).
	Path string
	// Message says what is wrong, in the validator's words.
	Message string
}

// previewBytes is how much of unparsable input the message quotes.
const previewBytes = 200

// parseInput parses the model's input text; blank text stands for {}.
// Text that is not JSON is a parseError; JSON that two readers could take
// differently (see strict.go) is an *Error of its own.
func parseInput(toolName, input string) (*value, error) {
	if strings.TrimSpace(input) == "" {
		return &value{kind: kindObject}, nil
	}
	if err := InvalidUTF8(toolName, input); err != nil {
		return nil, err
	}
	if !json.Valid([]byte(input)) {
		// Nesting past the decoder's own limit makes it invalid too; say
		// what is wrong with it.
		if err := scanText(toolName, input); err != nil && err.Issues[0].Code == CodeTooDeep {
			return nil, err
		}
		return nil, parseError(toolName, input)
	}
	if err := scanText(toolName, input); err != nil {
		return nil, err
	}
	v, err := parseValid([]byte(input), true)
	var dup *duplicateKeyError
	switch {
	case errors.As(err, &dup):
		return nil, duplicateKey(toolName, dup.key, dup.path)
	case err != nil:
		return nil, parseError(toolName, input)
	}
	return v, nil
}

// parseError words an input that is not JSON. It quotes the start of the
// input so the model can see where it went wrong.
func parseError(toolName, input string) *Error {
	n := min(len(input), previewBytes)
	for n > 0 && n < len(input) && !utf8.RuneStart(input[n]) {
		n-- // do not split a character
	}
	preview := strings.ToValidUTF8(input[:n], "\uFFFD")
	msg := fmt.Sprintf("InputValidationError: %s was called with input that could not be parsed as JSON.\n"+
		"You sent (first %d of %d bytes): %s\n"+
		"This usually means a backslash or control character inside a string was not escaped (write paths with /, or double the \\\\), "+
		"or the JSON was cut off before it ended. Send the call again with valid JSON.",
		toolName, n, len(input), preview)
	return &Error{Tool: toolName, Unparsable: true, msg: msg}
}

const (
	codeInvalidType      = "invalid_type"
	codeUnrecognizedKeys = "unrecognized_keys"
	codeInvalidValue     = "invalid_value"
	codeTooSmall         = "too_small"
	codeTooBig           = "too_big"
)

// issue is one schema failure, with what the validator reports of it.
type issue struct {
	code      string
	path      []any // string keys and int indexes
	expected  string
	format    string
	received  string // "undefined" when the value is missing
	keys      []string
	values    []*value
	limit     float64
	inclusive bool
}

func (i issue) dottedPath() string {
	parts := make([]string, len(i.path))
	for k, p := range i.path {
		parts[k] = fmt.Sprint(p)
	}
	return strings.Join(parts, ".")
}

func (i issue) message() string {
	switch i.code {
	case codeInvalidType:
		return fmt.Sprintf("Invalid input: expected %s, received %s", i.expected, i.received)
	case codeUnrecognizedKeys:
		quoted := make([]string, len(i.keys))
		for k, key := range i.keys {
			quoted[k] = string(encodeValue(&value{kind: kindString, str: key}))
		}
		if len(i.keys) == 1 {
			return "Unrecognized key: " + quoted[0]
		}
		return "Unrecognized keys: " + strings.Join(quoted, ", ")
	case codeInvalidValue:
		shown := make([]string, len(i.values))
		for k, v := range i.values {
			shown[k] = string(encodeValue(v))
		}
		if len(shown) == 1 {
			return "Invalid input: expected " + shown[0]
		}
		return "Invalid option: expected one of " + strings.Join(shown, "|")
	case codeTooSmall:
		return fmt.Sprintf("Too small: expected number to be %s%s", cmpOp(">", i.inclusive), formatNumber(i.limit))
	case codeTooBig:
		return fmt.Sprintf("Too big: expected number to be %s%s", cmpOp("<", i.inclusive), formatNumber(i.limit))
	}
	return "Invalid input"
}

func cmpOp(op string, inclusive bool) string {
	if inclusive {
		return op + "="
	}
	return op
}

// object renders the issue as the validator's JSON object, members in the
// validator's order.
func (i issue) object() *value {
	obj := &value{kind: kindObject}
	add := func(key string, v *value) { obj.members = append(obj.members, member{key: key, val: v}) }
	str := func(s string) *value { return &value{kind: kindString, str: s} }
	num := func(f float64) *value { return &value{kind: kindNumber, num: json.Number(formatNumber(f))} }
	switch i.code {
	case codeInvalidType:
		add("expected", str(i.expected))
		if i.format != "" {
			add("format", str(i.format))
		}
		add("code", str(i.code))
	case codeUnrecognizedKeys:
		add("code", str(i.code))
		keys := &value{kind: kindArray}
		for _, k := range i.keys {
			keys.items = append(keys.items, str(k))
		}
		add("keys", keys)
	case codeInvalidValue:
		add("code", str(i.code))
		add("values", &value{kind: kindArray, items: i.values})
	case codeTooSmall, codeTooBig:
		add("origin", str("number"))
		add("code", str(i.code))
		if i.code == codeTooSmall {
			add("minimum", num(i.limit))
		} else {
			add("maximum", num(i.limit))
		}
		add("inclusive", &value{kind: kindBool, boolean: i.inclusive})
	}
	path := &value{kind: kindArray}
	for _, p := range i.path {
		switch p := p.(type) {
		case string:
			path.items = append(path.items, str(p))
		case int:
			path.items = append(path.items, num(float64(p)))
		}
	}
	add("path", path)
	add("message", str(i.message()))
	return obj
}

// newError words schema failures as Claude Code does: missing, unexpected
// and wrongly typed parameters one per line; anything else as the
// validator's JSON issue list.
func newError(toolName string, issues []issue) *Error {
	var missing, unexpected, mistyped []string
	for _, is := range issues {
		switch {
		case is.code == codeInvalidType && len(is.path) == 0:
			// The input itself is not an object: no parameter to name.
		case is.code == codeInvalidType && is.received == "undefined":
			missing = append(missing, fmt.Sprintf("The required parameter `%s` is missing", is.dottedPath()))
		case is.code == codeUnrecognizedKeys:
			prefix := is.dottedPath()
			for _, k := range is.keys {
				if prefix != "" {
					k = prefix + "." + k
				}
				unexpected = append(unexpected, fmt.Sprintf("An unexpected parameter `%s` was provided", k))
			}
		case is.code == codeInvalidType:
			mistyped = append(mistyped, fmt.Sprintf("The parameter `%s` type is expected as `%s` but provided as `%s`", is.dottedPath(), is.expected, is.received))
		}
	}
	lines := append(append(missing, unexpected...), mistyped...)
	var msg string
	if len(lines) > 0 {
		noun := "issue"
		if len(lines) > 1 {
			noun = "issues"
		}
		msg = fmt.Sprintf("InputValidationError: %s failed due to the following %s:\n%s", toolName, noun, strings.Join(lines, "\n"))
	} else {
		list := &value{kind: kindArray}
		for _, is := range issues {
			list.items = append(list.items, is.object())
		}
		var buf bytes.Buffer
		_ = json.Indent(&buf, encodeValue(list), "", "  ") // our own valid JSON
		msg = "InputValidationError: " + buf.String()
	}
	out := &Error{Tool: toolName, msg: msg}
	for _, is := range issues {
		out.Issues = append(out.Issues, Issue{Code: is.code, Path: is.dottedPath(), Message: is.message()})
	}
	return out
}

func encodeValue(v *value) json.RawMessage {
	var buf bytes.Buffer
	v.encode(&buf)
	return buf.Bytes()
}
