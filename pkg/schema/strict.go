package schema

import (
	"fmt"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of objects and arrays accepted in tool
// input. Tool schemas nest a few levels; anything near this is not a tool
// call but an attempt on the parser.
const MaxDepth = 64

// Issue codes of input refused before the schema is looked at.
const (
	CodeInvalidUTF8  = "invalid_utf8"
	CodeDuplicateKey = "duplicate_key"
	CodeTooDeep      = "too_deep"
)

// Input that two readers could take differently is refused before the
// schema check, whatever the tool: bytes that are not UTF-8 (one reader
// replaces them, another drops them, a third fails), a \u escape of half a
// surrogate pair (JavaScript keeps it, Go replaces it), an object that
// names a key twice (the executor's parser takes the last value, a hook
// or log reader written in another language may take the first), and
// nesting deeper than MaxDepth (parsers differ in how deep they go, and a
// recursive one may fail).

// InvalidUTF8 returns the error for a call of toolName whose input is not
// valid UTF-8, or nil. Clients use it too: the wire's strings must be
// UTF-8, so such input cannot even be sent.
func InvalidUTF8(toolName, input string) *Error {
	if utf8.ValidString(input) {
		return nil
	}
	off := 0
	for off < len(input) {
		r, n := utf8.DecodeRuneInString(input[off:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		off += n
	}
	msg := fmt.Sprintf("InputValidationError: %s was called with input that is not valid UTF-8 (byte 0x%02x at offset %d). "+
		"Tool input must be UTF-8 text; send the call again with the text as UTF-8, and binary data written with a command instead.",
		toolName, input[off], off)
	return &Error{Tool: toolName, Issues: []Issue{{Code: CodeInvalidUTF8, Message: fmt.Sprintf("byte 0x%02x at offset %d is not UTF-8", input[off], off)}}, msg: msg}
}

// Unsendable returns the error a client gives a call it cannot send, or
// nil: input that is not UTF-8 (the wire's strings must be), or a message
// of size bytes, more than limit, the most the transport carries. Sending
// either would end the whole stream, not only the call.
func Unsendable(toolName, input string, size, limit int) *Error {
	if err := InvalidUTF8(toolName, input); err != nil {
		return err
	}
	if size > limit {
		return TooLarge(toolName, size, limit)
	}
	return nil
}

// TooLarge returns the error for a call whose input makes a message of size
// bytes, more than the transport's limit, for clients that cannot send it.
func TooLarge(toolName string, size, limit int) *Error {
	msg := fmt.Sprintf("InputValidationError: %s was called with input too large to send to the executor: the message would be %d bytes, and one may carry at most %d, so the call was not run. "+
		"Send the call again with less: write a large file in parts (Write, then Bash with >> or Edit), or produce large content with a command.",
		toolName, size, limit)
	return &Error{Tool: toolName, Issues: []Issue{{Code: "too_big", Message: fmt.Sprintf("%d bytes, more than %d", size, limit)}}, msg: msg}
}

// scanText checks what the parser does not: nesting depth, and \u escapes
// of half a surrogate pair. input is valid JSON.
func scanText(toolName, input string) *Error {
	depth := 0
	inString := false
	for i := 0; i < len(input); i++ {
		c := input[i]
		if !inString {
			switch c {
			case '"':
				inString = true
			case '{', '[':
				depth++
				if depth > MaxDepth {
					msg := fmt.Sprintf("InputValidationError: %s was called with input nested more than %d levels deep (objects and arrays within each other), which is refused. "+
						"Send the call again with flatter input.", toolName, MaxDepth)
					return &Error{Tool: toolName, Issues: []Issue{{Code: CodeTooDeep, Message: fmt.Sprintf("nested more than %d levels", MaxDepth)}}, msg: msg}
				}
			case '}', ']':
				depth--
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			n, lone := escapeAt(input, i)
			if lone {
				bad := input[i : i+6]
				msg := fmt.Sprintf("InputValidationError: %s was called with input holding the escape %s at offset %d: half of a UTF-16 surrogate pair without its other half, which is no character. "+
					"Send the call again without it.", toolName, bad, i)
				return &Error{Tool: toolName, Issues: []Issue{{Code: CodeInvalidUTF8, Message: fmt.Sprintf("lone surrogate %s at offset %d", bad, i)}}, msg: msg}
			}
			i += n - 1
		}
	}
	return nil
}

// escapeAt returns the length of the escape at input[i] (a surrogate pair
// counts as one), and whether it is half of a surrogate pair without its
// other half.
func escapeAt(input string, i int) (n int, lone bool) {
	u, ok := hex4(input, i)
	if !ok {
		return 2, false // \n, \", ...
	}
	switch {
	case u >= 0xDC00 && u <= 0xDFFF:
		return 6, true // a low half with no high half before it
	case u >= 0xD800 && u <= 0xDBFF:
		if next, ok := hex4(input, i+6); ok && next >= 0xDC00 && next <= 0xDFFF {
			return 12, false
		}
		return 6, true
	}
	return 6, false
}

// hex4 reads the \uXXXX escape at input[i].
func hex4(input string, i int) (rune, bool) {
	if i+6 > len(input) || input[i] != '\\' || input[i+1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range input[i+2 : i+6] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | (c - '0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | (c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | (c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// duplicateKey is the error for an object that names key twice; path is
// the object's place in the input.
func duplicateKey(toolName, key string, path []any) *Error {
	where := "the input object"
	if len(path) > 0 {
		where = "the object at `" + issue{path: path}.dottedPath() + "`"
	}
	msg := fmt.Sprintf("InputValidationError: %s was called with input in which %s has the key `%s` more than once. "+
		"Which value was meant is ambiguous, so the call was not run; send it again with each key once.", toolName, where, key)
	return &Error{Tool: toolName, Issues: []Issue{{Code: CodeDuplicateKey, Path: issue{path: path}.dottedPath(), Message: "duplicate key " + key}}, msg: msg}
}
