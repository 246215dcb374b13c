package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"google.golang.org/grpc"

	"github.com/toolwire/toolwire/pkg/execpool"
)

// placer places sessions on the executors of pools: an --executor (or a
// session's executor) that lists several addresses or names a DNS name
// becomes a pkg/execpool Pool, made on first use and kept until Close.
// It implements orchestrator.Placer.
type placer struct {
	ctx  context.Context // lifetime of the pools
	dial *dialer
	log  *slog.Logger

	mu    sync.Mutex // guards pools
	pools map[string]*execpool.Pool
}

func newPlacer(ctx context.Context, dial *dialer, log *slog.Logger) *placer {
	return &placer{ctx: ctx, dial: dial, log: log, pools: map[string]*execpool.Pool{}}
}

// Place returns the least-loaded serving member of target's pool, or
// target itself when it is one executor.
func (p *placer) Place(ctx context.Context, target string) (string, func(), error) {
	if !execpool.IsPool(target) {
		return target, func() {}, nil
	}
	pool, err := p.pool(target)
	if err != nil {
		return "", nil, err
	}
	addr, release, err := pool.Pick(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("place session on %s: %w", target, err)
	}
	return addr, release, nil
}

// Hold counts a restored session on its member addr of pool target.
func (p *placer) Hold(target, addr string) func() {
	pool, err := p.pool(target)
	if err != nil {
		p.log.Warn("restored session's pool is unusable", "pool", target, "err", err)
		return func() {}
	}
	return pool.Acquire(addr)
}

// Leaving reports whether the pool of target knows addr to be draining or
// unreachable.
func (p *placer) Leaving(target, addr string) bool {
	if !execpool.IsPool(target) {
		return false
	}
	pool, err := p.pool(target)
	if err != nil {
		return false
	}
	for _, m := range pool.Members() {
		if m.Addr == addr {
			return m.State == execpool.NotServing || m.State == execpool.Unreachable
		}
	}
	return false
}

// Draining tells the pool of target that its member addr refused a session
// because it drains.
func (p *placer) Draining(target, addr string) {
	if !execpool.IsPool(target) {
		return
	}
	if pool, err := p.pool(target); err == nil {
		pool.Draining(addr)
	}
}

func (p *placer) pool(target string) (*execpool.Pool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pool := p.pools[target]; pool != nil {
		return pool, nil
	}
	t, err := execpool.ParseTarget(target)
	if err != nil {
		return nil, fmt.Errorf("executor pool: %w", err)
	}
	pool, err := execpool.New(p.ctx, execpool.Config{
		Target: t,
		Conn: func(addr string) (grpc.ClientConnInterface, error) {
			if t.IsDNS() {
				p.dial.setAuthority(addr, t.Host)
			}
			return p.dial.conn(addr)
		},
		Logger: p.log.With("pool", target),
	})
	if err != nil {
		return nil, fmt.Errorf("executor pool %s: %w", target, err)
	}
	p.pools[target] = pool
	return pool, nil
}

// Close stops watching every pool's members.
func (p *placer) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for target, pool := range p.pools {
		pool.Close()
		delete(p.pools, target)
	}
}
