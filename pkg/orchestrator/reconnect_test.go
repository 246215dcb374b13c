package orchestrator_test

import (
	"context"
	"log/slog"

	"github.com/toolwire/toolwire/internal/testkit"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolwire/toolwire/pkg/execgrpc"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/rpcerr"
)

// gate stands between the orchestrator and a real executor's connection:
// it can break every open stream and refuse new ones with a status code,
// as a cut link (Unavailable) or a revoked credential would.
type gate struct {
	grpc.ClientConnInterface
	mu       sync.Mutex
	cancels  []context.CancelFunc
	refuse   error // nil: let streams through
	attempts atomic.Int32
	broken   chan struct{} // closed when the orchestrator's side saw its stream end
	once     sync.Once
}

// watched reports the first receive error of a stream to its gate: the
// orchestrator has then seen the stream break.
type watched struct {
	grpc.ClientStream
	g *gate
}

func (w watched) RecvMsg(m any) error {
	err := w.ClientStream.RecvMsg(m)
	if err != nil {
		w.g.once.Do(func() { close(w.g.broken) })
	}
	return err
}

func (g *gate) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	g.attempts.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refuse != nil {
		return nil, g.refuse
	}
	ctx, cancel := context.WithCancel(ctx)
	g.cancels = append(g.cancels, cancel)
	stream, err := g.ClientConnInterface.NewStream(ctx, desc, method, opts...)
	if err != nil {
		return nil, err
	}
	return watched{stream, g}, nil
}

// cut breaks every open stream, refuses new ones with code, and waits
// until the orchestrator has seen its stream end.
func (g *gate) cut(t *testing.T, code codes.Code) {
	g.mu.Lock()
	for _, cancel := range g.cancels {
		cancel()
	}
	g.cancels, g.refuse = nil, status.Error(code, "refused by the test's gate")
	g.attempts.Store(0)
	g.mu.Unlock()
	select {
	case <-g.broken:
	case <-time.After(10 * time.Second):
		t.Fatal("the orchestrator did not see its stream break")
	}
}

func (g *gate) restore() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refuse = nil
}

// newGatedSession returns a session whose executor stream goes through a
// gate, after a first turn that opened it.
func newGatedSession(t *testing.T, h *harness, window time.Duration) (*orchestrator.Session, *gate) {
	t.Helper()
	g := &gate{ClientConnInterface: h.emb.Conn(), broken: make(chan struct{})}
	client, err := model.New(model.Config{APIKey: "test", BaseURL: h.fake.URL, Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("orchestrator logs:\n%s", logs.String())
		}
	})
	log := slog.New(slog.NewTextHandler(&logs, nil))
	executors, err := execgrpc.NewClient(execgrpc.ClientConfig{
		Conn:   func(context.Context, string) (grpc.ClientConnInterface, error) { return g, nil },
		Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	orch, err := orchestrator.New(orchestrator.Config{
		Model: client, DefaultExecutor: "embedded", ResumeWindow: window,
		Executor: executors, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { orch.Close() })
	s, err := orch.Create(context.Background(), "", bypass)
	if err != nil {
		t.Fatal(err)
	}
	h.fake.Push(fakeapi.EndTurn(fakeapi.Text("first")))
	if r := h.run(s, "first"); r.Err != nil {
		t.Fatalf("first turn: %v", r.Err)
	}
	return s, g
}

// A link that comes back after the stream broke: the next turn keeps
// trying within the resume window and goes on.
func TestReconnectWaitsForAnUnreachableExecutor(t *testing.T) {
	h := newHarness(t)
	s, g := newGatedSession(t, h, time.Minute)
	g.cut(t, codes.Unavailable)
	go func() {
		// Let a few attempts fail first.
		for g.attempts.Load() < 3 {
			time.Sleep(10 * time.Millisecond)
		}
		g.restore()
	}()
	h.fake.Push(fakeapi.EndTurn(fakeapi.Text("second")))
	r := h.run(s, "second")
	if r.Err != nil || r.Text != "second" {
		t.Fatalf("turn after the link came back: %q, %v", r.Text, r.Err)
	}
	if n := g.attempts.Load(); n < 4 {
		t.Errorf("%d attempts to reach the executor, want the failed ones and one more", n)
	}
}

// A refusal that waiting cannot cure ends the turn at once instead of being
// retried for the whole resume window.
func TestReconnectDoesNotRetryRefusals(t *testing.T) {
	h := newHarness(t)
	s, g := newGatedSession(t, h, time.Minute)
	g.cut(t, codes.PermissionDenied)
	r := h.run(s, "second")
	if r.Err == nil {
		t.Fatal("the turn went on although the executor refuses the stream")
	}
	if n := g.attempts.Load(); n != 1 {
		t.Errorf("%d attempts after a PermissionDenied, want 1", n)
	}
}

// pools is a Placer over one pool, "pool", of two executors, "a" and "b":
// it places sessions on a until told that a drains. Its health (Leaving)
// never says so: the refusal is the first the orchestrator hears of it.
type pools struct {
	mu       sync.Mutex
	draining map[string]bool
}

func (p *pools) Place(_ context.Context, target string) (string, func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case target != "pool":
		return target, func() {}, nil
	case p.draining["a"]:
		return "b", func() {}, nil
	}
	return "a", func() {}, nil
}

func (p *pools) Hold(string, string) func()  { return func() {} }
func (p *pools) Leaving(string, string) bool { return false }
func (p *pools) Draining(target, addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if target == "pool" {
		p.draining[addr] = true
	}
}

// A member of a pool that refuses a session because it drains is reported
// to the placer, and the session goes to another member at once.
func TestDrainingRefusalMovesTheSession(t *testing.T) {
	h := newHarness(t)
	draining := &gate{ClientConnInterface: h.emb.Conn(), broken: make(chan struct{}),
		refuse: rpcerr.Error(codes.Unavailable, rpcerr.Draining, "executor is draining")}
	executors, err := execgrpc.NewClient(execgrpc.ClientConfig{Conn: func(_ context.Context, addr string) (grpc.ClientConnInterface, error) {
		if addr == "a" {
			return draining, nil
		}
		return h.emb.Conn(), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	client, err := model.New(model.Config{APIKey: "test", BaseURL: h.fake.URL, Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	placer := &pools{draining: map[string]bool{}}
	orch, err := orchestrator.New(orchestrator.Config{Model: client, Executor: executors, Placer: placer, DefaultExecutor: "pool"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { orch.Close() })
	s, err := orch.Create(context.Background(), "", bypass)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if cfg := s.Config(); cfg.Executor != "b" || cfg.Pool != "pool" {
		t.Fatalf("session placed on %q of %q, want b of pool", cfg.Executor, cfg.Pool)
	}
	if n := draining.attempts.Load(); n != 1 {
		t.Fatalf("%d attempts on the draining member, want 1", n)
	}
}
