package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
)

// link is a session's Execute stream to its executor: it sends requests
// (safely from any goroutine) and hands every event to a handler from its
// own receiving goroutine.
type link struct {
	stream executorv1.ExecutorService_ExecuteClient
	cancel context.CancelFunc
	hello  *executorv1.Hello

	sendMu sync.Mutex // serialises Send: a gRPC stream allows one sender at a time

	done    chan struct{} // closed when the receiving goroutine ends
	err     error         // why it ended; read after done
	lastSeq atomic.Uint64 // highest sequence number received
}

// closeWait bounds how long close waits for the executor to finish the
// session after the half-close.
const closeWait = 5 * time.Second

// openLink starts an Execute stream with first (an Open or a Resume), waits
// for the Hello and starts receiving. handle is called for every later
// event; with skipReplay, events the executor replays from before the Hello
// are dropped (they belong to a previous orchestrator process).
func openLink(ctx context.Context, client executorv1.ExecutorServiceClient, first *executorv1.ExecuteRequest, skipReplay bool, handle func(*link, *executorv1.ExecuteResponse)) (*link, error) {
	// The stream outlives ctx (a turn, a Create call): it lives until close.
	streamCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stream, err := client.Execute(streamCtx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%w: open Execute stream: %w", ErrExecutorUnavailable, err)
	}
	if err := stream.Send(first); err != nil {
		cancel()
		return nil, fmt.Errorf("%w: send %T: %w", ErrExecutorUnavailable, first.GetMsg(), recvErr(stream, err))
	}
	helloc := make(chan *executorv1.ExecuteResponse, 1)
	errc := make(chan error, 1)
	go func() {
		resp, err := stream.Recv()
		if err != nil {
			errc <- err
			return
		}
		helloc <- resp
	}()
	var resp *executorv1.ExecuteResponse
	select {
	case resp = <-helloc:
	case err := <-errc:
		cancel()
		return nil, fmt.Errorf("%w: %w", ErrExecutorUnavailable, err)
	case <-ctx.Done():
		cancel()
		select {
		case <-helloc:
		case <-errc:
		}
		return nil, fmt.Errorf("waiting for the executor's hello: %w", ctx.Err())
	}
	if resp.GetHello() == nil {
		cancel()
		return nil, fmt.Errorf("%w: executor sent %T before its hello", ErrExecutorUnavailable, resp.GetEvent())
	}
	l := &link{stream: stream, cancel: cancel, hello: resp.GetHello(), done: make(chan struct{})}
	l.lastSeq.Store(resp.GetSequence())
	var skipThrough uint64
	if skipReplay {
		skipThrough = l.hello.GetLastSequence()
	}
	go l.receive(skipThrough, handle)
	return l, nil
}

// recvErr returns the stream's real status after a failed Send (Send
// reports only io.EOF when the server ended the stream).
func recvErr(stream executorv1.ExecutorService_ExecuteClient, sendErr error) error {
	if !errors.Is(sendErr, io.EOF) {
		return sendErr
	}
	for {
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
}

func (l *link) receive(skipThrough uint64, handle func(*link, *executorv1.ExecuteResponse)) {
	defer close(l.done)
	for {
		resp, err := l.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the executor ended the session")
			}
			l.err = err
			return
		}
		l.lastSeq.Store(resp.GetSequence())
		if resp.GetSequence() > skipThrough {
			handle(l, resp)
		}
	}
}

// alive reports whether the stream still works.
func (l *link) alive() bool {
	select {
	case <-l.done:
		return false
	default:
		return true
	}
}

func (l *link) send(req *executorv1.ExecuteRequest) error {
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	if err := l.stream.Send(req); err != nil {
		return fmt.Errorf("%w: %w", ErrExecutorUnavailable, err)
	}
	return nil
}

func (l *link) submit(tu *executorv1.ToolUse) error {
	return l.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: tu}})
}

func (l *link) abortAll(reason executorv1.AbortReason, detail string) error {
	return l.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Abort{Abort: &executorv1.Abort{
		Target: &executorv1.Abort_All{All: true}, Reason: reason, Detail: detail,
	}}})
}

func (l *link) decide(d *executorv1.PermissionDecision) error {
	return l.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_PermissionDecision{PermissionDecision: d}})
}

// close half-closes the stream, which ends the executor's session once its
// calls have their results, and waits (bounded) for the stream to end.
func (l *link) close() {
	l.sendMu.Lock()
	_ = l.stream.CloseSend()
	l.sendMu.Unlock()
	t := time.NewTimer(closeWait)
	select {
	case <-l.done:
	case <-t.C:
	}
	t.Stop()
	l.cancel()
	<-l.done
}

// breakOff cancels the stream without waiting; the receiving goroutine
// then ends and done closes. Used when a send failed.
func (l *link) breakOff() { l.cancel() }
