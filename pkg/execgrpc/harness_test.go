package execgrpc_test

import (
	"context"
	"encoding/json"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execgrpc"
	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/rpcserver"
	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/workspace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gates lets a test hold test-tool calls running until it releases them.
type gates struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

func (g *gates) get(key string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch == nil {
		g.ch = map[string]chan struct{}{}
	}
	if g.ch[key] == nil {
		g.ch[key] = make(chan struct{})
	}
	return g.ch[key]
}

func (g *gates) release(key string) { close(g.get(key)) }

// testTool is a controllable tool: it waits for its gate (if any), emits
// output, then succeeds, fails or panics as its input says.
type testTool struct {
	name  string
	gates *gates
	runs  sync.Map // tool_use id -> *int32 count
}

type testInput struct {
	Gate   string `json:"gate"`
	Safe   bool   `json:"safe"`
	Fail   bool   `json:"fail"`
	Panic  bool   `json:"panic"`
	Output string `json:"output"`
	Flood  int    `json:"flood"`
}

func (t *testTool) Spec() tool.Spec {
	return tool.Spec{
		Name:        t.name,
		Description: "test tool",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"gate":{"type":"string"},"safe":{"type":"boolean"},"fail":{"type":"boolean"},"panic":{"type":"boolean"},"output":{"type":"string"},"flood":{"type":"integer"}},"additionalProperties":false}`),
		Concurrency: tool.ConcurrencyDependsOnInput,
	}
}

func (t *testTool) ConcurrencySafe(input json.RawMessage) bool {
	var in testInput
	_ = json.Unmarshal(input, &in)
	return in.Safe
}

func (t *testTool) Validate(context.Context, *tool.Env, json.RawMessage) error { return nil }

func (t *testTool) Run(ctx context.Context, env *tool.Env, c *tool.Call) *tool.Result {
	var in testInput
	_ = json.Unmarshal(c.Input, &in)
	n, _ := t.runs.LoadOrStore(c.ID, new(int))
	t.gates.mu.Lock()
	*n.(*int)++
	t.gates.mu.Unlock()
	if in.Output != "" {
		c.Progress(tool.Progress{Output: []byte(in.Output)})
	}
	for i := 0; i < in.Flood; i++ {
		c.Progress(tool.Progress{Output: make([]byte, 64<<10)})
	}
	if in.Gate != "" {
		select {
		case <-t.gates.get(in.Gate):
		case <-ctx.Done():
			return tool.Error("stopped")
		}
	}
	switch {
	case in.Panic:
		panic("boom")
	case in.Fail:
		return &tool.Result{Content: []tool.Content{{Text: "Exit code 1\nfailed " + c.ID}}, IsError: true, StateIsError: true}
	}
	return tool.Text("ok " + c.ID + " " + in.Output)
}

func (t *testTool) runCount(id string) int {
	n, ok := t.runs.Load(id)
	if !ok {
		return 0
	}
	t.gates.mu.Lock()
	defer t.gates.mu.Unlock()
	return *n.(*int)
}

// harness is an executor with the test tool (named Bash, so sibling abort
// applies) served over bufconn.
type harness struct {
	t      *testing.T
	ex     *executor.Executor
	tool   *testTool
	gates  *gates
	conn   *grpc.ClientConn
	client executorv1.ExecutorServiceClient
}

func newHarness(t *testing.T, cfg executor.Config) *harness {
	t.Helper()
	g := &gates{}
	tt := &testTool{name: "Bash", gates: g}
	cfg.Tools = append(cfg.Tools, tt)
	// The scheduling tests are about the queue, not permissions.
	if cfg.Operator.Permissions.DefaultMode == "" {
		cfg.Operator.Permissions.DefaultMode = permission.ModeBypass
	}
	if cfg.NewEnv == nil {
		cfg.NewEnv = func(ctx context.Context, req executor.EnvRequest) (*tool.Env, executor.SandboxInfo, error) {
			id := req.SessionID
			ws, err := workspace.New(workspace.Config{Dir: t.TempDir()})
			if err != nil {
				return nil, executor.SandboxInfo{}, err
			}
			env := &tool.Env{SessionID: id, Files: ws, Limits: tool.Limits{}.WithDefaults(), Reads: tool.NewFileState()}
			env.OnClose(func() { _ = ws.Close() })
			return env, executor.SandboxInfo{Backend: "none"}, nil
		}
	}
	ex, err := executor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	srv := rpcserver.New(nil)
	executorv1.RegisterExecutorServiceServer(srv.Server, execgrpc.NewServer(ex, nil))
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ex.Close()
		_ = conn.Close()
		srv.Stop()
	})
	return &harness{t: t, ex: ex, tool: tt, gates: g, conn: conn, client: executorv1.NewExecutorServiceClient(conn)}
}

// stream is one Execute stream with an event collector.
type stream struct {
	t      *testing.T
	s      executorv1.ExecutorService_ExecuteClient
	cancel context.CancelFunc
	events chan *executorv1.ExecuteResponse
	errc   chan error
	hello  *executorv1.Hello
}

func (h *harness) open(opts *executorv1.SessionOptions) *stream {
	return h.start(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{Options: opts}}})
}

func (h *harness) start(first *executorv1.ExecuteRequest) *stream {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := h.client.Execute(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	st := &stream{t: h.t, s: s, cancel: cancel, events: make(chan *executorv1.ExecuteResponse, 10000), errc: make(chan error, 1)}
	h.t.Cleanup(cancel)
	if err := s.Send(first); err != nil {
		h.t.Fatal(err)
	}
	go func() {
		for {
			ev, err := s.Recv()
			if err != nil {
				st.errc <- err
				close(st.events)
				return
			}
			st.events <- ev
		}
	}()
	ev := st.next()
	if ev.GetHello() == nil {
		h.t.Fatalf("first event is %v, want hello", ev)
	}
	st.hello = ev.GetHello()
	return st
}

func (s *stream) use(id, msg, input string) {
	s.t.Helper()
	s.useTool(id, msg, "Bash", input)
}

func (s *stream) useTool(id, msg, name, input string) {
	s.t.Helper()
	err := s.s.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: &executorv1.ToolUse{
		Id: id, Name: name, InputJson: input, AssistantMessageId: msg}}})
	if err != nil {
		s.t.Fatal(err)
	}
}

func (s *stream) send(m *executorv1.ExecuteRequest) {
	s.t.Helper()
	if err := s.s.Send(m); err != nil {
		s.t.Fatal(err)
	}
}

// next returns the next event, failing the test after a generous wait.
func (s *stream) next() *executorv1.ExecuteResponse {
	s.t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			s.t.Fatalf("stream ended: %v", <-s.errc)
		}
		return ev
	case <-time.After(20 * time.Second):
		s.t.Fatal("no event within 20s")
	}
	return nil
}

// until collects events until pred holds for one, returning all collected.
func (s *stream) until(pred func(*executorv1.ExecuteResponse) bool) []*executorv1.ExecuteResponse {
	s.t.Helper()
	var got []*executorv1.ExecuteResponse
	for {
		ev := s.next()
		got = append(got, ev)
		if pred(ev) {
			return got
		}
	}
}

// results collects events until n results arrived and returns the results.
func (s *stream) results(n int) []*executorv1.Result {
	s.t.Helper()
	var out []*executorv1.Result
	s.until(func(ev *executorv1.ExecuteResponse) bool {
		if r := ev.GetResult(); r != nil {
			out = append(out, r)
		}
		return len(out) == n
	})
	return out
}

func startedEvent(id string) func(*executorv1.ExecuteResponse) bool {
	return func(ev *executorv1.ExecuteResponse) bool { return ev.GetStarted().GetToolUseId() == id }
}

func resultIDs(rs []*executorv1.Result) []string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.GetToolUseId())
	}
	return ids
}

func text(r *executorv1.Result) string {
	var s string
	for _, c := range r.GetContent() {
		s += c.GetText().GetText()
	}
	return s
}

// untilStarted collects events until every call in ids has started.
func (s *stream) untilStarted(ids ...string) []*executorv1.ExecuteResponse {
	s.t.Helper()
	left := map[string]bool{}
	for _, id := range ids {
		left[id] = true
	}
	return s.until(func(ev *executorv1.ExecuteResponse) bool {
		delete(left, ev.GetStarted().GetToolUseId())
		return len(left) == 0
	})
}
