package execgrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cenkalti/backoff/v5"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execapi"
)

// How a link (re)attaches a stream to its session: Open or Resume, each
// falling back to the other, retried with back-off where waiting helps.

const (
	// attemptTimeout bounds one attempt to attach a stream (dial, first
	// message, Hello) when the link reattaches.
	attemptTimeout = 10 * time.Second
	// maxSwitches bounds how often one connect goes from Open to Resume
	// and back, when each finds the other state on the executor.
	maxSwitches = 5
)

// retryPacing paces the retries of Resume and Reconnect: about 50 ms
// after the first failure, doubling up to about 1 s, each wait randomised
// by a fifth so that the sessions of one orchestrator do not all come back
// in step after an executor restart.
func retryPacing() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{
		InitialInterval:     50 * time.Millisecond,
		RandomizationFactor: 0.2,
		Multiplier:          2,
		MaxInterval:         time.Second,
	}
}

func (l *link) Resume(ctx context.Context, window time.Duration) error {
	l.attachMu.Lock()
	defer l.attachMu.Unlock()
	old := l.current()
	if old.alive() {
		return nil // resumed by someone else meanwhile
	}
	<-old.done // the events it received are handed on first
	if r := old.hello.Retention; r > 0 && r < window {
		window = r
	}
	after := l.lastSeq.Load()
	l.log.Warn("executor stream broke; resuming", "after", after, "window", window, "err", old.err)
	start := time.Now()
	attempts := 0
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		attempts++
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
		_, err := l.attach(actx, resumeRequest(l.req.SessionID, after), false)
		if errors.Is(err, execapi.ErrSessionNotFound) || errors.Is(err, execapi.ErrSessionClosed) {
			return struct{}{}, backoff.Permanent(fmt.Errorf("the executor no longer has the session: %w", err))
		}
		return struct{}{}, err
	}, backoff.WithBackOff(retryPacing()), backoff.WithMaxElapsedTime(window))
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, execapi.ErrSessionNotFound) && !errors.Is(err, execapi.ErrSessionClosed) {
			err = fmt.Errorf("could not resume within %s (%d attempts): %w", window, attempts, err)
		}
		return err
	}
	l.log.Info("executor session resumed", "attempts", attempts, "after", after, "took", time.Since(start))
	return nil
}

func (l *link) Reconnect(ctx context.Context, window time.Duration) error {
	l.attachMu.Lock()
	defer l.attachMu.Unlock()
	old := l.current()
	if old.alive() {
		return nil
	}
	<-old.done
	l.log.Warn("executor stream broke; reconnecting", "err", old.err)
	retry := []backoff.RetryOption{backoff.WithBackOff(retryPacing()), backoff.WithMaxTries(1)}
	if window > 0 {
		retry = []backoff.RetryOption{backoff.WithBackOff(retryPacing()), backoff.WithMaxElapsedTime(window),
			backoff.WithNotify(func(err error, next time.Duration) {
				l.log.Warn("executor unreachable; retrying", "in", next, "for", window, "err", err)
			})}
	}
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
		err := l.connect(actx, true)
		if err != nil && !transient(err) {
			return struct{}{}, backoff.Permanent(err)
		}
		return struct{}{}, err
	}, retry...)
	return err
}

// transient reports whether a failure to reach the executor may pass by
// itself: it is unreachable or did not answer in time, or it is draining
// and may come back. Refusals (authentication, permission, a bad request)
// do not.
func transient(err error) bool {
	return errors.Is(err, execapi.ErrUnavailable) || errors.Is(err, execapi.ErrDraining) ||
		errors.Is(err, context.DeadlineExceeded)
}

func resumeRequest(id string, after uint64) *executorv1.ExecuteRequest {
	return &executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Resume{Resume: &executorv1.Resume{SessionId: id, LastSequence: after}}}
}

