package orchestrator_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/orchestrator"
)

// gate stands between the orchestrator and a real executor's client: it
// can break every open Execute stream and refuse new ones with a status
// code, as a cut link (Unavailable) or a revoked credential would.
type gate struct {
	executorv1.ExecutorServiceClient
	mu       sync.Mutex
	cancels  []context.CancelFunc
	refuse   codes.Code // codes.OK: let streams through
	attempts atomic.Int32
	broken   chan struct{} // closed when the orchestrator's side saw its stream end
	once     sync.Once
}

// watched reports the first receive error of a stream to its gate: the
// orchestrator has then seen the stream break.
type watched struct {
	grpc.BidiStreamingClient[executorv1.ExecuteRequest, executorv1.ExecuteResponse]
	g *gate
}

func (w watched) Recv() (*executorv1.ExecuteResponse, error) {
	m, err := w.BidiStreamingClient.Recv()
	if err != nil {
		w.g.once.Do(func() { close(w.g.broken) })
	}
	return m, err
}

func (g *gate) Execute(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[executorv1.ExecuteRequest, executorv1.ExecuteResponse], error) {
	g.attempts.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refuse != codes.OK {
		return nil, status.Error(g.refuse, "refused by the test's gate")
	}
	ctx, cancel := context.WithCancel(ctx)
	g.cancels = append(g.cancels, cancel)
	stream, err := g.ExecutorServiceClient.Execute(ctx, opts...)
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
	g.cancels, g.refuse = nil, code
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
	g.refuse = codes.OK
}

// newGatedSession returns a session whose executor stream goes through a
// gate, after a first turn that opened it.
func newGatedSession(t *testing.T, h *harness, window time.Duration) (*orchestrator.Session, *gate) {
	t.Helper()
	g := &gate{ExecutorServiceClient: h.emb.Client(), broken: make(chan struct{})}
	client, err := model.New(model.Config{APIKey: "test", BaseURL: h.fake.URL, Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	orch, err := orchestrator.New(orchestrator.Config{
		Model: client, DefaultExecutor: "embedded", ResumeWindow: window,
		Dial: func(context.Context, string) (executorv1.ExecutorServiceClient, error) { return g, nil },
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
