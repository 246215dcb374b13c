package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/toolwire/toolwire/pkg/ccenv"
	"github.com/toolwire/toolwire/pkg/embedded"
	"github.com/toolwire/toolwire/pkg/execgrpc"
	"github.com/toolwire/toolwire/pkg/rpcauth"
	"github.com/toolwire/toolwire/pkg/rpcserver"
	"github.com/toolwire/toolwire/pkg/settings"
)

// embeddedAddr names the in-process executor.
const embeddedAddr = "embedded"

// executorBackoff paces reconnection to an executor. gRPC's default grows to
// two minutes; an executor that restarts should be found again in seconds.
var executorBackoff = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
	MinConnectTimeout: 5 * time.Second,
}

// dialer gives the orchestrator its executors: the in-process one, started
// on first use, or remote ones over one connection per address.
type dialer struct {
	embeddedCfg embedded.Config
	security    *rpcauth.ClientConfig // TLS and token of remote executors
	log         *slog.Logger

	mu        sync.Mutex // guards the fields below
	emb       *embedded.Executor
	conns     map[string]*grpc.ClientConn
	authority map[string]string // pool member address -> the pool's DNS name (TLS server name)
}

func newDialer(cfg embedded.Config, security *rpcauth.ClientConfig, log *slog.Logger) *dialer {
	return &dialer{embeddedCfg: cfg, security: security, log: log,
		conns: map[string]*grpc.ClientConn{}, authority: map[string]string{}}
}

// setSandboxSettings sets the settings files' sandbox lists of the
// in-process executor; it has no effect once the executor started.
func (d *dialer) setSandboxSettings(s settings.Sandbox) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.emb == nil {
		d.embeddedCfg.SandboxSettings = s
	}
}

// setLimits sets what Claude Code's variables say of the in-process
// executor's limits; it has no effect once the executor started.
func (d *dialer) setLimits(l ccenv.Limits) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.emb == nil {
		d.embeddedCfg.Limits = embeddedLimits(l, d.embeddedCfg.Limits.WebFetchTimeout)
		d.embeddedCfg.MaxConcurrency = l.MaxConcurrency
	}
}

// executors returns the orchestrator's client of its executors, over the
// dialer's connections.
func (d *dialer) executors(log *slog.Logger) (*execgrpc.Client, error) {
	return execgrpc.NewClient(execgrpc.ClientConfig{Conn: d.Conn, Logger: log})
}

// Conn returns the connection to addr ("embedded" or host:port), starting
// the in-process executor on first use.
func (d *dialer) Conn(ctx context.Context, addr string) (grpc.ClientConnInterface, error) {
	if addr == "" || addr == embeddedAddr {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.emb == nil {
			emb, err := embedded.Start(ctx, d.embeddedCfg)
			if err != nil {
				return nil, fmt.Errorf("start the embedded executor: %w", err)
			}
			d.emb = emb
			d.log.Info("embedded executor started", "root", d.embeddedCfg.Root)
		}
		return d.emb.Conn(), nil
	}
	conn, err := d.conn(addr)
	if err != nil {
		return nil, err
	}
	return conn, nil
}

// conn returns the shared connection to the remote executor at addr.
func (d *dialer) conn(addr string) (*grpc.ClientConn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if conn := d.conns[addr]; conn != nil {
		return conn, nil
	}
	target := addr
	if _, ok := rpcserver.UnixPath(addr); !ok {
		target = "passthrough:///" + addr
	}
	secure, err := d.security.DialOptions(addr)
	if err != nil {
		return nil, fmt.Errorf("executor %s: %w", addr, err)
	}
	opts := append(secure,
		grpc.WithKeepaliveParams(rpcserver.ClientKeepalive),
		grpc.WithConnectParams(executorBackoff),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(rpcserver.MaxMessageBytes), grpc.MaxCallSendMsgSize(rpcserver.MaxMessageBytes)),
	)
	if name := d.authority[addr]; name != "" {
		// A member found by DNS is an IP address; its certificate names
		// the pool's DNS name.
		opts = append(opts, grpc.WithAuthority(name))
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to executor %s: %w", addr, err)
	}
	d.conns[addr] = conn
	return conn, nil
}

// setAuthority records the DNS name that member addr of a pool was found
// under, before its connection is made.
func (d *dialer) setAuthority(addr, name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, known := d.authority[addr]; !known {
		d.authority[addr] = name
	}
}

// Close closes every connection and stops the embedded executor.
func (d *dialer) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for addr, c := range d.conns {
		_ = c.Close()
		delete(d.conns, addr)
	}
	if d.emb != nil {
		d.emb.Close()
		d.emb = nil
	}
}
