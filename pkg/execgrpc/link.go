package execgrpc

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execapi"
)

// closeWait bounds how long Close waits for the executor to finish the
// session after the half-close.
const closeWait = 5 * time.Second

// link is an execapi.Link over Execute streams: one at a time, each
// attached with Open or Resume.
type link struct {
	c      *Client
	addr   string
	req    execapi.OpenRequest // to open the session anew (Reconnect)
	events execapi.EventFunc
	log    *slog.Logger

	attachMu sync.Mutex    // serialises Resume and Reconnect
	lastSeq  atomic.Uint64 // highest sequence number handled, Hellos apart

	mu     sync.Mutex // guards the fields below
	cur    *stream    // the current stream; nil before the first
	closed bool
}

// stream is one Execute stream of a link.
type stream struct {
	rpc    executorv1.ExecutorService_ExecuteClient
	cancel context.CancelFunc
	hello  execapi.Hello

	sendMu sync.Mutex // serialises Send: a gRPC stream allows one sender at a time

	done chan struct{} // closed when the receiving goroutine ends
	err  error         // why it ended; read after done
}

// broken is closed as soon as the stream has ended, for any reason: gRPC
// ends a stream's context then, before the receiving goroutine sees the
// error and before it has handed on the events already received (done).
func (st *stream) broken() <-chan struct{} { return st.rpc.Context().Done() }

func (st *stream) alive() bool {
	select {
	case <-st.broken():
		return false
	default:
		return true
	}
}

func (st *stream) send(req *executorv1.ExecuteRequest) error {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	if !st.alive() {
		return fmt.Errorf("%w: the stream to the executor is broken", execapi.ErrUnavailable)
	}
	if err := st.rpc.Send(req); err != nil {
		return fmt.Errorf("%w: %w", execapi.ErrUnavailable, err)
	}
	return nil
}

// close half-closes the stream, which ends the executor's session once its
// calls have their results, and waits (bounded) for the stream to end.
func (st *stream) close() {
	if !st.alive() {
		// Nothing to half-close: the stream is over.
		st.cancel()
		<-st.done
		return
	}
	st.sendMu.Lock()
	_ = st.rpc.CloseSend()
	st.sendMu.Unlock()
	t := time.NewTimer(closeWait)
	select {
	case <-st.done:
	case <-t.C:
	}
	t.Stop()
	st.cancel()
	<-st.done
}

func (l *link) current() *stream {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

func (l *link) Hello() execapi.Hello { return l.current().hello }

func (l *link) Broken() <-chan struct{} { return l.current().broken() }

func (l *link) send(req *executorv1.ExecuteRequest) error { return l.current().send(req) }

// Submit sends use with the W3C trace context of ctx's span (unless use
// carries one), so that the executor's spans of the call are children of
// the caller's although many calls share one stream. A failed send breaks
// the stream off.
func (l *link) Submit(ctx context.Context, use execapi.ToolUse) error {
	m := toolUseToProto(use)
	if err := unsendable(m); err != nil {
		return &execapi.UnsendableError{Text: err.Error()}
	}
	if m.Traceparent == "" {
		c := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(ctx, c)
		m.Traceparent, m.Tracestate = c.Get("traceparent"), c.Get("tracestate")
	}
	st := l.current()
	if err := st.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: m}}); err != nil {
		st.cancel()
		return fmt.Errorf("send tool_use %s: %w", use.ID, err)
	}
	return nil
}

func (l *link) Abort(a execapi.Abort) error {
	return l.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Abort{Abort: abortToProto(a)}})
}

func (l *link) Decide(d execapi.PermissionDecision) error {
	return l.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_PermissionDecision{PermissionDecision: decisionToProto(d)}})
}

func (l *link) Background(b execapi.Background) error {
	return l.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Background{Background: &executorv1.Background{ToolUseId: b.ToolUseID}}})
}

func (l *link) ListCheckpoints(r execapi.ListCheckpoints) error {
	return l.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ListCheckpoints{ListCheckpoints: &executorv1.ListCheckpoints{RequestId: r.RequestID}}})
}

func (l *link) RestoreCheckpoint(r execapi.RestoreCheckpoint) error {
	return l.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_RestoreCheckpoint{RestoreCheckpoint: &executorv1.RestoreCheckpoint{RequestId: r.RequestID, ToolUseId: r.ToolUseID}}})
}

func (l *link) Close() {
	if st := l.end(); st != nil {
		st.close()
	}
}

func (l *link) Detach() {
	if st := l.end(); st != nil {
		st.cancel()
		<-st.done
	}
}

// end marks the link closed and returns its current stream, which the
// caller ends; nil when there is none or the link was closed already.
func (l *link) end() *stream {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	return l.cur
}
