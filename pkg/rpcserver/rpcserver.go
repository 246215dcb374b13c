// Package rpcserver builds the gRPC servers of toolsvc and orchestrator the
// same way: OpenTelemetry server spans and metrics, recovery and logging
// interceptors whose lines carry the trace and span ids, keepalive, message
// size limits, the standard health service and server reflection, and
// listening on TCP or unix sockets.
package rpcserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/toolwire/toolwire/pkg/rpcerr"
	"github.com/toolwire/toolwire/pkg/telemetry"
)

// MaxMessageBytes caps one gRPC message in either direction. Tool results
// are bounded well below it (30 000 characters inline, 256 KB reads, images
// of a few MB), so anything larger is a client error, refused with
// ResourceExhausted rather than a broken stream.
const MaxMessageBytes = 16 << 20

// Keepalive settings: a silent peer is pinged after 10 s and declared dead
// 10 s later, so a dead or partitioned peer is noticed within about 20 s.
const (
	KeepaliveTime    = 10 * time.Second
	KeepaliveTimeout = 10 * time.Second
)

// Server is a gRPC server with health and reflection registered.
type Server struct {
	*grpc.Server
	// Health is the standard health service; set service statuses on it.
	Health *health.Server
}

// New returns a Server with toolwire's interceptors and limits, and
// DefaultTransport's windows and buffers. Extra options (credentials, stats
// handlers, auth, another Transport's ServerOptions) are appended, and
// override those.
//
// Every RPC but health checks gets an OpenTelemetry server span (and the
// rpc.server.* metrics) from the global tracer and meter providers, its
// parent taken from the client's W3C trace context. The lines of the
// logging and recovery interceptors carry that span's trace_id and span_id.
func New(log *slog.Logger, extra ...grpc.ServerOption) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = slog.New(telemetry.TraceHandler(log.Handler()))
	logger := logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		log.Log(ctx, slog.Level(lvl), msg, fields...)
	})
	recoverFn := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "panic in gRPC handler", "panic", p, "stack", string(debug.Stack()))
		return rpcerr.Error(codes.Internal, rpcerr.Internal, fmt.Sprintf("internal error: %v", p))
	})
	logOpts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall)}
	opts := []grpc.ServerOption{
		grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithFilter(filters.Not(filters.HealthCheck())))),
		grpc.ChainUnaryInterceptor(
			logging.UnaryServerInterceptor(logger, logOpts...),
			recovery.UnaryServerInterceptor(recoverFn),
		),
		grpc.ChainStreamInterceptor(
			logging.StreamServerInterceptor(logger, logOpts...),
			recovery.StreamServerInterceptor(recoverFn),
		),
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}
	opts = append(opts, DefaultTransport.ServerOptions()...)
	s := &Server{Server: grpc.NewServer(append(opts, extra...)...), Health: health.NewServer()}
	healthpb.RegisterHealthServer(s.Server, s.Health)
	reflection.Register(s.Server)
	return s
}

// ClientKeepalive is the keepalive clients use, matching the server's
// enforcement policy.
var ClientKeepalive = keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true}

// Listen listens on addr: "unix:///path", "unix:path" or a TCP "host:port".
// A stale unix socket file is removed first.
func Listen(addr string) (net.Listener, error) {
	if path, ok := UnixPath(addr); ok {
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(path)
		}
		l, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("listen on unix socket %s: %w", path, err)
		}
		return l, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return l, nil
}

// UnixPath returns the socket path of a unix address.
func UnixPath(addr string) (string, bool) {
	switch {
	case strings.HasPrefix(addr, "unix://"):
		return strings.TrimPrefix(addr, "unix://"), true
	case strings.HasPrefix(addr, "unix:"):
		return strings.TrimPrefix(addr, "unix:"), true
	}
	return "", false
}

// Shutdown marks every service NOT_SERVING, then stops the server
// gracefully, forcing it after grace.
func (s *Server) Shutdown(grace time.Duration) {
	s.Health.Shutdown()
	done := make(chan struct{})
	go func() {
		s.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(grace):
		s.Stop()
		<-done
	}
}

// WaitServing polls the standard health service on conn until service
// reports SERVING, or ctx ends; it then returns the last error seen.
func WaitServing(ctx context.Context, conn grpc.ClientConnInterface, service string) error {
	client := healthpb.NewHealthClient(conn)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := client.Check(cctx, &healthpb.HealthCheckRequest{Service: service})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("%s is %s", service, resp.GetStatus())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not serving: %w", service, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
