package execgrpc_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/execgrpc"
	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/tool"
)

// cutConn stands between a Client and the harness's executor: it counts
// the Execute streams the client opens, can break every open one (as a cut
// link would) and refuse new ones with a status code.
type cutConn struct {
	grpc.ClientConnInterface
	opened atomic.Int32

	mu      sync.Mutex // guards the fields below
	cancels []context.CancelFunc
	refuse  codes.Code // codes.OK lets streams through
}

func (c *cutConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	c.opened.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refuse != codes.OK {
		return nil, status.Error(c.refuse, "refused by the test")
	}
	ctx, cancel := context.WithCancel(ctx)
	c.cancels = append(c.cancels, cancel)
	return c.ClientConnInterface.NewStream(ctx, desc, method, opts...)
}

// cut breaks every open stream and refuses new ones with code (codes.OK:
// lets them through). It resets the count of streams opened.
func (c *cutConn) cut(code codes.Code) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cancel := range c.cancels {
		cancel()
	}
	c.cancels, c.refuse = nil, code
	c.opened.Store(0)
}

// recorder collects the events a link hands on.
type recorder struct {
	mu     sync.Mutex
	events []execapi.Event
	more   chan struct{}
}

func newRecorder() *recorder { return &recorder{more: make(chan struct{}, 1)} }

func (r *recorder) handle(_ execapi.Link, ev execapi.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	select {
	case r.more <- struct{}{}:
	default:
	}
}

// wait returns the first event that ok accepts, failing the test after a
// generous wait.
func (r *recorder) wait(t *testing.T, ok func(execapi.Event) bool) execapi.Event {
	t.Helper()
	return r.waitN(t, 1, ok)
}

// waitN returns the nth event that ok accepts.
func (r *recorder) waitN(t *testing.T, n int, ok func(execapi.Event) bool) execapi.Event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		r.mu.Lock()
		seen := 0
		for _, ev := range r.events {
			if ok(ev) {
				if seen++; seen == n {
					r.mu.Unlock()
					return ev
				}
			}
		}
		r.mu.Unlock()
		select {
		case <-r.more:
		case <-timeout:
			t.Fatal("no such event within 20s")
		}
	}
}

func resultOf(id string) func(execapi.Event) bool {
	return func(ev execapi.Event) bool { return ev.Result != nil && ev.Result.ToolUseID == id }
}

func startedOf(id string) func(execapi.Event) bool {
	return func(ev execapi.Event) bool { return ev.Started != nil && ev.Started.ToolUseID == id }
}

