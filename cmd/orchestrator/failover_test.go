package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	orchv1 "github.com/toolwire/toolwire/gen/toolwire/orchestrator/v1"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/orchestrator/pgstore/pgtest"
	"github.com/toolwire/toolwire/pkg/rpcerr"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// replica is one `orchestrator serve` on a shared PostgreSQL store.
type replica struct {
	name string
	addr string
	cmd  *exec.Cmd
	logs *bytes.Buffer
}

// startReplica runs `orchestrator serve` with the store from
// TOOLWIRE_STORE (the way a Kubernetes Secret gives it) and a short lease;
// with dsn empty, on transcript files instead.
func startReplica(t testing.TB, fake *fakeapi.Server, dsn, name, executor string) *replica {
	t.Helper()
	addr := freeAddr(t)
	args := []string{"serve", "--listen", addr, "--insecure", "--replica", name, "--lease-ttl", "2s",
		"--executor", executor, "--executor-insecure", "--log-format", "json", "--log-level", "warn"}
	if dsn == "" {
		args = append(args, "--sessions-dir", t.TempDir())
	}
	cmd := exec.Command(orchestratorBin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "ANTHROPIC_API_KEY=k",
		"ANTHROPIC_BASE_URL=" + fake.URL, "TOOLWIRE_STORE=" + dsn}
	r := &replica{name: name, addr: addr, cmd: cmd, logs: &bytes.Buffer{}}
	startServing(t, cmd, addr, "replica "+name, "toolwire.orchestrator.v1.OrchestratorService", r.logs)
	return r
}

// kill ends the replica with SIGKILL: no shutdown, no hand-over.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = r.cmd.Wait()
}

func dial(t testing.TB, addr string) orchv1.OrchestratorServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return orchv1.NewOrchestratorServiceClient(conn)
}

// seen is an event as the client saw it: its sequence number and what it
// was.
type seen struct {
	seq  uint64
	what string
}

func describe(r *orchv1.ConverseResponse) string {
	switch {
	case r.GetToolUse() != nil:
		return "tool_use " + r.GetToolUse().GetId()
	case r.GetToolResult() != nil:
		return "tool_result " + r.GetToolResult().GetToolUseId()
	case r.GetTurnComplete() != nil:
		return "turn_complete " + r.GetTurnComplete().GetText()
	case r.GetTextDelta() != nil:
		return "text " + r.GetTextDelta().GetText()
	case r.GetError() != nil:
		return "error " + r.GetError().GetKind()
	}
	return fmt.Sprintf("%T", r.GetEvent())
}

// follow attaches to session id on addr after sequence after and sends
// text if it is not empty; it returns the stream, whose Attached it has
// read.
func follow(t *testing.T, ctx context.Context, addr, id string, after uint64, text string) orchv1.OrchestratorService_ConverseClient {
	t.Helper()
	stream, err := dial(t, addr).Converse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&orchv1.ConverseRequest{Msg: &orchv1.ConverseRequest_Attach{Attach: &orchv1.Attach{SessionId: id, LastSequence: after}}}); err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil || first.GetAttached() == nil {
		t.Fatalf("attach to %s on %s: %v %v", id, addr, first, err)
	}
	if text != "" {
		if err := stream.Send(&orchv1.ConverseRequest{Msg: &orchv1.ConverseRequest_UserMessage{UserMessage: &orchv1.UserMessage{Text: text}}}); err != nil {
			t.Fatal(err)
		}
	}
	return stream
}

// createBypass creates session id on addr in bypassPermissions mode.
func createBypass(t *testing.T, ctx context.Context, addr, id string) {
	t.Helper()
	if _, err := dial(t, addr).CreateSession(ctx, &orchv1.CreateSessionRequest{SessionId: id, Config: &orchv1.SessionConfig{
		Settings: &executorv1.Settings{Mode: executorv1.PermissionMode_PERMISSION_MODE_BYPASS_PERMISSIONS},
	}}); err != nil {
		t.Fatal(err)
	}
}

