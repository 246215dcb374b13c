package execgrpc_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
)

// TestAmbiguousInputRefused: input two readers could take differently is
// refused before anything runs, for a built-in tool and an MCP tool alike,
// with an is_error result that says what is wrong.
func TestAmbiguousInputRefused(t *testing.T) {
	h, root := permHarness(t, execsvc.Config{
		Operator: settings.Settings{Permissions: settings.Permissions{DefaultMode: permission.ModeBypass}},
	})
	bin := buildExample(t, root)
	s := h.start(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{
		McpServers: map[string]*executorv1.McpServerConfig{"ex": {Command: bin}},
	}}})
	cases := []struct {
		id, tool, input, want string
	}{
		{"dup", "Bash", `{"command": "echo a > a.txt", "command": "echo b > b.txt"}`,
			"<tool_use_error>InputValidationError: Bash was called with input in which the input object has the key `command` more than once. Which value was meant is ambiguous, so the call was not run; send it again with each key once.</tool_use_error>"},
		{"mcp", "mcp__ex__echo", `{"text": "a", "text": "b"}`,
			"<tool_use_error>InputValidationError: mcp__ex__echo was called with input in which the input object has the key `text` more than once. Which value was meant is ambiguous, so the call was not run; send it again with each key once.</tool_use_error>"},
		{"surrogate", "Write", `{"file_path": "c.txt", "content": "\udc00"}`,
			"<tool_use_error>InputValidationError: Write was called with input holding the escape \\udc00 at offset 35: half of a UTF-16 surrogate pair without its other half, which is no character. Send the call again without it.</tool_use_error>"},
		{"deep", "mcp__ex__echo", `{"text": "x", "extra": ` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
			"<tool_use_error>InputValidationError: mcp__ex__echo was called with input nested more than 64 levels deep (objects and arrays within each other), which is refused. Send the call again with flatter input.</tool_use_error>"},
	}
	for i, c := range cases {
		s.useTool(c.id, "msg_"+c.id, c.tool, c.input)
		r := s.results(1)[0]
		if r.GetToolUseId() != c.id || !r.GetIsError() || r.GetOutcome() != executorv1.Outcome_OUTCOME_INVALID_INPUT || text(r) != c.want {
			t.Errorf("case %d (%s): %v\ntext %q\nwant %q", i, c.id, r, text(r), c.want)
		}
	}
	for _, f := range []string{"a.txt", "b.txt", "c.txt"} {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			t.Errorf("%s was written: a refused call ran", f)
		}
	}
}
