package orchgrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"

	orchestratorv1 "github.com/toolwire/toolwire/gen/toolwire/orchestrator/v1"
	"github.com/toolwire/toolwire/pkg/execgrpc"
	"github.com/toolwire/toolwire/pkg/orchestrator"
)

// ServiceName is OrchestratorService's full name, the one its health
// status is kept under.
var ServiceName = orchestratorv1.OrchestratorService_ServiceDesc.ServiceName

// Server serves OrchestratorService over an Orchestrator.
type Server struct {
	orchestratorv1.UnimplementedOrchestratorServiceServer
	o   *orchestrator.Orchestrator
	log *slog.Logger
}

// NewServer returns a Server. A nil logger discards logs.
func NewServer(o *orchestrator.Orchestrator, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{o: o, log: log}
}

// Register adds the service to a gRPC server.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	orchestratorv1.RegisterOrchestratorServiceServer(r, s)
}

// CreateSession starts a session and connects it to its executor.
func (s *Server) CreateSession(ctx context.Context, req *orchestratorv1.CreateSessionRequest) (*orchestratorv1.CreateSessionResponse, error) {
	cfg, err := configFromProto(req.GetConfig())
	if err != nil {
		return nil, toStatus(err, "session_id", req.GetSessionId(), "field", "settings")
	}
	sess, err := s.o.Create(ctx, req.GetSessionId(), cfg)
	if err != nil {
		return nil, toStatus(err, "session_id", req.GetSessionId())
	}
	return &orchestratorv1.CreateSessionResponse{Session: sessionToProto(sess.Info())}, nil
}

// GetSession describes one session, loading it from its transcript if needed.
func (s *Server) GetSession(ctx context.Context, req *orchestratorv1.GetSessionRequest) (*orchestratorv1.GetSessionResponse, error) {
	sess, err := s.o.Session(ctx, req.GetSessionId())
	if err != nil {
		return nil, toStatus(err, "session_id", req.GetSessionId())
	}
	return &orchestratorv1.GetSessionResponse{Session: sessionToProto(sess.Info())}, nil
}

// Rewind restores a session's files to before a tool_use and cuts its
// conversation back to before the assistant message that holds it.
func (s *Server) Rewind(ctx context.Context, req *orchestratorv1.RewindRequest) (*orchestratorv1.RewindResponse, error) {
	sess, err := s.o.Session(ctx, req.GetSessionId())
	if err != nil {
		return nil, toStatus(err, "session_id", req.GetSessionId())
	}
	res, err := sess.Rewind(ctx, req.GetToolUseId())
	if err != nil {
		return nil, toStatus(err, "session_id", req.GetSessionId(), "tool_use_id", req.GetToolUseId())
	}
	resp := &orchestratorv1.RewindResponse{MessagesRemoved: uint32(res.MessagesRemoved), Session: sessionToProto(sess.Info())}
	if res.Restore != nil {
		resp.Restore = execgrpc.RestoreResultToProto(res.Restore)
	}
	return resp, nil
}

// ListSessions describes every session, newest first.
func (s *Server) ListSessions(ctx context.Context, _ *orchestratorv1.ListSessionsRequest) (*orchestratorv1.ListSessionsResponse, error) {
	infos, err := s.o.List(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &orchestratorv1.ListSessionsResponse{}
	for _, i := range infos {
		resp.Sessions = append(resp.Sessions, sessionToProto(i))
	}
	return resp, nil
}

// DeleteSession ends a session and removes its transcript.
func (s *Server) DeleteSession(ctx context.Context, req *orchestratorv1.DeleteSessionRequest) (*orchestratorv1.DeleteSessionResponse, error) {
	if err := s.o.Delete(ctx, req.GetSessionId()); err != nil {
		return nil, toStatus(err, "session_id", req.GetSessionId())
	}
	return &orchestratorv1.DeleteSessionResponse{}, nil
}

// Converse binds the stream to a session (the first message is an Attach),
// then relays the session's events to the client while taking its user
// messages, permission decisions and interrupts. Turns belong to the
// session, not the stream: a client that goes away can attach again and
// pick up from the last sequence number it saw. After the client
// half-closes, the stream ends once the session is idle and every event up
// to then was sent.
func (s *Server) Converse(stream orchestratorv1.OrchestratorService_ConverseServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return err
	}
	attach := first.GetAttach()
	if attach == nil {
		return toStatus(fmt.Errorf("%w: %w, got %T", orchestrator.ErrInvalid, errFirstMessage, first.GetMsg()))
	}
	sess, err := s.o.Session(ctx, attach.GetSessionId())
	if err != nil {
		return toStatus(err, "session_id", attach.GetSessionId())
	}
	after := attach.GetLastSequence()
	if after == 0 {
		after = sess.LastSequence()
	}
	sub := sess.Subscribe(after)

	c := &conversation{stream: stream, sess: sess, log: s.log.With("session_id", sess.ID())}
	if err := c.send(&orchestratorv1.ConverseResponse{
		Sequence: after,
		Event:    &orchestratorv1.ConverseResponse_Attached{Attached: &orchestratorv1.Attached{Session: sessionToProto(sess.Info())}},
	}); err != nil {
		return err
	}

	live, stopLive := context.WithCancel(ctx)
	defer stopLive()
	sendErr := make(chan error, 1)
	go func() { sendErr <- c.relay(ctx, live, sub) }()
	// Receiving runs beside the relay so that either may end the stream:
	// the client by half-closing or failing, the session by closing.
	recvErr := make(chan error, 1)
	go func() { recvErr <- c.receive() }()

	select {
	case err := <-sendErr:
		// The session closed or the client stopped reading. A receiver
		// still blocked in Recv returns once the handler has returned.
		return err
	case err := <-recvErr:
		if err == nil {
			// Half-closed: let the sender finish the running turn, if any.
			c.halfClosed.Store(true)
			if !sess.Info().Busy {
				stopLive()
			}
			return <-sendErr
		}
		stopLive()
		<-sendErr
		if ctx.Err() != nil {
			return toStatus(ctx.Err(), "session_id", sess.ID())
		}
		return err
	}
}

