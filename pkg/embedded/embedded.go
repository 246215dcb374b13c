// Package embedded runs a complete toolsvc inside the calling process,
// reached over an in-memory connection. The orchestrator uses it when no
// executor address is given, and `toolsvc call --embedded` uses it too: the
// calls still go through the real gRPC stack and the same server code as a
// remote toolsvc, so an embedded and a remote executor behave alike.
package embedded

import (
	"context"
	"fmt"
	"net"
	"os"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execgrpc"
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/rpcserver"
	"github.com/toolwire/toolwire/pkg/sandbox"
)

// Config configures the embedded executor; it is the same as toolsvc's.
type Config = execsvc.Config

// DefaultNetwork is the network of an embedded executor's tools unless the
// caller chooses: they work on the caller's own projects, and fetch modules,
// install packages and test against local servers as the caller's shell
// does. (A private network namespace also needs privileges an ordinary
// user does not have.)
const DefaultNetwork = sandbox.NetworkHost

// Local returns cfg set up the way an executor inside a user's own command
// runs (orchestrator -p, toolsvc call --embedded): its tools run as the user
// who runs the command, confined by the sandbox, on any directory that user
// may use (root's own included, when that user is root), instead of as a
// user of their own per session, as a multi-tenant toolsvc serve runs them.
// It runs the development profile (execsvc.ProfileDevelopment: the user's
// real HOME, everything readable but the deny list, writes to the
// workspace, the temp dir and the tool caches), and fills in what cfg
// leaves empty: the run-as user (the caller, unless
// session users are configured) and the network (DefaultNetwork). Both
// commands build their embedded executor's configuration through it.
func Local(cfg Config) Config {
	cfg.Profile = execsvc.ProfileDevelopment
	if cfg.Sandbox.RunAsUser == "" && cfg.SessionUIDs.IsZero() {
		cfg.Sandbox.RunAsUser = CallerUser()
	}
	if cfg.Sandbox.Network == "" {
		cfg.Sandbox.Network = DefaultNetwork
	}
	return cfg
}

// CallerUser returns the user and group of this process as "uid:gid", the
// form sandbox.Config.RunAsUser takes.
func CallerUser() string {
	return fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
}

// bufferSize is the in-memory connection's buffer.
const bufferSize = 1 << 20

// Executor is a running in-process toolsvc.
type Executor struct {
	ex   *executor.Executor
	srv  *rpcserver.Server
	conn *grpc.ClientConn
	done chan struct{}
}

// Start builds the executor and serves it on an in-memory listener.
func Start(ctx context.Context, cfg Config) (*Executor, error) {
	ex, err := execsvc.New(cfg)
	if err != nil {
		return nil, err
	}
	lis := bufconn.Listen(bufferSize)
	srv := rpcserver.New(cfg.Logger)
	executorv1.RegisterExecutorServiceServer(srv.Server, execgrpc.NewServer(ex, cfg.Logger))
	e := &Executor{ex: ex, srv: srv, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///embedded", append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(rpcserver.MaxMessageBytes), grpc.MaxCallSendMsgSize(rpcserver.MaxMessageBytes)),
	}, rpcserver.DefaultTransport.DialOptions()...)...)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("connect to the embedded executor: %w", err)
	}
	e.conn = conn
	return e, nil
}

// Conn returns the client connection to the embedded executor.
func (e *Executor) Conn() *grpc.ClientConn { return e.conn }

// Client returns an ExecutorService client on Conn.
func (e *Executor) Client() executorv1.ExecutorServiceClient {
	return executorv1.NewExecutorServiceClient(e.conn)
}

// Close ends every session (running calls are killed and reported
// interrupted), removes the cgroup directory that held the sessions' calls,
// then stops the server.
func (e *Executor) Close() {
	e.ex.Close()
	sandbox.ReleaseSessionGroups()
	if e.conn != nil {
		_ = e.conn.Close()
	}
	e.srv.Stop()
	<-e.done
}
