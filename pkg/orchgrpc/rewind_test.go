package orchgrpc_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	orchestratorv1 "github.com/toolwire/toolwire/gen/toolwire/orchestrator/v1"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/rpcerr"
)

// Rewind over OrchestratorService: the file the turn wrote is removed, the
// conversation loses the messages from the tool_use's on, and the next
// turn's request holds what is left. A session id it does not know and a
// tool_use the conversation does not hold are refused with their reasons.
func TestRewind(t *testing.T) {
	e := newEnv(t,
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_w", "Write", map[string]any{"file_path": "made.txt", "content": "x\n"})),
		fakeapi.EndTurn(fakeapi.Text("Made it.")),
		fakeapi.EndTurn(fakeapi.Text("Again.")),
	)
	id := e.create(t, bypass)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := e.converse(t, ctx, id, 0)
	say(t, stream, "make a file")
	untilTurnComplete(t, stream, nil)
	if _, err := os.Stat(e.root + "/made.txt"); err != nil {
		t.Fatal(err)
	}

	resp, err := e.client.Rewind(ctx, &orchestratorv1.RewindRequest{SessionId: id, ToolUseId: "toolu_w"})
	if err != nil {
		t.Fatal(err)
	}
	files := resp.GetRestore().GetFiles()
	if len(files) != 1 || files[0].GetPath() != e.root+"/made.txt" || files[0].GetAction() != executorv1.RestoreAction_RESTORE_ACTION_REMOVED {
		t.Fatalf("restore %v", resp.GetRestore())
	}
	if resp.GetMessagesRemoved() != 3 || resp.GetSession().GetMessageCount() != 1 {
		t.Fatalf("response %v", resp)
	}
	if _, err := os.Stat(e.root + "/made.txt"); !os.IsNotExist(err) {
		t.Fatalf("made.txt: %v", err)
	}
	say(t, stream, "once more")
	untilTurnComplete(t, stream, nil)
	reqs := e.fake.Requests()
	msgs := reqs[len(reqs)-1].Body.Messages
	if len(msgs) != 1 || len(msgs[0].Content) != 2 || msgs[0].Content[0].Text != "make a file" || msgs[0].Content[1].Text != "once more" {
		t.Fatalf("the next request holds %+v", msgs)
	}

	for _, c := range []struct {
		req    *orchestratorv1.RewindRequest
		code   codes.Code
		reason string
	}{
		{&orchestratorv1.RewindRequest{SessionId: id, ToolUseId: "toolu_w"}, codes.InvalidArgument, rpcerr.InvalidArgument},
		{&orchestratorv1.RewindRequest{SessionId: "nope", ToolUseId: "toolu_w"}, codes.NotFound, rpcerr.SessionNotFound},
	} {
		_, err := e.client.Rewind(ctx, c.req)
		if status.Code(err) != c.code || rpcerr.Reason(err) != c.reason {
			t.Errorf("%v: %v (%s)", c.req, err, rpcerr.Reason(err))
		}
	}
}

// A rewind whose files cannot all be restored (a deny rule refuses one)
// fails with REWIND_FAILED and leaves the conversation whole.
func TestRewindRefusedByDenyRule(t *testing.T) {
	e := newEnv(t)
	keep := e.root + "/keep.txt"
	if err := os.WriteFile(keep, []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.fake.Push(
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_r", "Read", map[string]any{"file_path": keep})),
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_e", "Edit", map[string]any{"file_path": keep, "old_string": "kept", "new_string": "edited"})),
		fakeapi.EndTurn(fakeapi.Text("Edited.")),
	)
	id := e.create(t, &orchestratorv1.SessionConfig{Settings: &executorv1.Settings{
		Mode: executorv1.PermissionMode_PERMISSION_MODE_BYPASS_PERMISSIONS, Deny: []string{"Write(keep.txt)"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := e.converse(t, ctx, id, 0)
	say(t, stream, "edit it")
	untilTurnComplete(t, stream, nil)
	if b, _ := os.ReadFile(keep); string(b) != "edited\n" {
		t.Fatalf("keep.txt: %q", b)
	}
	_, err := e.client.Rewind(ctx, &orchestratorv1.RewindRequest{SessionId: id, ToolUseId: "toolu_e"})
	if status.Code(err) != codes.FailedPrecondition || rpcerr.Reason(err) != rpcerr.RewindFailed || !strings.Contains(err.Error(), "denied by the session rule Write(keep.txt)") {
		t.Fatalf("rewind: %v (%s)", err, rpcerr.Reason(err))
	}
	if b, _ := os.ReadFile(keep); string(b) != "edited\n" {
		t.Fatalf("keep.txt was restored: %q", b)
	}
	got, err := e.client.GetSession(ctx, &orchestratorv1.GetSessionRequest{SessionId: id})
	if err != nil || got.GetSession().GetMessageCount() != 6 {
		t.Fatalf("the conversation was cut: %v %v", got, err)
	}
}
