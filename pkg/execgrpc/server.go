package execgrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/settings/settingspb"
)

// Server serves ExecutorService over an Executor.
type Server struct {
	executorv1.UnimplementedExecutorServiceServer
	ex  *executor.Executor
	log *slog.Logger
}

// NewServer returns a Server. A nil logger discards logs.
func NewServer(ex *executor.Executor, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{ex: ex, log: log}
}

// ListTools returns the tools offered to the model: the built-in ones
// sorted by name, and with a session id that session's MCP tools after
// them.
func (s *Server) ListTools(ctx context.Context, req *executorv1.ListToolsRequest) (*executorv1.ListToolsResponse, error) {
	specs := s.ex.Tools()
	if id := req.GetSessionId(); id != "" {
		var err error
		if specs, err = s.ex.SessionTools(id); err != nil {
			return nil, toStatus(err)
		}
	}
	defs := toolSpecsToProto(specs)
	for _, d := range defs {
		d.Aliases = s.ex.Aliases(d.GetName())
	}
	return &executorv1.ListToolsResponse{Tools: defs}, nil
}

// Execute serves one session stream: the first client message opens or
// resumes a session; then tool uses, aborts and decisions flow in while
// events flow out. A client half-close ends the session once every call has
// its Result; a broken stream leaves the session running for the retention
// window, so the client can Resume.
func (s *Server) Execute(stream executorv1.ExecutorService_ExecuteServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	var (
		sess    *executor.Session
		resumed bool
		after   uint64
	)
	switch m := first.GetMsg().(type) {
	case *executorv1.ExecuteRequest_Open:
		o := m.Open
		var set settings.Settings
		if set, err = settingspb.FromProto(o.GetSettings()); err != nil {
			return toStatus(fmt.Errorf("%w: %w", executor.ErrInvalidSettings, err), "session_id", o.GetSessionId(), "field", "settings")
		}
		sess, err = s.ex.Open(ctx, executor.OpenRequest{
			Settings:      set,
			SessionID:     o.GetSessionId(),
			Workspace:     o.GetWorkspace(),
			Options:       OptionsFromProto(o.GetOptions()),
			ClientName:    o.GetClientName(),
			ClientVersion: o.GetClientVersion(),
			MCPServers:    MCPServersFromProto(o.GetMcpServers()),
			Tools:         toolSetFromProto(o.GetTools()),
		})
	case *executorv1.ExecuteRequest_Resume:
		resumed, after = true, m.Resume.GetLastSequence()
		sess, err = s.ex.Session(m.Resume.GetSessionId())
	default:
		err = fmt.Errorf("%w: the first message must be open or resume, got %T", errFirstMessage, m)
	}
	if err != nil {
		return toStatus(err, "session_id", requestedSession(first))
	}
	hello, replay, complete, readCtx, gen, err := sess.Attach(ctx, resumed, after)
	if err != nil {
		return toStatus(err, "session_id", sess.ID())
	}
	defer sess.Detach(gen)
	if !complete {
		s.log.Warn("resume could not replay every event", "session_id", sess.ID(), "after", after)
	}
	for _, ev := range append([]*executor.Event{hello}, replay...) {
		if err := stream.Send(eventToProto(ev)); err != nil {
			return err
		}
	}

	sendCtx, stop := context.WithCancelCause(readCtx)
	defer stop(nil)
	go s.receive(stream, sess, stop)
	for {
		ev, err := sess.Next(sendCtx)
		if err != nil {
			return endOfStream(ctx, sess.ID(), err)
		}
		if err := stream.Send(eventToProto(ev)); err != nil {
			return err
		}
	}
}

// endOfStream turns the reason the send loop stopped into the RPC's status:
// the session ended (OK), the stream broke, another stream resumed the
// session, or the client broke the protocol.
func endOfStream(ctx context.Context, sessionID string, err error) error {
	switch {
	case errors.Is(err, executor.ErrSessionClosed):
		return nil
	case ctx.Err() != nil:
		return toStatus(ctx.Err(), "session_id", sessionID)
	case errors.Is(err, context.Canceled):
		return toStatus(errSuperseded, "session_id", sessionID)
	}
	return toStatus(err, "session_id", sessionID)
}

// receive reads client messages until the client half-closes or the stream
// breaks. A protocol violation ends the stream through stop.
func (s *Server) receive(stream executorv1.ExecutorService_ExecuteServer, sess *executor.Session, stop context.CancelCauseFunc) {
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			sess.Finish()
			return
		}
		if err != nil {
			return
		}
		switch m := req.GetMsg().(type) {
		case *executorv1.ExecuteRequest_ToolUse:
			// The call's span is a child of the trace context the ToolUse
			// carries, else of this stream's server span.
			err = sess.Submit(stream.Context(), toolUseFromProto(m.ToolUse))
		case *executorv1.ExecuteRequest_Abort:
			sess.Abort(abortFromProto(m.Abort))
		case *executorv1.ExecuteRequest_PermissionDecision:
			sess.Decide(DecisionFromProto(m.PermissionDecision))
		case *executorv1.ExecuteRequest_ListCheckpoints:
			sess.ListCheckpoints(execapi.ListCheckpoints{RequestID: m.ListCheckpoints.GetRequestId()})
		case *executorv1.ExecuteRequest_RestoreCheckpoint:
			sess.RestoreCheckpoint(execapi.RestoreCheckpoint{RequestID: m.RestoreCheckpoint.GetRequestId(), ToolUseID: m.RestoreCheckpoint.GetToolUseId()})
		case *executorv1.ExecuteRequest_Background:
			sess.Background(executor.Background{ToolUseID: m.Background.GetToolUseId()})
		default:
			err = fmt.Errorf("%w: %T is only allowed as the first message", errUnexpectedMessage, m)
		}
		if err != nil && !errors.Is(err, executor.ErrSessionClosed) {
			stop(err)
			return
		}
	}
}
