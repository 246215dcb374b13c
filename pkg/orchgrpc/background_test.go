package orchgrpc_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	orchestratorv1 "github.com/toolwire/toolwire/gen/toolwire/orchestrator/v1"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
)

// A client moves the turn's running Bash call to the background: the
// executor acknowledges, the call's result is the launch text with the
// task id, the turn goes on to the model with it, and the command keeps
// running until it ends by itself.
func TestConverseBackground(t *testing.T) {
	e := newEnv(t,
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_w", "Bash", map[string]any{"command": "echo waiting; while [ ! -e stop ]; do sleep 0.05; done; echo stopped > ended"})),
		fakeapi.EndTurn(fakeapi.Text("It runs in the background.")),
	)
	id := e.create(t, bypass)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := e.converse(t, ctx, id, 0)
	say(t, stream, "wait for the file")
	var ack *executorv1.BackgroundAck
	var result *executorv1.Result
	asked := false
	evs := untilTurnComplete(t, stream, func(r *orchestratorv1.ConverseResponse) {
		if p := r.GetToolProgress(); p != nil && strings.Contains(string(p.GetOutput()), "waiting") && !asked {
			asked = true
			if err := stream.Send(&orchestratorv1.ConverseRequest{Msg: &orchestratorv1.ConverseRequest_Background{Background: &executorv1.Background{ToolUseId: "toolu_w"}}}); err != nil {
				t.Error(err)
			}
		}
		if a := r.GetBackgroundAck(); a != nil {
			ack = a
		}
		if tr := r.GetToolResult(); tr != nil {
			result = tr
		}
	})
	if tc := evs[len(evs)-1].GetTurnComplete(); tc.GetStopReason() != orchestratorv1.StopReason_STOP_REASON_END_TURN {
		t.Fatalf("turn complete %v", tc)
	}
	if ack == nil || !ack.GetMoved() || ack.GetToolUseId() != "toolu_w" {
		t.Fatalf("ack %v", ack)
	}
	const launch = "Command running in background with ID: b"
	if got := result.GetContent()[0].GetText().GetText(); result.GetToolUseId() != "toolu_w" || result.GetIsError() || !strings.HasPrefix(got, launch) {
		t.Fatalf("result %v", result)
	}
	reqs := e.fake.Requests()
	msgs := reqs[len(reqs)-1].Body.Messages
	if sent := msgs[len(msgs)-1].Content[0]; sent.ToolUseID != "toolu_w" || !strings.HasPrefix(sent.Content[0].Text, launch) {
		t.Fatalf("the model got %+v", sent)
	}
	// The command still runs: it ends when told to.
	if _, err := os.Stat(e.root + "/ended"); err == nil {
		t.Fatal("the command ended before it was told to")
	}
	if err := os.WriteFile(e.root+"/stop", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(e.root + "/ended"); string(b) == "stopped\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the backgrounded command did not go on to its end")
		}
	}
}
