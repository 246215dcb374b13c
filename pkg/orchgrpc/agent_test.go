package orchgrpc_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	orchestratorv1 "github.com/toolwire/toolwire/gen/toolwire/orchestrator/v1"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
)

// A subagent's events come on the conversation's stream with the Agent
// call's id as parent_tool_use_id; the conversation's own have none.
func TestConverseSubagentEvents(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(e.root+"/a.txt", []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.fake.SetFallback(func(r *fakeapi.Request) fakeapi.Reply {
		sub := strings.Contains(r.Body.System[0].Text, "agent started by another agent")
		switch {
		case !sub && len(r.Body.Messages) == 1:
			return fakeapi.ToolTurn(fakeapi.ToolUse("toolu_agent", "Agent", map[string]any{"description": "read", "prompt": "read a.txt"}))
		case sub && len(r.Body.Messages) == 1:
			return fakeapi.ToolTurn(fakeapi.ToolUse("toolu_sub", "Read", map[string]any{"file_path": e.root + "/a.txt"}))
		case sub:
			return fakeapi.EndTurn(fakeapi.Text("alpha"))
		}
		return fakeapi.EndTurn(fakeapi.Text("It says alpha."))
	})
	id := e.create(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := e.converse(t, ctx, id, 0)
	say(t, stream, "what is in a.txt?")
	parents := map[string]string{} // "tool_use toolu_x" or "tool_result toolu_x" -> parent
	for _, r := range untilTurnComplete(t, stream, nil) {
		switch ev := r.GetEvent().(type) {
		case *orchestratorv1.ConverseResponse_ToolUse:
			parents["tool_use "+ev.ToolUse.GetId()] = r.GetParentToolUseId()
		case *orchestratorv1.ConverseResponse_ToolResult:
			parents["tool_result "+ev.ToolResult.GetToolUseId()] = r.GetParentToolUseId()
		}
	}
	want := map[string]string{
		"tool_use toolu_agent": "", "tool_result toolu_agent": "",
		"tool_use toolu_sub": "toolu_agent", "tool_result toolu_sub": "toolu_agent",
	}
	if len(parents) != len(want) {
		t.Fatalf("events: %v", parents)
	}
	for k, v := range want {
		if p, ok := parents[k]; !ok || p != v {
			t.Errorf("%s: parent %q (seen %v), want %q", k, p, ok, v)
		}
	}
	_ = stream.CloseSend()
}
