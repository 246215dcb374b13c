package orchgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	orchestratorv1 "github.com/toolwire/toolwire/gen/toolwire/orchestrator/v1"
	"github.com/toolwire/toolwire/pkg/embedded"
	"github.com/toolwire/toolwire/pkg/execgrpc"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
	"github.com/toolwire/toolwire/pkg/orchgrpc"
	"github.com/toolwire/toolwire/pkg/rpcerr"
	"github.com/toolwire/toolwire/pkg/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.RunChildIfRequested()
	goleak.VerifyTestMain(m)
}

// env is an OrchestratorService on loopback TCP over the fake API and an
// in-process executor.
type env struct {
	fake   *fakeapi.Server
	root   string
	orch   *orchestrator.Orchestrator
	client orchestratorv1.OrchestratorServiceClient

	mu        sync.Mutex                          // guards executors
	executors map[string]grpc.ClientConnInterface // other executors by address
}

func newEnv(t *testing.T, replies ...fakeapi.Reply) *env {
	t.Helper()
	e := &env{fake: fakeapi.New(t, replies...), root: sandboxtest.Dir(t), executors: map[string]grpc.ClientConnInterface{}}
	emb, err := embedded.Start(context.Background(), embedded.Config{Root: e.root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Close)
	mc, err := model.New(model.Config{APIKey: "test", BaseURL: e.fake.URL, Model: "claude-test", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	st, err := transcript.Open(t.TempDir(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	executors, err := execgrpc.NewClient(execgrpc.ClientConfig{Conn: func(_ context.Context, addr string) (grpc.ClientConnInterface, error) {
		if addr == "embedded" {
			return emb.Conn(), nil
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if c := e.executors[addr]; c != nil {
			return c, nil
		}
		return nil, fmt.Errorf("dial %s: connection refused", addr)
	}})
	if err != nil {
		t.Fatal(err)
	}
	orch, err := orchestrator.New(orchestrator.Config{
		Model:           mc,
		Executor:        executors,
		DefaultExecutor: "embedded",
		Store:           orchestrator.FileStore(st),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { orch.Close() })
	e.orch = orch
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	orchestratorv1.RegisterOrchestratorServiceServer(srv, orchgrpc.NewServer(orch, nil))
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	e.client = orchestratorv1.NewOrchestratorServiceClient(conn)
	return e
}

var bypass = &orchestratorv1.SessionConfig{Settings: &executorv1.Settings{Mode: executorv1.PermissionMode_PERMISSION_MODE_BYPASS_PERMISSIONS}}

func (e *env) create(t *testing.T, cfg *orchestratorv1.SessionConfig) string {
	t.Helper()
	resp, err := e.client.CreateSession(context.Background(), &orchestratorv1.CreateSessionRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetSession().GetId()
}

// converse attaches to a session and returns the stream.
func (e *env) converse(t *testing.T, ctx context.Context, id string, after uint64) orchestratorv1.OrchestratorService_ConverseClient {
	t.Helper()
	stream, err := e.client.Converse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&orchestratorv1.ConverseRequest{Msg: &orchestratorv1.ConverseRequest_Attach{Attach: &orchestratorv1.Attach{SessionId: id, LastSequence: after}}}); err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil || first.GetAttached().GetSession().GetId() != id {
		t.Fatalf("attach: %v %v", first, err)
	}
	return stream
}

func say(t *testing.T, stream orchestratorv1.OrchestratorService_ConverseClient, text string) {
	t.Helper()
	if err := stream.Send(&orchestratorv1.ConverseRequest{Msg: &orchestratorv1.ConverseRequest_UserMessage{UserMessage: &orchestratorv1.UserMessage{Text: text}}}); err != nil {
		t.Fatal(err)
	}
}

// untilTurnComplete receives events until TurnComplete, calling on for each.
func untilTurnComplete(t *testing.T, stream orchestratorv1.OrchestratorService_ConverseClient, on func(*orchestratorv1.ConverseResponse)) []*orchestratorv1.ConverseResponse {
	t.Helper()
	var got []*orchestratorv1.ConverseResponse
	for {
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("recv after %d events: %v", len(got), err)
		}
		got = append(got, r)
		if on != nil {
			on(r)
		}
		if r.GetTurnComplete() != nil {
			return got
		}
	}
}

func TestConverseTurn(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(e.root+"/a.txt", []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.fake.Push(
		fakeapi.ToolTurn(fakeapi.Text("Looking."), fakeapi.ToolUse("toolu_1", "Read", map[string]any{"file_path": e.root + "/a.txt"})),
		fakeapi.EndTurn(fakeapi.Text("It says alpha.")),
	)
	id := e.create(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := e.converse(t, ctx, id, 0)
	say(t, stream, "what is in a.txt?")
	evs := untilTurnComplete(t, stream, nil)

	var kinds []string
	var text strings.Builder
	last := uint64(0)
	for _, r := range evs {
		if r.GetSequence() <= last {
			t.Fatalf("sequence %d after %d", r.GetSequence(), last)
		}
		last = r.GetSequence()
		switch ev := r.GetEvent().(type) {
		case *orchestratorv1.ConverseResponse_TextDelta:
			text.WriteString(ev.TextDelta.GetText())
			if k := "text"; len(kinds) == 0 || kinds[len(kinds)-1] != k {
				kinds = append(kinds, k)
			}
		case *orchestratorv1.ConverseResponse_ToolUse:
			if ev.ToolUse.GetId() != "toolu_1" || ev.ToolUse.GetName() != "Read" || ev.ToolUse.GetMessageId() == "" {
				t.Fatalf("tool_use = %v", ev.ToolUse)
			}
			kinds = append(kinds, "tool_use")
		case *orchestratorv1.ConverseResponse_ToolResult:
			if !strings.Contains(ev.ToolResult.GetContent()[0].GetText().GetText(), "alpha") {
				t.Fatalf("result = %v", ev.ToolResult)
			}
			kinds = append(kinds, "tool_result")
		case *orchestratorv1.ConverseResponse_TurnComplete:
			tc := ev.TurnComplete
			if tc.GetStopReason() != orchestratorv1.StopReason_STOP_REASON_END_TURN || tc.GetRequests() != 2 || tc.GetText() != "It says alpha." {
				t.Fatalf("turn complete = %v", tc)
			}
			kinds = append(kinds, "turn_complete")
		}
	}
	if got := strings.Join(kinds, ","); got != "text,tool_use,tool_result,text,turn_complete" {
		t.Fatalf("event order = %s", got)
	}
	if text.String() != "Looking.It says alpha." {
		t.Fatalf("text = %q", text.String())
	}
	// After a half-close the server ends the stream.
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after half-close: %v, want EOF", err)
	}

	// A client that comes back replays what it missed.
	stream2 := e.converse(t, ctx, id, evs[0].GetSequence())
	r, err := stream2.Recv()
	if err != nil || r.GetSequence() <= evs[0].GetSequence() {
		t.Fatalf("replay: %v %v", r, err)
	}
	stream2.CloseSend()
	for {
		if _, err := stream2.Recv(); err != nil {
			break
		}
	}

	got, err := e.client.GetSession(ctx, &orchestratorv1.GetSessionRequest{SessionId: id})
	if err != nil || got.GetSession().GetTurns() != 1 || got.GetSession().GetMessageCount() != 4 || got.GetSession().GetBusy() {
		t.Fatalf("get = %v %v", got, err)
	}
}

func TestConverseInterrupt(t *testing.T) {
	e := newEnv(t, fakeapi.ToolTurn(fakeapi.ToolUse("toolu_s", "Bash", map[string]any{"command": "sleep 30"})))
	id := e.create(t, bypass)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := e.converse(t, ctx, id, 0)
	say(t, stream, "sleep")
	var result *executorv1.Result
	evs := untilTurnComplete(t, stream, func(r *orchestratorv1.ConverseResponse) {
		if r.GetToolUse() != nil {
			stream.Send(&orchestratorv1.ConverseRequest{Msg: &orchestratorv1.ConverseRequest_Interrupt{Interrupt: &orchestratorv1.Interrupt{Reason: "test"}}})
		}
		if r.GetToolResult() != nil {
			result = r.GetToolResult()
		}
	})
	tc := evs[len(evs)-1].GetTurnComplete()
	if tc.GetStopReason() != orchestratorv1.StopReason_STOP_REASON_INTERRUPTED {
		t.Fatalf("turn complete = %v", tc)
	}
	if result == nil || result.GetToolUseId() != "toolu_s" || !result.GetIsError() {
		t.Fatalf("interrupted call's result = %v", result)
	}
}

func TestConversePermissionRelayed(t *testing.T) {
	e := newEnv(t,
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_p", "Bash", map[string]any{"command": "touch made.txt"})),
		fakeapi.EndTurn(fakeapi.Text("done")),
	)
	id := e.create(t, &orchestratorv1.SessionConfig{Settings: &executorv1.Settings{Ask: []string{"Bash"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := e.converse(t, ctx, id, 0)
	say(t, stream, "make a file")
	asked := false
	untilTurnComplete(t, stream, func(r *orchestratorv1.ConverseResponse) {
		if pr := r.GetPermissionRequest(); pr != nil {
			asked = true
			stream.Send(&orchestratorv1.ConverseRequest{Msg: &orchestratorv1.ConverseRequest_PermissionDecision{PermissionDecision: &executorv1.PermissionDecision{
				ToolUseId: pr.GetToolUseId(), Behavior: executorv1.PermissionBehavior_PERMISSION_BEHAVIOR_ALLOW_ONCE,
			}}})
		}
	})
	if !asked {
		t.Fatal("no permission request reached the client: the executor did not apply the session's permission settings")
	}
	if _, err := os.Stat(e.root + "/made.txt"); err != nil {
		t.Fatalf("allowed call did not run: %v", err)
	}
}

func TestErrorsMapToStatus(t *testing.T) {
	gate := make(chan struct{})
	slow := fakeapi.Text("slow")
	slow.Wait = gate
	e := newEnv(t, fakeapi.EndTurn(slow))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := func(err error) codes.Code { return status.Code(err) }

	if _, err := e.client.GetSession(ctx, &orchestratorv1.GetSessionRequest{SessionId: "nope"}); code(err) != codes.NotFound {
		t.Fatalf("get unknown: %v", err)
	}
	if _, err := e.client.CreateSession(ctx, &orchestratorv1.CreateSessionRequest{SessionId: "../x"}); code(err) != codes.InvalidArgument {
		t.Fatalf("create bad id: %v", err)
	}
	if _, err := e.client.CreateSession(ctx, &orchestratorv1.CreateSessionRequest{Config: &orchestratorv1.SessionConfig{MaxTokens: 100, ThinkingBudgetTokens: 200}}); code(err) != codes.InvalidArgument {
		t.Fatalf("create bad config: %v", err)
	}
	if _, err := e.client.CreateSession(ctx, &orchestratorv1.CreateSessionRequest{Config: &orchestratorv1.SessionConfig{Workspace: "/etc"}}); code(err) == codes.OK {
		t.Fatal("a workspace outside the executor's root was accepted")
	}
	if _, err := e.client.CreateSession(ctx, &orchestratorv1.CreateSessionRequest{SessionId: "dup"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateSession(ctx, &orchestratorv1.CreateSessionRequest{SessionId: "dup"}); code(err) != codes.AlreadyExists {
		t.Fatalf("create duplicate: %v", err)
	}

	stream, err := e.client.Converse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(&orchestratorv1.ConverseRequest{Msg: &orchestratorv1.ConverseRequest_UserMessage{UserMessage: &orchestratorv1.UserMessage{Text: "hi"}}})
	if _, err := stream.Recv(); code(err) != codes.InvalidArgument {
		t.Fatalf("converse without attach: %v", err)
	}

	// A second user message while a turn runs is refused on the stream,
	// which stays usable.
	conv := e.converse(t, ctx, "dup", 0)
	say(t, conv, "first")
	say(t, conv, "second")
	for {
		r, err := conv.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if er := r.GetError(); er != nil {
			if er.GetKind() != "busy" || er.GetReason() != rpcerr.SessionBusy || !er.GetRecoverable() {
				t.Fatalf("error = %v", er)
			}
			break
		}
	}
	close(gate)
	untilTurnComplete(t, conv, nil)
	conv.CloseSend()
	for {
		if _, err := conv.Recv(); err != nil {
			break
		}
	}

	list, err := e.client.ListSessions(ctx, &orchestratorv1.ListSessionsRequest{})
	if err != nil || len(list.GetSessions()) != 1 || list.GetSessions()[0].GetId() != "dup" {
		t.Fatalf("list = %v %v", list, err)
	}
	if _, err := e.client.DeleteSession(ctx, &orchestratorv1.DeleteSessionRequest{SessionId: "dup"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.DeleteSession(ctx, &orchestratorv1.DeleteSessionRequest{SessionId: "dup"}); code(err) != codes.NotFound {
		t.Fatalf("delete twice: %v", err)
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
