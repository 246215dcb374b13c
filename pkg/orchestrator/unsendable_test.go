package orchestrator_test

import (
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/rpcserver"
)

// TestOversizedToolUse: a tool_use larger than a message to the executor
// may be gets an is_error result of its own; its sibling runs, the turn
// goes on, and the stream is not broken (no resume, no lost calls).
func TestOversizedToolUse(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(fakeapi.ToolTurn(
		fakeapi.ToolUse("toolu_big", "Write", map[string]any{"file_path": h.root + "/big.txt", "content": strings.Repeat("x", rpcserver.MaxMessageBytes+1)}),
		fakeapi.ToolUse("toolu_echo", "Bash", map[string]any{"command": "echo still here"}),
	), fakeapi.EndTurn(fakeapi.Text("Too big.")))
	s := h.session(bypass)
	res := h.run(s, "go")
	if res.StopReason != orchestrator.StopEndTurn || res.Requests != 2 {
		t.Fatalf("turn = %+v", res)
	}
	results, order := toolResults(lastMessage(t, h.fake.Requests()[1]))
	if len(order) != 2 {
		t.Fatalf("results = %v", order)
	}
	big := resultText(results["toolu_big"])
	if !isError(results["toolu_big"]) || !strings.HasPrefix(big, "<tool_use_error>InputValidationError: Write was called with input too large to send to the executor: the message would be ") {
		t.Errorf("oversized call: %q", big)
	}
	if got := resultText(results["toolu_echo"]); got != "still here" || isError(results["toolu_echo"]) {
		t.Errorf("its sibling: %q", got)
	}
	for _, ev := range events(s) {
		if ev.Kind == orchestrator.EventError {
			t.Errorf("error event: %+v", ev.Error)
		}
	}
}
