package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"google.golang.org/grpc"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/embedded"
	"github.com/toolwire/toolwire/pkg/rpcauth"
	"github.com/toolwire/toolwire/pkg/rpcserver"
)

// embeddedAddr names the in-process executor.
const embeddedAddr = "embedded"

// dialer gives the orchestrator its executors: the in-process one, started
// on first use, or remote ones over one connection per address.
type dialer struct {
	embeddedCfg embedded.Config
	security    *rpcauth.ClientConfig // TLS and token of remote executors
	log         *slog.Logger

	mu    sync.Mutex // guards the fields below
	emb   *embedded.Executor
	conns map[string]*grpc.ClientConn
}

func newDialer(cfg embedded.Config, security *rpcauth.ClientConfig, log *slog.Logger) *dialer {
	return &dialer{embeddedCfg: cfg, security: security, log: log, conns: map[string]*grpc.ClientConn{}}
}

// Dial returns a client for addr ("embedded" or host:port).
func (d *dialer) Dial(ctx context.Context, addr string) (executorv1.ExecutorServiceClient, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if addr == "" || addr == embeddedAddr {
		if d.emb == nil {
			emb, err := embedded.Start(ctx, d.embeddedCfg)
			if err != nil {
				return nil, fmt.Errorf("start the embedded executor: %w", err)
			}
			d.emb = emb
			d.log.Info("embedded executor started", "root", d.embeddedCfg.Root)
		}
		return d.emb.Client(), nil
	}
	conn := d.conns[addr]
	if conn == nil {
		target := addr
		if _, ok := rpcserver.UnixPath(addr); !ok {
			target = "passthrough:///" + addr
		}
		secure, err := d.security.DialOptions(addr)
		if err != nil {
			return nil, fmt.Errorf("executor %s: %w", addr, err)
		}
		conn, err = grpc.NewClient(target, append(secure,
			grpc.WithKeepaliveParams(rpcserver.ClientKeepalive),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(rpcserver.MaxMessageBytes), grpc.MaxCallSendMsgSize(rpcserver.MaxMessageBytes)),
		)...)
		if err != nil {
			return nil, fmt.Errorf("connect to executor %s: %w", addr, err)
		}
		d.conns[addr] = conn
	}
	return executorv1.NewExecutorServiceClient(conn), nil
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
