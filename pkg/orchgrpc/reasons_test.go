package orchgrpc_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	orchestratorv1 "github.com/toolwire/toolwire/gen/toolwire/orchestrator/v1"
	"github.com/toolwire/toolwire/pkg/execgrpc"
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/rpcauth"
	"github.com/toolwire/toolwire/pkg/rpcerr"
	"github.com/toolwire/toolwire/pkg/rpcserver"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// wantReason fails unless err is a status with code and a toolwire
// ErrorInfo with reason and at least the metadata meta.
func wantReason(t *testing.T, err error, code codes.Code, reason string, meta map[string]string) {
	t.Helper()
	if status.Code(err) != code || rpcerr.Reason(err) != reason {
		t.Fatalf("got %v (reason %q), want %v with reason %s", err, rpcerr.Reason(err), code, reason)
	}
	for k, v := range meta {
		if got := rpcerr.Metadata(err, k); got != v {
			t.Fatalf("metadata %s = %q, want %q (all: %v)", k, got, v, rpcerr.Info(err).GetMetadata())
		}
	}
}

// converseRefused opens a Converse stream, sends msgs and returns the
// status it ends with; events before it are dropped.
func converseRefused(t *testing.T, client orchestratorv1.OrchestratorServiceClient, msgs ...*orchestratorv1.ConverseRequest) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := client.Converse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if err := st.Send(m); err != nil {
			break // the status comes from Recv
		}
	}
	for {
		if _, err := st.Recv(); err != nil {
			if err == io.EOF {
				t.Fatal("the stream ended without an error")
			}
			return err
		}
	}
}

func attachMsg(id string) *orchestratorv1.ConverseRequest {
	return &orchestratorv1.ConverseRequest{Msg: &orchestratorv1.ConverseRequest_Attach{Attach: &orchestratorv1.Attach{SessionId: id}}}
}