// clientView is what a client saw of a session, over any number of
// streams and replicas.
type clientView struct {
	got  []seen
	last uint64 // the newest sequence number seen
}

// record adds r, which must come after every event seen.
func (v *clientView) record(t *testing.T, r *orchv1.ConverseResponse) {
	t.Helper()
	if r.GetSequence() <= v.last {
		t.Errorf("event %d (%s) after %d: out of order or twice", r.GetSequence(), describe(r), v.last)
	}
	v.last = r.GetSequence()
	v.got = append(v.got, seen{r.GetSequence(), describe(r)})
}

// count returns how many of the events seen were what.
func (v *clientView) count(what string) int {
	n := 0
	for _, e := range v.got {
		if e.what == what {
			n++
		}
	}
	return n
}

// until records the events of stream until done reports true.
func (v *clientView) until(t *testing.T, stream orchv1.OrchestratorService_ConverseClient, done func() bool) {
	t.Helper()
	for !done() {
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %v: %v", v.got, err)
		}
		v.record(t, r)
	}
}

// untilToolUse records the events of stream up to its first tool_use.
func (v *clientView) untilToolUse(t *testing.T, stream orchv1.OrchestratorService_ConverseClient) {
	t.Helper()
	n := len(v.got)
	v.until(t, stream, func() bool { return len(v.got) > n && strings.HasPrefix(v.got[len(v.got)-1].what, "tool_use ") })
}

// untilTurnComplete records the events of stream up to the turn's end.
func (v *clientView) untilTurnComplete(t *testing.T, stream orchv1.OrchestratorService_ConverseClient) *orchv1.TurnComplete {
	t.Helper()
	for {
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("before the turn's end: %v", err)
		}
		v.record(t, r)
		if done := r.GetTurnComplete(); done != nil {
			return done
		}
	}
}

// rest records the events of stream until it ends (its replica is gone).
func (v *clientView) rest(t *testing.T, stream orchv1.OrchestratorService_ConverseClient) {
	t.Helper()
	for {
		r, err := stream.Recv()
		if err != nil {
			return
		}
		v.record(t, r)
	}
}