// conversation is one Converse stream.
type conversation struct {
	stream     orchestratorv1.OrchestratorService_ConverseServer
	sess       *orchestrator.Session
	log        *slog.Logger
	halfClosed atomic.Bool

	sendMu sync.Mutex // serialises Send: one sender at a time on a gRPC stream
}

func (c *conversation) send(r *orchestratorv1.ConverseResponse) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return c.stream.Send(r)
}

// relay sends session events until live ends, then drains the events
// already held, and returns. It also returns after a turn completes on a
// half-closed stream.
func (c *conversation) relay(ctx, live context.Context, sub *orchestrator.Subscription) error {
	for {
		ev, err := sub.Next(live)
		switch {
		case errors.Is(err, orchestrator.ErrClosed):
			return toStatus(fmt.Errorf("%w: session %s: %w", errSessionEnded, c.sess.ID(), err), "session_id", c.sess.ID())
		case err != nil && ctx.Err() != nil:
			return toStatus(ctx.Err(), "session_id", c.sess.ID())
		case err != nil:
			return nil
		}
		if r := eventToProto(ev); r != nil {
			if err := c.send(r); err != nil {
				return err
			}
		}
		if ev.Kind == orchestrator.EventTurnComplete && c.halfClosed.Load() && !c.sess.Info().Busy {
			// Nothing more will come for this client; send what is held.
			done, cancel := context.WithCancel(ctx)
			cancel()
			live = done
		}
	}
}

// receive handles client messages until the client half-closes (nil) or the
// stream fails.
func (c *conversation) receive() error {
	for {
		req, err := c.stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch m := req.GetMsg().(type) {
		case *orchestratorv1.ConverseRequest_UserMessage:
			err = c.sess.Start(m.UserMessage.GetText())
		case *orchestratorv1.ConverseRequest_PermissionDecision:
			err = c.sess.Decide(execgrpc.DecisionFromProto(m.PermissionDecision))
		case *orchestratorv1.ConverseRequest_Background:
			err = c.sess.Background(m.Background.GetToolUseId())
		case *orchestratorv1.ConverseRequest_Interrupt:
			c.log.Info("client interrupt", "reason", m.Interrupt.GetReason())
			c.sess.Interrupt(m.Interrupt.GetReason())
		case *orchestratorv1.ConverseRequest_Attach:
			return toStatus(fmt.Errorf("%w: %w: the stream is already attached", orchestrator.ErrInvalid, errUnexpectedMessage), "session_id", c.sess.ID())
		default:
			return toStatus(fmt.Errorf("%w: %w %T", orchestrator.ErrInvalid, errUnexpectedMessage, m), "session_id", c.sess.ID())
		}
		if err != nil {
			// A refused request is reported on this stream only; the
			// conversation goes on.
			if serr := c.send(&orchestratorv1.ConverseResponse{
				Sequence: c.sess.LastSequence(),
				Event: &orchestratorv1.ConverseResponse_Error{Error: &orchestratorv1.Error{
					Kind: errorKind(err), Message: err.Error(), Recoverable: true, Reason: eventReason(err),
				}},
			}); serr != nil {
				return serr
			}
		}
	}
}