// newClient returns a Client of the harness's executor through a cutConn.
func newClient(t *testing.T, h *harness) (*execgrpc.Client, *cutConn) {
	t.Helper()
	conn := &cutConn{ClientConnInterface: h.conn}
	c, err := execgrpc.NewClient(execgrpc.ClientConfig{
		Conn: func(context.Context, string) (grpc.ClientConnInterface, error) { return conn, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, conn
}

func open(t *testing.T, c *execgrpc.Client, id string, rec *recorder) execapi.Link {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := c.Open(ctx, "executor", execapi.OpenRequest{SessionID: id, Options: execapi.SessionOptions{ResultOrder: execapi.OrderCompletion}}, rec.handle)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(l.Close)
	return l
}

func submit(t *testing.T, l execapi.Link, id, input string) {
	t.Helper()
	if err := l.Submit(context.Background(), execapi.ToolUse{ID: id, Name: "Bash", Input: input, MessageID: "msg_1"}); err != nil {
		t.Fatalf("submit %s: %v", id, err)
	}
}

// waitBroken waits until the link has seen its stream end.
func waitBroken(t *testing.T, l execapi.Link) {
	t.Helper()
	select {
	case <-l.Broken():
	case <-time.After(20 * time.Second):
		t.Fatal("the link did not see its stream break")
	}
}

func TestClientListsToolsAndRunsACall(t *testing.T) {
	h := newHarness(t, executor.Config{})
	c, _ := newClient(t, h)
	tools, err := c.ListTools(context.Background(), "executor")
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 1 || tools[0].Name != "Bash" || tools[0].Concurrency != tool.ConcurrencyDependsOnInput || len(tools[0].InputSchema) == 0 {
		t.Fatalf("tools = %+v", tools)
	}
	rec := newRecorder()
	l := open(t, c, "s1", rec)
	if hello := l.Hello(); hello.SessionID != "s1" || hello.Resumed || hello.Workspace == "" || hello.Sandbox.Backend != "none" {
		t.Fatalf("hello = %+v", hello)
	}
	submit(t, l, "toolu_1", `{"output":"hi","fail":true}`)
	r := rec.wait(t, resultOf("toolu_1")).Result
	if r.ToolName != "Bash" || !r.IsError || !r.StateIsError || r.FinalOutcome() != tool.OutcomeToolError ||
		r.TextContent() != "Exit code 1\nfailed toolu_1" || r.ReceivedAt.IsZero() || r.StartedAt.IsZero() {
		t.Fatalf("result = %+v (%+v)", r, r.Result)
	}
	rec.wait(t, func(ev execapi.Event) bool { return ev.Accepted != nil && ev.Accepted.ToolUseID == "toolu_1" })
	rec.wait(t, startedOf("toolu_1"))
}

// A stream that breaks while a call runs: Resume reattaches, the events
// missed in between arrive as if they had not been missed, and the call
// ran once.
func TestLinkResumeReplaysMissedEvents(t *testing.T) {
	h := newHarness(t, executor.Config{})
	c, conn := newClient(t, h)
	rec := newRecorder()
	l := open(t, c, "s1", rec)
	submit(t, l, "toolu_1", `{"gate":"g1"}`)
	rec.wait(t, startedOf("toolu_1"))

	conn.cut(codes.OK)
	waitBroken(t, l)
	h.gates.release("g1") // the result is produced while nobody listens
	if err := l.Resume(context.Background(), time.Minute); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if !l.Hello().Resumed {
		t.Fatal("the new stream's hello does not say resumed")
	}
	rec.wait(t, resultOf("toolu_1"))
	// Sent again, as after a resume: the executor repeats the result, runs nothing.
	submit(t, l, "toolu_1", `{"gate":"g1"}`)
	submit(t, l, "toolu_2", `{}`)
	rec.wait(t, resultOf("toolu_2"))
	if n := h.tool.runCount("toolu_1"); n != 1 {
		t.Fatalf("toolu_1 ran %d times", n)
	}
}

// A Resume of a session the executor no longer has gives up at once with
// ErrSessionNotFound, instead of retrying for the whole window: the calls
// sent may have run and must not run again, and retrying cannot bring the
// session back.
func TestLinkResumeGivesUpWhenTheSessionIsGone(t *testing.T) {
	h := newHarness(t, executor.Config{})
	c, conn := newClient(t, h)
	l := open(t, c, "s1", newRecorder())
	conn.cut(codes.OK)
	waitBroken(t, l)
	s, err := h.ex.Session("s1")
	if err != nil {
		t.Fatal(err)
	}
	s.Close(errors.New("the test ends the session"))
	if _, err := h.ex.Session("s1"); !errors.Is(err, executor.ErrSessionNotFound) {
		t.Fatalf("the executor still has the session: %v", err)
	}

	err = l.Resume(context.Background(), 10*time.Second)
	if !errors.Is(err, execapi.ErrSessionNotFound) {
		t.Fatalf("resume: %v, want ErrSessionNotFound", err)
	}
	if n := conn.opened.Load(); n != 1 {
		t.Fatalf("%d attempts to resume a session the executor does not have, want 1", n)
	}
}

// A Resume that cannot reach the executor keeps trying within its window.
func TestLinkResumeRetriesAnUnreachableExecutor(t *testing.T) {
	h := newHarness(t, executor.Config{})
	c, conn := newClient(t, h)
	l := open(t, c, "s1", newRecorder())
	conn.cut(codes.Unavailable)
	waitBroken(t, l)
	go func() {
		for conn.opened.Load() < 3 {
			time.Sleep(5 * time.Millisecond)
		}
		conn.cut(codes.OK)
	}()
	// The link comes back only after three refused attempts.
	if err := l.Resume(context.Background(), time.Minute); err != nil {
		t.Fatalf("resume: %v", err)
	}
}

// Between turns, a session the executor no longer has is opened anew.
func TestLinkReconnectOpensAnewWhenTheSessionIsGone(t *testing.T) {
	h := newHarness(t, executor.Config{})
	c, conn := newClient(t, h)
	rec := newRecorder()
	l := open(t, c, "s1", rec)
	submit(t, l, "toolu_1", `{}`)
	rec.wait(t, resultOf("toolu_1"))
	conn.cut(codes.OK)
	waitBroken(t, l)
	s, err := h.ex.Session("s1")
	if err != nil {
		t.Fatal(err)
	}
	s.Close(errors.New("the test ends the session"))

	if err := l.Reconnect(context.Background(), 0); err != nil {
		t.Fatalf("reconnect: %v", err)
	}
	if l.Hello().Resumed {
		t.Fatal("reconnected to a session that was gone, want a new one")
	}
	submit(t, l, "toolu_1", `{}`)
	rec.waitN(t, 2, resultOf("toolu_1"))
	if n := h.tool.runCount("toolu_1"); n != 2 {
		t.Fatalf("toolu_1 ran %d times, want once per session", n)
	}
}

// A refusal is not retried: waiting does not cure it.
func TestLinkReconnectDoesNotRetryRefusals(t *testing.T) {
	h := newHarness(t, executor.Config{})
	c, conn := newClient(t, h)
	l := open(t, c, "s1", newRecorder())
	conn.cut(codes.PermissionDenied)
	waitBroken(t, l)
	err := l.Reconnect(context.Background(), time.Minute)
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("reconnect: %v, want the refusal", err)
	}
	if n := conn.opened.Load(); n != 1 {
		t.Fatalf("%d attempts after a PermissionDenied, want 1", n)
	}
}

// Open of a session the executor has already (its client is gone) takes
// it over: what happened before is not handed on, and its running calls
// are stopped.
func TestOpenTakesOverASessionOfAClientThatIsGone(t *testing.T) {
	h := newHarness(t, executor.Config{})
	c, conn := newClient(t, h)
	first := newRecorder()
	old := open(t, c, "s1", first)
	submit(t, old, "toolu_1", `{"gate":"never"}`)
	first.wait(t, startedOf("toolu_1"))
	conn.cut(codes.OK) // the client is gone without a half-close
	waitBroken(t, old)

	rec := newRecorder()
	l := open(t, c, "s1", rec)
	if !l.Hello().Resumed {
		t.Fatal("hello does not say the session was taken over")
	}
	r := rec.wait(t, resultOf("toolu_1")).Result
	if r.FinalOutcome() != tool.OutcomeInterrupted || !r.IsError {
		t.Fatalf("the running call of the client before ended with %+v", r.Result)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, ev := range rec.events {
		if ev.Accepted != nil || ev.Started != nil {
			t.Fatalf("an event from before the takeover was handed on: %+v", ev)
		}
	}
}

// Every status the client sees gets the class of its reason; a refusal
// keeps its status.
func TestClientErrorClasses(t *testing.T) {
	h := newHarness(t, executor.Config{})
	c, _ := newClient(t, h)
	h.ex.Close() // draining from now on
	_, err := c.Open(context.Background(), "executor", execapi.OpenRequest{SessionID: "s1"}, newRecorder().handle)
	if !errors.Is(err, execapi.ErrDraining) || status.Code(err) != codes.Unavailable {
		t.Fatalf("open on a draining executor: %v (code %v)", err, status.Code(err))
	}
	if !strings.Contains(err.Error(), "draining") {
		t.Fatalf("the error does not say why: %v", err)
	}
}
