package schema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// The input schemas of a few tools, as Claude Code sends them.
var schemas = map[string]string{
	"Read": `{"type":"object","properties":{"file_path":{"type":"string"},
		"offset":{"type":"integer","minimum":0,"maximum":9007199254740991},
		"limit":{"type":"integer","exclusiveMinimum":0,"maximum":9007199254740991},
		"pages":{"type":"string"}},"required":["file_path"],"additionalProperties":false}`,
	"Bash": `{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"number"},
		"description":{"type":"string"},"run_in_background":{"type":"boolean"},
		"dangerouslyDisableSandbox":{"type":"boolean"}},"required":["command"],"additionalProperties":false}`,
	"Grep": `{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"},
		"output_mode":{"type":"string","enum":["content","files_with_matches","count"]},
		"-A":{"type":"number"},"head_limit":{"type":"number"},"multiline":{"type":"boolean"}},
		"required":["pattern"],"additionalProperties":false}`,
	"TaskOutput": `{"type":"object","properties":{"task_id":{"type":"string"},
		"block":{"default":true,"type":"boolean"},
		"timeout":{"default":30000,"type":"number","minimum":0,"maximum":600000}},
		"required":["task_id","block","timeout"],"additionalProperties":false}`,
	"Edit": `{"type":"object","properties":{"file_path":{"type":"string"},"old_string":{"type":"string"},
		"new_string":{"type":"string"},"replace_all":{"default":false,"type":"boolean"}},
		"required":["file_path","old_string","new_string"],"additionalProperties":false}`,
	"MultiEdit": `{"type":"object","properties":{"file_path":{"type":"string"},
		"edits":{"type":"array","items":{"type":"object","properties":{"old_string":{"type":"string"},
		"new_string":{"type":"string"}},"required":["old_string","new_string"],"additionalProperties":false}}},
		"required":["file_path","edits"],"additionalProperties":false}`,
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		tool  string
		input string
		want  string // normalized input on success
		err   string // exact message on failure
	}{
		{name: "ok", tool: "Read", input: `{"file_path": "/a/b.txt"}`, want: `{"file_path":"/a/b.txt"}`},
		{name: "member order kept", tool: "Read", input: `{"limit":5,"file_path":"a","offset":2}`, want: `{"limit":5,"file_path":"a","offset":2}`},
		{name: "defaults not injected", tool: "TaskOutput", input: `{"task_id":"b1"}`, want: `{"task_id":"b1"}`},
		{name: "numeric string coerced", tool: "Read", input: `{"file_path":"a","offset":"2"}`, want: `{"file_path":"a","offset":2}`},
		{name: "negative numeric string coerced", tool: "Bash", input: `{"command":"x","timeout":"-1.5"}`, want: `{"command":"x","timeout":-1.5}`},
		{name: "html not escaped", tool: "Bash", input: `{"command":"a<b && c>d"}`, want: `{"command":"a<b && c>d"}`},
		{name: "duplicate key refused", tool: "Bash", input: `{"command":"a","command":"b"}`,
			err: "InputValidationError: Bash was called with input in which the input object has the key `command` more than once. Which value was meant is ambiguous, so the call was not run; send it again with each key once."},
		{name: "empty input is {}", tool: "TaskOutput", input: ``, err: "InputValidationError: TaskOutput failed due to the following issue:\nThe required parameter `task_id` is missing"},
		{name: "blank input is {}", tool: "Bash", input: " \n", err: "InputValidationError: Bash failed due to the following issue:\nThe required parameter `command` is missing"},
		{
			name: "missing", tool: "Read", input: `{}`,
			err: "InputValidationError: Read failed due to the following issue:\nThe required parameter `file_path` is missing",
		},
		{
			name: "wrong type", tool: "Read", input: `{"file_path": 42}`,
			err: "InputValidationError: Read failed due to the following issue:\nThe parameter `file_path` type is expected as `string` but provided as `number`",
		},
		{
			name: "number from non-numeric string", tool: "Bash", input: `{"command":"x","timeout":"soon"}`,
			err: "InputValidationError: Bash failed due to the following issue:\nThe parameter `timeout` type is expected as `number` but provided as `string`",
		},
		{
			name: "boolean from string", tool: "Bash", input: `{"command":"x","run_in_background":"true"}`,
			err: "InputValidationError: Bash failed due to the following issue:\nThe parameter `run_in_background` type is expected as `boolean` but provided as `string`",
		},
		{
			name: "fraction into integer", tool: "Read", input: `{"file_path":"a","offset":1.5}`,
			err: "InputValidationError: Read failed due to the following issue:\nThe parameter `offset` type is expected as `int` but provided as `number`",
		},
		{
			name: "fraction string into integer", tool: "Read", input: `{"file_path":"a","offset":"1.5"}`,
			err: "InputValidationError: Read failed due to the following issue:\nThe parameter `offset` type is expected as `int` but provided as `number`",
		},
		{
			name: "string into integer", tool: "Read", input: `{"file_path":"a","limit":"ten"}`,
			err: "InputValidationError: Read failed due to the following issue:\nThe parameter `limit` type is expected as `number` but provided as `string`",
		},
		{
			name: "null and array and object", tool: "Bash", input: `{"command":null,"timeout":[1],"description":{}}`,
			err: "InputValidationError: Bash failed due to the following issues:\n" +
				"The parameter `command` type is expected as `string` but provided as `null`\n" +
				"The parameter `timeout` type is expected as `number` but provided as `array`\n" +
				"The parameter `description` type is expected as `string` but provided as `object`",
		},
		{
			name: "unexpected", tool: "Read", input: `{"file_path":"a","extra":1}`,
			err: "InputValidationError: Read failed due to the following issue:\nAn unexpected parameter `extra` was provided",
		},
		{
			name: "several issues, missing then unexpected then type", tool: "Edit",
			input: `{"zeta":1,"file_path":7,"old_string":"x","alpha":true}`,
			err: "InputValidationError: Edit failed due to the following issues:\n" +
				"The required parameter `new_string` is missing\n" +
				"An unexpected parameter `zeta` was provided\n" +
				"An unexpected parameter `alpha` was provided\n" +
				"The parameter `file_path` type is expected as `string` but provided as `number`",
		},
		{
			name: "bad enum", tool: "Grep", input: `{"pattern":"x","output_mode":"lines"}`,
			err: "InputValidationError: [\n  {\n    \"code\": \"invalid_value\",\n    \"values\": [\n      \"content\",\n      \"files_with_matches\",\n      \"count\"\n    ],\n    \"path\": [\n      \"output_mode\"\n    ],\n    \"message\": \"Invalid option: expected one of \\\"content\\\"|\\\"files_with_matches\\\"|\\\"count\\\"\"\n  }\n]",
		},
		{
			name: "enum of wrong type is still an enum issue", tool: "Grep", input: `{"pattern":"x","output_mode":3}`,
			err: "InputValidationError: [\n  {\n    \"code\": \"invalid_value\",\n    \"values\": [\n      \"content\",\n      \"files_with_matches\",\n      \"count\"\n    ],\n    \"path\": [\n      \"output_mode\"\n    ],\n    \"message\": \"Invalid option: expected one of \\\"content\\\"|\\\"files_with_matches\\\"|\\\"count\\\"\"\n  }\n]",
		},
		{
			name: "listed issues hide enum issues", tool: "Grep", input: `{"output_mode":"lines"}`,
			err: "InputValidationError: Grep failed due to the following issue:\nThe required parameter `pattern` is missing",
		},
		{
			name: "below minimum", tool: "Read", input: `{"file_path":"a","offset":-1}`,
			err: "InputValidationError: [\n  {\n    \"origin\": \"number\",\n    \"code\": \"too_small\",\n    \"minimum\": 0,\n    \"inclusive\": true,\n    \"path\": [\n      \"offset\"\n    ],\n    \"message\": \"Too small: expected number to be >=0\"\n  }\n]",
		},
		{
			name: "exclusive minimum", tool: "Read", input: `{"file_path":"a","limit":0}`,
			err: "InputValidationError: [\n  {\n    \"origin\": \"number\",\n    \"code\": \"too_small\",\n    \"minimum\": 0,\n    \"inclusive\": false,\n    \"path\": [\n      \"limit\"\n    ],\n    \"message\": \"Too small: expected number to be >0\"\n  }\n]",
		},
		{
			name: "above maximum", tool: "TaskOutput", input: `{"task_id":"b","timeout":600001}`,
			err: "InputValidationError: [\n  {\n    \"origin\": \"number\",\n    \"code\": \"too_big\",\n    \"maximum\": 600000,\n    \"inclusive\": true,\n    \"path\": [\n      \"timeout\"\n    ],\n    \"message\": \"Too big: expected number to be <=600000\"\n  }\n]",
		},
		{
			name: "input not an object", tool: "Bash", input: `["ls"]`,
			err: "InputValidationError: [\n  {\n    \"expected\": \"object\",\n    \"code\": \"invalid_type\",\n    \"path\": [],\n    \"message\": \"Invalid input: expected object, received array\"\n  }\n]",
		},
		{
			name: "nested array items", tool: "MultiEdit",
			input: `{"file_path":"a","edits":[{"old_string":"x","new_string":"y"},{"old_string":1,"new_string":"y","extra":true},{"new_string":"z"}]}`,
			err: "InputValidationError: MultiEdit failed due to the following issues:\n" +
				"The required parameter `edits.2.old_string` is missing\n" +
				"An unexpected parameter `edits.1.extra` was provided\n" +
				"The parameter `edits.1.old_string` type is expected as `string` but provided as `number`",
		},
		{
			name: "truncated JSON", tool: "Bash", input: `{"command": "echo hi"`,
			err: "InputValidationError: Bash was called with input that could not be parsed as JSON.\n" +
				"You sent (first 21 of 21 bytes): {\"command\": \"echo hi\"\n" +
				"This usually means a backslash or control character inside a string was not escaped (write paths with /, or double the \\\\), " +
				"or the JSON was cut off before it ended. Send the call again with valid JSON.",
		},
		{
			name: "trailing garbage", tool: "Bash", input: `{"command":"ls"} x`,
			err: "InputValidationError: Bash was called with input that could not be parsed as JSON.\n" +
				"You sent (first 18 of 18 bytes): {\"command\":\"ls\"} x\n" +
				"This usually means a backslash or control character inside a string was not escaped (write paths with /, or double the \\\\), " +
				"or the JSON was cut off before it ended. Send the call again with valid JSON.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Validate(tt.tool, json.RawMessage(schemas[tt.tool]), tt.input)
			if tt.err != "" {
				var verr *Error
				if !errors.As(err, &verr) {
					t.Fatalf("got %s, %v; want *Error", got, err)
				}
				if err.Error() != tt.err {
					t.Fatalf("message mismatch\ngot:  %q\nwant: %q", err.Error(), tt.err)
				}
				if len(verr.Issues) == 0 && !verr.Unparsable {
					t.Error("an error with neither issues nor Unparsable")
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if string(got) != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestParseErrorPreview(t *testing.T) {
	input := `{"command": "` + strings.Repeat("é", 300) // 2 bytes each: the cut falls mid-character
	_, err := Validate("Bash", json.RawMessage(schemas["Bash"]), input)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if !strings.Contains(msg, "You sent (first 199 of 613 bytes): ") {
		t.Fatalf("preview header wrong: %q", msg)
	}
	line := strings.Split(msg, "\n")[1]
	if strings.ContainsRune(line, '\uFFFD') {
		t.Errorf("preview split a character: %q", line)
	}

}

func TestUnknownTool(t *testing.T) {
	if got, want := UnknownTool("NoSuchTool"), "Error: No such tool available: NoSuchTool"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestCompileErrors(t *testing.T) {
	for _, s := range []string{
		`not json`,
		`[]`,
		`{"type":"widget"}`,
		`{"type":"object","properties":{"a":{"type":3}}}`,
		`{"type":"object","required":"a"}`,
		`{"enum":[]}`,
		`{"minimum":"0"}`,
	} {
		if _, err := Compile(json.RawMessage(s)); err == nil {
			t.Errorf("Compile(%s) succeeded", s)
		}
		_, err := Validate("T", json.RawMessage(s), `{}`)
		var verr *Error
		if err == nil || errors.As(err, &verr) {
			t.Errorf("Validate with bad schema %s: got %v, want a non-*Error error", s, err)
		}
	}
}

func TestIssues(t *testing.T) {
	_, err := Validate("Read", json.RawMessage(schemas["Read"]), `{"offset":-2,"x":1}`)
	var verr *Error
	if !errors.As(err, &verr) {
		t.Fatal(err)
	}
	want := []Issue{
		{Code: "invalid_type", Path: "file_path", Message: "Invalid input: expected string, received undefined"},
		{Code: "too_small", Path: "offset", Message: "Too small: expected number to be >=0"},
		{Code: "unrecognized_keys", Path: "", Message: `Unrecognized key: "x"`},
	}
	if len(verr.Issues) != len(want) {
		t.Fatalf("issues %+v, want %+v", verr.Issues, want)
	}
	for i := range want {
		if verr.Issues[i] != want[i] {
			t.Errorf("issue %d: %+v, want %+v", i, verr.Issues[i], want[i])
		}
	}
}

func TestSingleValueEnumAndNumbers(t *testing.T) {
	s := `{"type":"object","properties":{"k":{"enum":["only"]},"n":{"enum":[1,2.5]},
		"big":{"type":"number","maximum":1e21}},"additionalProperties":false}`
	tests := map[string]string{
		`{"k":"other"}`: `"message": "Invalid input: expected \"only\""`,
		`{"n":3}`:       `"message": "Invalid option: expected one of 1|2.5"`,
		`{"big":2e21}`:  `"maximum": 1e+21`,
	}
	for input, want := range tests {
		_, err := Validate("T", json.RawMessage(s), input)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want it to contain %s", input, err, want)
		}
	}
	if _, err := Validate("T", json.RawMessage(s), `{"n":2.50}`); err != nil {
		t.Errorf("2.50 should equal the enum value 2.5: %v", err)
	}
}

func FuzzValidate(f *testing.F) {
	for _, seed := range []string{``, `{}`, `{"file_path":"a"}`, `{"file_path":"a","offset":"3"}`,
		`{"file_path":1.5}`, `{"edits":[{"old_string":1}]}`, `{"command":"x"`, `[1,2]`, `null`,
		`{"output_mode":"x","pattern":"p"}`, `{"a":{"b":[]}}`, "{\"file_path\":\"\xff\"}"} {
		f.Add(seed)
	}
	compiled := make(map[string]*Schema)
	for name, s := range schemas {
		c, err := Compile(json.RawMessage(s))
		if err != nil {
			f.Fatal(err)
		}
		compiled[name] = c
	}
	f.Fuzz(func(t *testing.T, input string) {
		for name, s := range compiled {
			out, err := s.Validate(name, input)
			if err != nil {
				var verr *Error
				if !errors.As(err, &verr) {
					t.Fatalf("%s: error of type %T", name, err)
				}
				if !strings.HasPrefix(err.Error(), "InputValidationError: ") {
					t.Fatalf("%s: message %q lacks the prefix", name, err.Error())
				}
				continue
			}
			if !json.Valid(out) || out[0] != '{' {
				t.Fatalf("%s: normalized input %q is not a JSON object", name, out)
			}
			again, err := s.Validate(name, string(out))
			if err != nil {
				t.Fatalf("%s: normalized input %s fails: %v", name, out, err)
			}
			if string(again) != string(out) {
				t.Fatalf("%s: normalizing is not idempotent: %s then %s", name, out, again)
			}
		}
	})
}

// TestStrictInput: input two readers could take differently is refused
// before the schema check, with an error naming what is wrong.
func TestStrictInput(t *testing.T) {
	open := `{"type":"object"}`
	nest := func(n int) string { return `{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}` }
	tests := []struct {
		name, schema, input string
		code                string // "" for accepted
		msg                 string // exact message, when given
	}{
		{"duplicate key", schemas["Bash"], `{"command": "echo a", "command": "rm x"}`, CodeDuplicateKey,
			"InputValidationError: Bash was called with input in which the input object has the key `command` more than once. Which value was meant is ambiguous, so the call was not run; send it again with each key once."},
		{"duplicate key spelt with an escape", schemas["Bash"], `{"command": "echo a", "comm\u0061nd": "rm x"}`, CodeDuplicateKey, ""},
		{"duplicate key nested", schemas["MultiEdit"], `{"file_path":"f","edits":[{"old_string":"a","new_string":"b"},{"old_string":"a","old_string":"c","new_string":"d"}]}`, CodeDuplicateKey,
			"InputValidationError: MultiEdit was called with input in which the object at `edits.1` has the key `old_string` more than once. Which value was meant is ambiguous, so the call was not run; send it again with each key once."},
		{"same key in two objects", schemas["MultiEdit"], `{"file_path":"f","edits":[{"old_string":"a","new_string":"b"},{"old_string":"a","new_string":"b"}]}`, "", ""},
		{"duplicate key where the schema allows any", open, `{"x":{"y":1,"y":2}}`, CodeDuplicateKey, ""},
		{"invalid UTF-8", schemas["Bash"], "{\"command\": \"echo \xff\xfe\"}", CodeInvalidUTF8,
			"InputValidationError: Bash was called with input that is not valid UTF-8 (byte 0xff at offset 18). Tool input must be UTF-8 text; send the call again with the text as UTF-8, and binary data written with a command instead."},
		{"invalid UTF-8 in unparsable input", schemas["Bash"], "{\"command\": \"\xc3", CodeInvalidUTF8, ""},
		{"lone high surrogate", schemas["Bash"], `{"command": "echo \ud800"}`, CodeInvalidUTF8,
			"InputValidationError: Bash was called with input holding the escape \\ud800 at offset 18: half of a UTF-16 surrogate pair without its other half, which is no character. Send the call again without it."},
		{"lone low surrogate", schemas["Bash"], `{"command": "echo \uDC00x"}`, CodeInvalidUTF8, ""},
		{"high surrogate before another escape", schemas["Bash"], `{"command": "\ud800\u0041"}`, CodeInvalidUTF8, ""},
		{"surrogate pair", schemas["Bash"], `{"command": "echo \ud83d\ude00 \u00e9"}`, "", ""},
		{"escaped backslash before u", schemas["Bash"], `{"command": "echo \\ud800"}`, "", ""},
		{"surrogate in a key", open, `{"\udfff": 1}`, CodeInvalidUTF8, ""},
		{"deep but within the limit", open, nest(MaxDepth), "", ""},
		{"too deep", open, nest(MaxDepth + 1), CodeTooDeep,
			"InputValidationError: T was called with input nested more than 64 levels deep (objects and arrays within each other), which is refused. Send the call again with flatter input."},
		{"far too deep", open, `{"a":` + strings.Repeat("[", 1_000_000) + strings.Repeat("]", 1_000_000) + `}`, CodeTooDeep, ""},
		{"brackets in strings do not count", open, `{"a":"` + strings.Repeat("[{", 100) + `"}`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := "T"
			for name, s := range schemas {
				if s == tt.schema {
					tool = name
				}
			}
			_, err := Validate(tool, json.RawMessage(tt.schema), tt.input)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var verr *Error
			if !errors.As(err, &verr) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if len(verr.Issues) != 1 || verr.Issues[0].Code != tt.code {
				t.Errorf("issues %+v, want one %s", verr.Issues, tt.code)
			}
			if tt.msg != "" && err.Error() != tt.msg {
				t.Errorf("message\ngot:  %q\nwant: %q", err.Error(), tt.msg)
			}
		})
	}
}

// TestSchemaDuplicateKeys: a schema (which the model did not write) may
// repeat a key; the last one counts, as before.
func TestSchemaDuplicateKeys(t *testing.T) {
	s := `{"type":"object","properties":{"a":{"type":"string"}},"properties":{"b":{"type":"string"}},"additionalProperties":false}`
	if _, err := Validate("T", json.RawMessage(s), `{"b":"x"}`); err != nil {
		t.Fatal(err)
	}
}
