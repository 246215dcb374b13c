package schema

import (
	"encoding/json"
	"testing"
)

// BenchmarkValidate checks the inputs of the calls an agent makes most: a
// Read, a Bash command with quotes and escapes, and an Edit.
func BenchmarkValidate(b *testing.B) {
	for _, bc := range []struct{ tool, input string }{
		{"Read", `{"file_path":"/home/dev/project/internal/server/handler.go"}`},
		{"Bash", `{"command":"go test ./... 2>&1 | grep -v \"^ok\" && echo \"done\\n\"","description":"Run the tests","timeout":120000}`},
		{"Edit", `{"file_path":"/home/dev/project/main.go","old_string":"\tfmt.Println(\"hello\")\n","new_string":"\tfmt.Println(\"hello, world\")\n","replace_all":false}`},
	} {
		s, err := Compile(json.RawMessage(schemas[bc.tool]))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.tool, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Validate(bc.tool, bc.input); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
