package execgrpc

import (
	"context"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execapi"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Conn returns the connection to the executor at addr. The caller owns
	// and caches the connections (cmd/orchestrator dials each address
	// once); the client opens calls on them and never closes them.
	// Required.
	Conn func(ctx context.Context, addr string) (grpc.ClientConnInterface, error)
	// Logger receives the links' logs; nil discards them.
	Logger *slog.Logger
}

// Client is the client side of ExecutorService: it lists an executor's
// tools and opens Links to sessions, which keep their session across
// breaks of the stream (see execapi.Link). It is what pkg/orchestrator's
// Executor interface asks for.
type Client struct {
	conn func(ctx context.Context, addr string) (grpc.ClientConnInterface, error)
	log  *slog.Logger
}

// NewClient returns a Client.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Conn == nil {
		return nil, fmt.Errorf("execgrpc: ClientConfig.Conn is required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{conn: cfg.Conn, log: log}, nil
}

func (c *Client) service(ctx context.Context, addr string) (executorv1.ExecutorServiceClient, error) {
	conn, err := c.conn(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("executor %s: %w", addr, err)
	}
	return executorv1.NewExecutorServiceClient(conn), nil
}

// ListTools returns the tools of the executor at addr, the built-in ones
// sorted by name.
func (c *Client) ListTools(ctx context.Context, addr string) ([]execapi.ToolInfo, error) {
	svc, err := c.service(ctx, addr)
	if err != nil {
		return nil, err
	}
	resp, err := svc.ListTools(ctx, &executorv1.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("list the tools of executor %s: %w", addr, classify(err))
	}
	tools := make([]execapi.ToolInfo, 0, len(resp.GetTools()))
	for _, d := range resp.GetTools() {
		tools = append(tools, toolInfoFromProto(d))
	}
	return tools, nil
}

// Open opens session req.SessionID on the executor at addr and returns its
// Link; events gets every event of the session after the Hello.
//
// If the executor has the session already, a client of it that is gone
// (an earlier process of the orchestrator) opened it: the link takes it
// over, skips the events from before, and aborts its unfinished calls
// (AbortShutdown), whose results nobody waits for any more. Open never
// retries a failure; Link.Reconnect does.
func (c *Client) Open(ctx context.Context, addr string, req execapi.OpenRequest, events execapi.EventFunc) (execapi.Link, error) {
	l := &link{c: c, addr: addr, req: req, events: events,
		log: c.log.With("executor", addr, "session_id", req.SessionID)}
	if err := l.connect(ctx, false); err != nil {
		return nil, err
	}
	return l, nil
}

// Attach resumes session req.SessionID on the executor at addr after the
// executor event numbered after, the last one a client of it handled (an
// orchestrator replica that takes the session over from one that is
// gone): the session's calls keep running and the events after after are
// replayed to events. When the executor no longer has the session, it is
// opened anew with req. Attach never retries a failure.
func (c *Client) Attach(ctx context.Context, addr string, req execapi.OpenRequest, after uint64, events execapi.EventFunc) (execapi.Link, error) {
	l := &link{c: c, addr: addr, req: req, events: events,
		log: c.log.With("executor", addr, "session_id", req.SessionID)}
	l.lastSeq.Store(after)
	if err := l.connect(ctx, true); err != nil {
		return nil, err
	}
	return l, nil
}