// waitRunning waits until a process whose command line holds arg runs.
func waitRunning(t *testing.T, ctx context.Context, arg string) {
	t.Helper()
	for len(pidsWith(arg)) == 0 {
		if ctx.Err() != nil {
			t.Fatalf("no process with %s ever ran", arg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFailoverMidTurn runs two orchestrator replicas on one PostgreSQL and
// one toolsvc. A turn runs a quick and a long Bash call on replica a, which
// is killed with SIGKILL after the quick one's result and while the long
// one runs; replica b takes the turn over once the
// lease expires, gets the call's result from the executor (which kept
// running it) and asks the model again; b is killed while that model
// request is pending, and a replica started anew in a's place takes the
// turn over, issues the request again and completes the turn. The client
// reconnects to whichever replica lives and receives every event after the
// last one it saw, each call's result once; the long call ran exactly
// once.
func TestFailoverMidTurn(t *testing.T) {
	dsn := pgtest.DSN(t)
	root := sandboxtest.Dir(t)
	toolsvc := startToolsvc(t, root)
	const sleepArg = "4.7193" // names the call's process
	pending := make(chan struct{})
	defer close(pending)
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(
			fakeapi.ToolUse("toolu_quick", "Bash", map[string]any{"command": "echo quick"}),
			fakeapi.ToolUse("toolu_long", "Bash", map[string]any{
				"command": "printf 'x\\n' >> ledger.toolu_long; sleep " + sleepArg + "; echo long-done"})),
		// The request after the result hangs until its replica dies.
		fakeapi.EndTurn(fakeapi.Block{Type: "text", Text: "never sent", Wait: pending}),
		fakeapi.EndTurn(fakeapi.Text("All done.")),
	)
	a := startReplica(t, fake, dsn, "a", toolsvc)
	b := startReplica(t, fake, dsn, "b", toolsvc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Any replica serves any session: create on b, converse on a.
	createBypass(t, ctx, b.addr, "fo")
	var view clientView
	stream := follow(t, ctx, a.addr, "fo", 0, "run the long job")
	view.untilToolUse(t, stream)
	first := view.got[0].seq - 1
	view.until(t, stream, func() bool { return view.count("tool_result toolu_quick") > 0 })
	// The long call runs on the executor: kill the replica running the
	// turn.
	waitRunning(t, ctx, sleepArg)
	// While a runs the turn, b refuses a second one: SESSION_BUSY.
	busy := follow(t, ctx, b.addr, "fo", 0, "a second turn")
	for {
		r, err := busy.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e := r.GetError(); e != nil {
			if e.GetReason() != rpcerr.SessionBusy || !strings.Contains(e.GetMessage(), "replica a") {
				t.Fatalf("second turn on b: %v, want SESSION_BUSY naming replica a", e)
			}
			break
		}
	}
	a.kill(t)
	view.rest(t, stream)
	if len(pidsWith(sleepArg)) == 0 {
		t.Fatal("the Bash call ended with the replica: it must run on")
	}

	// Reconnect to b, which takes the turn over once a's lease expires.
	stream = follow(t, ctx, b.addr, "fo", view.last, "")
	streamDone := make(chan struct{})
	var onB []*orchv1.ConverseResponse
	go func() {
		defer close(streamDone)
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			onB = append(onB, r)
		}
	}()
	if _, err := fake.WaitRequests(ctx, 2); err != nil {
		t.Fatalf("b never asked the model with the call's result: %v", err)
	}
	// b's request is pending: kill b too.
	b.kill(t)
	<-streamDone
	for _, r := range onB {
		view.record(t, r)
	}

	// A replica started in a's place takes the turn over and finishes it.
	a2 := startReplica(t, fake, dsn, "a2", toolsvc)
	stream = follow(t, ctx, a2.addr, "fo", view.last, "")
	done := view.untilTurnComplete(t, stream)
	if done.GetStopReason() != orchv1.StopReason_STOP_REASON_END_TURN || done.GetText() != "All done." {
		t.Fatalf("turn complete: %v", done)
	}

	// Every event after the first: a client that attaches now, after the
	// sequence the first one started from, reads them all from the store.
	witness := follow(t, ctx, a2.addr, "fo", first, "")
	var want []seen
	for {
		r, err := witness.Recv()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, seen{r.GetSequence(), describe(r)})
		if r.GetTurnComplete() != nil {
			break
		}
	}
	t.Logf("events the client saw over three replicas: %v", view.got)
	if !slices.Equal(view.got, want) {
		t.Errorf("the client saw, over three replicas:\n%v\nthe store holds:\n%v", view.got, want)
	}
	for _, id := range []string{"toolu_quick", "toolu_long"} {
		if uses, results := view.count("tool_use "+id), view.count("tool_result "+id); uses != 1 || results != 1 {
			t.Errorf("the client saw %d tool_use and %d tool_result events of %s, want 1 and 1", uses, results, id)
		}
	}

	// The executor ran the call once.
	ledger, err := os.ReadFile(filepath.Join(root, "ledger.toolu_long"))
	if err != nil || string(ledger) != "x\n" {
		t.Errorf("ledger of toolu_long: %q %v, want one run", ledger, err)
	}
	// The model request pending when b died was issued again, the same.
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	if a, b := mustJSON(t, reqs[1].Body.Messages), mustJSON(t, reqs[2].Body.Messages); a != b {
		t.Errorf("the request issued again differs:\n%s\n%s", a, b)
	}
	msgs := reqs[2].Body.Messages
	if len(msgs) != 3 || len(msgs[2].Content) != 2 || msgs[2].Content[0].ToolUseID != "toolu_quick" || msgs[2].Content[0].Content[0].Text != "quick" ||
		msgs[2].Content[1].ToolUseID != "toolu_long" || msgs[2].Content[1].Content[0].Text != "long-done" {
		t.Errorf("the request after the call carries %+v", msgs)
	}
	// Any replica describes the session the same.
	s, err := dial(t, a2.addr).GetSession(ctx, &orchv1.GetSessionRequest{SessionId: "fo"})
	if err != nil {
		t.Fatal(err)
	}
	if s.GetSession().GetTurns() != 1 || s.GetSession().GetBusy() {
		t.Errorf("session after the turn: %v", s.GetSession())
	}
	list, err := dial(t, a2.addr).ListSessions(ctx, &orchv1.ListSessionsRequest{})
	if err != nil || len(list.GetSessions()) != 1 || list.GetSessions()[0].GetId() != "fo" {
		t.Errorf("list: %v %v", list, err)
	}
}

// TestFailoverMidResponse: a replica that dies while the model's response
// still streams, after it sent complete tool_use blocks to the executor
// (or ran them itself), leaves calls that the transcript does not show yet,
// two running, two done. The replica that takes the turn over finds the
// response's blocks up to the last call in the store and records them as
// the message; the calls done keep the results clients were told of (the
// orchestrator's own TaskList is not sent to the executor, which does not
// have it), the running one's result comes from the executor (it ran
// once), an Agent call whose subagent was still at work on the dead
// replica gets an interrupted result, and the model is asked again with
// all four, as after a cut stream: the client sees each tool_use and its
// tool_result once.
func TestFailoverMidResponse(t *testing.T) {
	dsn := pgtest.DSN(t)
	root := sandboxtest.Dir(t)
	toolsvc := startToolsvc(t, root)
	const sleepArg = "1.6180" // names the call's process
	cut := make(chan struct{})
	defer close(cut)
	fake := fakeapi.New(t,
		// The response stops after the call, as if the model were still
		// writing the next block, until its replica dies.
		fakeapi.ToolTurn(
			fakeapi.Thinking("the job is long", "sig-mid"),
			fakeapi.Text("Starting the job."),
			fakeapi.ToolUse("toolu_fast", "Bash", map[string]any{"command": "echo fast"}),
			fakeapi.ToolUse("toolu_list", "TaskList", map[string]any{}),
			fakeapi.ToolUse("toolu_agent", "Agent", map[string]any{"description": "wait", "prompt": "wait"}),
			fakeapi.ToolUse("toolu_mid", "Bash", map[string]any{
				"command": "printf 'x\\n' >> ledger.toolu_mid; sleep " + sleepArg + "; echo mid-done"}),
			fakeapi.Block{Type: "text", Text: "never sent", Wait: cut},
		),
		// The subagent's request, which never ends on a.
		fakeapi.EndTurn(fakeapi.Block{Type: "text", Text: "never sent", Wait: cut}),
		fakeapi.EndTurn(fakeapi.Text("Done after all.")),
	)
	a := startReplica(t, fake, dsn, "a", toolsvc)
	b := startReplica(t, fake, dsn, "b", toolsvc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createBypass(t, ctx, a.addr, "mid")
	var view clientView
	stream := follow(t, ctx, a.addr, "mid", 0, "run the job")
	view.until(t, stream, func() bool {
		return view.count("tool_result toolu_fast") > 0 && view.count("tool_result toolu_list") > 0 && view.count("tool_use toolu_mid") > 0
	})
	if _, err := fake.WaitRequests(ctx, 2); err != nil {
		t.Fatalf("the subagent never asked the model: %v", err)
	}
	waitRunning(t, ctx, sleepArg)
	a.kill(t)
	view.rest(t, stream)

	stream = follow(t, ctx, b.addr, "mid", view.last, "")
	done := view.untilTurnComplete(t, stream)
	if done.GetStopReason() != orchv1.StopReason_STOP_REASON_END_TURN || done.GetText() != "Done after all." {
		t.Fatalf("turn complete: %v", done)
	}
	t.Logf("events the client saw over two replicas: %v", view.got)
	for _, id := range []string{"toolu_fast", "toolu_list", "toolu_agent", "toolu_mid"} {
		if uses, results := view.count("tool_use "+id), view.count("tool_result "+id); uses != 1 || results != 1 {
			t.Errorf("the client saw %d tool_use and %d tool_result events of %s, want 1 and 1", uses, results, id)
		}
	}
	if ledger, err := os.ReadFile(filepath.Join(root, "ledger.toolu_mid")); err != nil || string(ledger) != "x\n" {
		t.Errorf("ledger of toolu_mid: %q %v, want one run", ledger, err)
	}
	// b asked the model once, with the response up to the last call and
	// the calls' results; the subagent, whose work ended with a, was not
	// started again.
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	msgs := reqs[2].Body.Messages
	if len(msgs) != 3 {
		t.Fatalf("the request after the take-over carries %s", mustJSON(t, msgs))
	}
	if c := msgs[1].Content; len(c) != 6 || c[0].Type != model.BlockThinking || c[0].Signature != "sig-mid" ||
		c[1].Text != "Starting the job." || c[2].ID != "toolu_fast" || c[3].ID != "toolu_list" ||
		c[4].ID != "toolu_agent" || c[5].ID != "toolu_mid" {
		t.Errorf("the response up to the last call was recorded as %s", mustJSON(t, msgs[1]))
	}
	results, failed := map[string]string{}, map[string]string{}
	for _, b := range msgs[2].Content {
		if len(b.Content) != 1 {
			continue
		}
		if b.IsError != nil && *b.IsError {
			failed[b.ToolUseID] = b.Content[0].Text
		} else {
			results[b.ToolUseID] = b.Content[0].Text
		}
	}
	if len(msgs[2].Content) != 4 || results["toolu_fast"] != "fast" || results["toolu_mid"] != "mid-done" ||
		!strings.Contains(results["toolu_list"], "No tasks") || !strings.Contains(failed["toolu_agent"], "Interrupted") {
		t.Errorf("the calls' results went back as %s", mustJSON(t, msgs[2]))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHandOverOnSIGTERM: a replica that is stopped (a node drain, a
// rollout) in the middle of a turn hands it over: another replica takes it
// over at once and completes it, and the running call, which the stopped
// replica did not abort, runs once.
func TestHandOverOnSIGTERM(t *testing.T) {
	dsn := pgtest.DSN(t)
	root := sandboxtest.Dir(t)
	toolsvc := startToolsvc(t, root)
	const sleepArg = "3.1427"
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_drain", "Bash", map[string]any{
			"command": "printf 'x\\n' >> ledger.toolu_drain; sleep " + sleepArg + "; echo drained"})),
		fakeapi.EndTurn(fakeapi.Text("Finished elsewhere.")),
	)
	a := startReplica(t, fake, dsn, "a", toolsvc)
	b := startReplica(t, fake, dsn, "b", toolsvc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createBypass(t, ctx, a.addr, "drain")
	stream := follow(t, ctx, a.addr, "drain", 0, "run it")
	var last uint64
	for {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		last = r.GetSequence()
		if r.GetToolUse() != nil {
			break
		}
	}
	waitRunning(t, ctx, sleepArg)
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("replica a exited with %v after SIGTERM", err)
	}
	for {
		r, err := stream.Recv()
		if err != nil {
			break
		}
		last = r.GetSequence()
	}
	if len(pidsWith(sleepArg)) == 0 {
		t.Fatal("the stopped replica aborted the call it handed over")
	}
	stream = follow(t, ctx, b.addr, "drain", last, "")
	for {
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("on b: %v", err)
		}
		if r.GetSequence() <= last {
			t.Fatalf("event %d after %d", r.GetSequence(), last)
		}
		last = r.GetSequence()
		if tc := r.GetTurnComplete(); tc != nil {
			if tc.GetText() != "Finished elsewhere." {
				t.Fatalf("turn complete: %v", tc)
			}
			break
		}
	}
	if ledger, err := os.ReadFile(filepath.Join(root, "ledger.toolu_drain")); err != nil || string(ledger) != "x\n" {
		t.Errorf("ledger: %q %v, want one run", ledger, err)
	}
	msgs := fake.Requests()[1].Body.Messages
	if len(msgs) != 3 || msgs[2].Content[0].Content[0].Text != "drained" {
		t.Errorf("the request after the call carries %s", mustJSON(t, msgs))
	}
}