// guardedExecutor serves a real executor that wants a bearer token on a
// unix socket, and returns a client that sends none: the executor refuses
// the orchestrator itself.
func guardedExecutor(t *testing.T) grpc.ClientConnInterface {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := "unix://" + filepath.Join(dir, "executor.sock")
	opts, err := (&rpcauth.ServerConfig{TokenFile: tokenFile}).ServerOptions(addr)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := execsvc.New(execsvc.Config{Root: sandboxtest.Dir(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := rpcserver.New(nil, opts...)
	executorv1.RegisterExecutorServiceServer(srv.Server, execgrpc.NewServer(ex, nil))
	lis, err := rpcserver.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	dial, err := (&rpcauth.ClientConfig{}).DialOptions(addr)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, dial...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		ex.Close()
		srv.Stop()
	})
	return conn
}

// TestErrorReasons runs every way an OrchestratorService call can be
// refused and checks the code, reason and metadata each carries.
func TestErrorReasons(t *testing.T) {
	e := newEnv(t)
	e.mu.Lock()
	e.executors["guarded"] = guardedExecutor(t)
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	live := e.create(t, bypass)
	create := func(id string, cfg *orchestratorv1.SessionConfig) error {
		_, err := e.client.CreateSession(ctx, &orchestratorv1.CreateSessionRequest{SessionId: id, Config: cfg})
		return err
	}

	t.Run("unary calls", func(t *testing.T) {
		tests := []struct {
			name   string
			err    error
			code   codes.Code
			reason string
			meta   map[string]string
		}{
			{name: "get an unknown session", err: func() error {
				_, err := e.client.GetSession(ctx, &orchestratorv1.GetSessionRequest{SessionId: "nope"})
				return err
			}(), code: codes.NotFound, reason: rpcerr.SessionNotFound, meta: map[string]string{"session_id": "nope"}},
			{name: "get a malformed id", err: func() error {
				_, err := e.client.GetSession(ctx, &orchestratorv1.GetSessionRequest{SessionId: "../x"})
				return err
			}(), code: codes.InvalidArgument, reason: rpcerr.InvalidArgument},
			{name: "delete an unknown session", err: func() error {
				_, err := e.client.DeleteSession(ctx, &orchestratorv1.DeleteSessionRequest{SessionId: "nope"})
				return err
			}(), code: codes.NotFound, reason: rpcerr.SessionNotFound, meta: map[string]string{"session_id": "nope"}},
			{name: "create with a malformed id", err: create("../x", nil),
				code: codes.InvalidArgument, reason: rpcerr.InvalidArgument, meta: map[string]string{"session_id": "../x"}},
			{name: "create with a bad configuration", err: create("", &orchestratorv1.SessionConfig{MaxTokens: 100, ThinkingBudgetTokens: 200}),
				code: codes.InvalidArgument, reason: rpcerr.InvalidArgument},
			{name: "create an existing session", err: create(live, nil),
				code: codes.AlreadyExists, reason: rpcerr.SessionExists, meta: map[string]string{"session_id": live}},
			{name: "create with a workspace outside the executor's root", err: create("ws", &orchestratorv1.SessionConfig{Workspace: "/etc"}),
				code: codes.FailedPrecondition, reason: rpcerr.WorkspaceInvalid, meta: map[string]string{"session_id": "ws"}},
			{name: "create with settings that do not compile", err: create("rules", &orchestratorv1.SessionConfig{
				Settings: &executorv1.Settings{Allow: []string{"Bash("}}}),
				code: codes.InvalidArgument, reason: rpcerr.InvalidOpen, meta: map[string]string{"session_id": "rules", "field": "settings"}},
			{name: "create with an unknown permission mode", err: create("mode", &orchestratorv1.SessionConfig{
				Settings: &executorv1.Settings{Mode: executorv1.PermissionMode(99)}}),
				code: codes.InvalidArgument, reason: rpcerr.InvalidOpen, meta: map[string]string{"field": "settings"}},
			{name: "create on an executor that cannot be reached", err: create("down", &orchestratorv1.SessionConfig{Executor: "unreachable"}),
				code: codes.Unavailable, reason: rpcerr.ExecutorUnavailable, meta: map[string]string{"session_id": "down"}},
			{name: "create on an executor that refuses the orchestrator", err: create("refused", &orchestratorv1.SessionConfig{Executor: "guarded"}),
				code: codes.FailedPrecondition, reason: rpcerr.ExecutorRefused, meta: map[string]string{"executor_reason": rpcerr.TokenMissing}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) { wantReason(t, tt.err, tt.code, tt.reason, tt.meta) })
		}
	})

	t.Run("converse", func(t *testing.T) {
		user := &orchestratorv1.ConverseRequest{Msg: &orchestratorv1.ConverseRequest_UserMessage{UserMessage: &orchestratorv1.UserMessage{Text: "hi"}}}
		tests := []struct {
			name   string
			msgs   []*orchestratorv1.ConverseRequest
			code   codes.Code
			reason string
			meta   map[string]string
		}{
			{"a user message first", []*orchestratorv1.ConverseRequest{user}, codes.InvalidArgument, rpcerr.InvalidFirstMessage, nil},
			{"an empty first message", []*orchestratorv1.ConverseRequest{{}}, codes.InvalidArgument, rpcerr.InvalidFirstMessage, nil},
			{"attach to an unknown session", []*orchestratorv1.ConverseRequest{attachMsg("nope")},
				codes.NotFound, rpcerr.SessionNotFound, map[string]string{"session_id": "nope"}},
			{"a second attach", []*orchestratorv1.ConverseRequest{attachMsg(live), attachMsg(live)},
				codes.InvalidArgument, rpcerr.UnexpectedMessage, map[string]string{"session_id": live}},
			{"an empty message after attach", []*orchestratorv1.ConverseRequest{attachMsg(live), {}},
				codes.InvalidArgument, rpcerr.UnexpectedMessage, map[string]string{"session_id": live}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				wantReason(t, converseRefused(t, e.client, tt.msgs...), tt.code, tt.reason, tt.meta)
			})
		}
	})

	t.Run("converse with a session that is deleted", func(t *testing.T) {
		id := e.create(t, bypass)
		stream := e.converse(t, ctx, id, 0)
		if _, err := e.client.DeleteSession(ctx, &orchestratorv1.DeleteSessionRequest{SessionId: id}); err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := stream.Recv(); err != nil {
				wantReason(t, err, codes.Unavailable, rpcerr.SessionClosed, map[string]string{"session_id": id})
				break
			}
		}
	})

	t.Run("an orchestrator that shuts down", func(t *testing.T) {
		e.orch.Close()
		_, err := e.client.GetSession(ctx, &orchestratorv1.GetSessionRequest{SessionId: live})
		wantReason(t, err, codes.Unavailable, rpcerr.ShuttingDown, nil)
		_, err = e.client.CreateSession(ctx, &orchestratorv1.CreateSessionRequest{})
		wantReason(t, err, codes.Unavailable, rpcerr.ShuttingDown, nil)
	})
}