// connect attaches a stream to the session: with resume, from where the
// last stream stopped, else with Open. Either may find the other state on
// the executor (the session expired, outlived a restart of its client, or
// is just ending), so each falls back to the other, with a short pause
// before each Open. A session that Open finds in place is taken over: the
// events from before are skipped and its calls aborted (see Client.Open).
func (l *link) connect(ctx context.Context, resume bool) error {
	var (
		stale bool
		after = l.lastSeq.Load()
		st    *stream
		err   error
		pause = 10 * time.Millisecond
	)
	open := &executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: openToProto(l.req)}}
	for attempt := 0; ; attempt++ {
		var retry bool
		if resume {
			st, err = l.attach(ctx, resumeRequest(l.req.SessionID, after), stale)
			retry = errors.Is(err, execapi.ErrSessionNotFound) || errors.Is(err, execapi.ErrSessionClosed)
		} else {
			st, err = l.attach(ctx, open, false)
			if retry = errors.Is(err, execapi.ErrSessionExists); retry {
				stale, after = true, 0
			}
		}
		if !retry || attempt == maxSwitches {
			break
		}
		resume = !resume
		if !resume {
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("connect to executor %s: %w", l.addr, context.Cause(ctx))
			case <-t.C:
			}
			pause *= 2
		}
	}
	if err != nil {
		return err
	}
	if stale {
		// The calls of the client before are nobody's to wait for.
		if err := st.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Abort{Abort: abortToProto(execapi.Abort{
			All: true, Reason: execapi.AbortShutdown, Detail: "the session's client restarted",
		})}}); err != nil {
			l.log.Warn("abort the calls of the session taken over", "err", err)
		}
	}
	l.log.Info("connected to executor", "resumed", st.hello.Resumed, "executor_version", st.hello.Version,
		"sandbox", st.hello.Sandbox.Backend)
	return nil
}

// attach starts an Execute stream with first (an Open or a Resume), waits
// for its Hello, makes it the link's current stream and starts receiving.
// With skipReplay, the events the executor replays from before the Hello
// are dropped (they belong to a client that is gone). The stream outlives
// ctx: it lives until it breaks or the link closes.
func (l *link) attach(ctx context.Context, first *executorv1.ExecuteRequest, skipReplay bool) (*stream, error) {
	svc, err := l.c.service(ctx, l.addr)
	if err != nil {
		return nil, err
	}
	streamCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rpc, err := svc.Execute(streamCtx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("open an Execute stream to %s: %w", l.addr, classify(err))
	}
	if err := rpc.Send(first); err != nil {
		cancel()
		return nil, fmt.Errorf("send %T to %s: %w", first.GetMsg(), l.addr, classify(recvErr(rpc, err)))
	}
	type answer struct {
		resp *executorv1.ExecuteResponse
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := rpc.Recv()
		answered <- answer{resp, err}
	}()
	var a answer
	select {
	case a = <-answered:
	case <-ctx.Done():
		cancel()
		<-answered
		return nil, fmt.Errorf("waiting for the hello of executor %s: %w", l.addr, context.Cause(ctx))
	}
	switch {
	case a.err != nil:
		cancel()
		return nil, fmt.Errorf("executor %s: %w", l.addr, classify(a.err))
	case a.resp.GetHello() == nil:
		cancel()
		return nil, fmt.Errorf("%w: executor %s sent %T before its hello", execapi.ErrUnavailable, l.addr, a.resp.GetEvent())
	}
	st := &stream{rpc: rpc, cancel: cancel, hello: *helloFromProto(a.resp.GetHello()), done: make(chan struct{})}
	var skipThrough uint64
	switch {
	case skipReplay:
		skipThrough = st.hello.LastSequence
		l.lastSeq.Store(skipThrough)
	case !st.hello.Resumed:
		l.lastSeq.Store(0) // a new session numbers its events anew
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		cancel()
		return nil, fmt.Errorf("%w: the link to executor %s is closed", execapi.ErrSessionClosed, l.addr)
	}
	l.cur = st
	l.mu.Unlock()
	go l.receive(st, skipThrough)
	return st, nil
}

// recvErr returns the stream's real status after a failed Send (Send
// reports only io.EOF when the server ended the stream).
func recvErr(rpc executorv1.ExecutorService_ExecuteClient, sendErr error) error {
	if !errors.Is(sendErr, io.EOF) {
		return sendErr
	}
	for {
		if _, err := rpc.Recv(); err != nil {
			return err
		}
	}
}

// receive hands every event of st after its Hello to the link's EventFunc
// until the stream ends. Events numbered at or below skipThrough, and
// Hellos (which belong to their stream), are not handed on.
func (l *link) receive(st *stream, skipThrough uint64) {
	defer close(st.done)
	for {
		resp, err := st.rpc.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the executor ended the session")
			}
			st.err = classify(err)
			return
		}
		ev := eventFromProto(resp)
		if ev.Hello != nil || ev.Seq <= skipThrough {
			continue
		}
		if ev.Seq > l.lastSeq.Load() {
			l.lastSeq.Store(ev.Seq)
		}
		l.events(l, ev)
	}
}
