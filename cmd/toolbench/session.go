package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
)

// session is one Execute stream of a toolsvc. Its methods receive on the
// calling goroutine: every measurement sends, then reads events until the
// ones it waits for arrive, skipping the rest.
type session struct {
	stream grpc.BidiStreamingClient[executorv1.ExecuteRequest, executorv1.ExecuteResponse]
	cancel context.CancelFunc
	hello  *executorv1.Hello
	seq    int
}

// openSession opens an Execute stream, starts a session with the
// executor's default options and checks its Hello against what the
// measurements need.
func openSession(ctx context.Context, p *toolsvcProc) (*session, error) {
	return openSessionWith(ctx, p, nil)
}

// openSessionWith is openSession with the given session options.
func openSessionWith(ctx context.Context, p *toolsvcProc, opts *executorv1.SessionOptions) (*session, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := p.client.Execute(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("open Execute stream: %w", err)
	}
	s := &session{stream: stream, cancel: cancel}
	if err := stream.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{
		ClientName: "toolbench", ClientVersion: "1", Options: opts}}}); err != nil {
		cancel()
		return nil, fmt.Errorf("send Open: %w", err)
	}
	ev, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("receive Hello: %w", err)
	}
	s.hello = ev.GetHello()
	switch {
	case s.hello == nil:
		err = fmt.Errorf("first event is %T, want Hello", ev.GetEvent())
	case s.hello.GetSandbox().GetBackend() != p.sandbox:
		err = fmt.Errorf("toolsvc reports sandbox %q, want %q", s.hello.GetSandbox().GetBackend(), p.sandbox)
	case s.hello.GetMaxConcurrency() < 32:
		err = fmt.Errorf("toolsvc reports max concurrency %d, want 32", s.hello.GetMaxConcurrency())
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return s, nil
}

// send sends one tool_use of assistant message msgID and returns its id.
func (s *session) send(msgID, name, input string) (string, error) {
	s.seq++
	id := fmt.Sprintf("toolu_bench_%d", s.seq)
	err := s.stream.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: &executorv1.ToolUse{
		Id: id, Name: name, InputJson: input, AssistantMessageId: msgID}}})
	if err != nil {
		return "", fmt.Errorf("send %s tool_use: %w", name, err)
	}
	return id, nil
}

// newMessageID returns a fresh assistant message id.
func (s *session) newMessageID() string {
	s.seq++
	return fmt.Sprintf("msg_bench_%d", s.seq)
}

// abort asks toolsvc to stop call id.
func (s *session) abort(id string) error {
	err := s.stream.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Abort{Abort: &executorv1.Abort{
		Target: &executorv1.Abort_ToolUseId{ToolUseId: id}, Reason: executorv1.AbortReason_ABORT_REASON_USER_INTERRUPTED}}})
	if err != nil {
		return fmt.Errorf("send Abort: %w", err)
	}
	return nil
}

// results reads events until every id in ids has its Result; visit, when
// not nil, sees every other event first.
func (s *session) results(ids []string, visit func(*executorv1.ExecuteResponse) error) (map[string]*executorv1.Result, error) {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	got := make(map[string]*executorv1.Result, len(ids))
	for len(got) < len(want) {
		ev, err := s.stream.Recv()
		if err != nil {
			return got, fmt.Errorf("receive (%d of %d results in): %w", len(got), len(want), err)
		}
		if r := ev.GetResult(); r != nil && want[r.GetToolUseId()] {
			got[r.GetToolUseId()] = r
			continue
		}
		if visit != nil {
			if err := visit(ev); err != nil {
				return got, err
			}
		}
	}
	return got, nil
}

// result waits for the Result of one call.
func (s *session) result(id string, visit func(*executorv1.ExecuteResponse) error) (*executorv1.Result, error) {
	rs, err := s.results([]string{id}, visit)
	if err != nil {
		return nil, err
	}
	return rs[id], nil
}

// waitStarted reads events until call id has started.
func (s *session) waitStarted(id string) error {
	for {
		ev, err := s.stream.Recv()
		if err != nil {
			return fmt.Errorf("wait for start of %s: %w", id, err)
		}
		if r := ev.GetResult(); r != nil && r.GetToolUseId() == id {
			return fmt.Errorf("%s ended before it started: %s", id, resultText(r))
		}
		if ev.GetStarted().GetToolUseId() == id {
			return nil
		}
	}
}

// close half-closes the stream, which ends the session once its calls have
// their results, and drains it so the next measurement starts clean.
func (s *session) close() error {
	defer s.cancel()
	if err := s.stream.CloseSend(); err != nil {
		return fmt.Errorf("close send: %w", err)
	}
	timer := time.AfterFunc(30*time.Second, s.cancel)
	defer timer.Stop()
	for {
		_, err := s.stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("drain session: %w", err)
		}
	}
}

// resultText is a Result's text, for error messages.
func resultText(r *executorv1.Result) string {
	var b bytes.Buffer
	for _, c := range r.GetContent() {
		b.WriteString(c.GetText().GetText())
	}
	return b.String()
}
