package execpool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v5"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Timing of health calls and DNS look-ups.
const (
	checkTimeout  = 5 * time.Second  // one Check call
	lookupTimeout = 10 * time.Second // one DNS look-up
)

// newRetry paces retries of failed health calls of one member: about
// 100 ms after the first failure, doubling up to about 4 s, each wait
// randomized by a quarter either way so that many members (or many
// orchestrators) do not retry in step. The longest wait is 5 s. The watch
// loop takes only the pacing from the library, not backoff.Retry: it never
// gives up, and it switches between a Watch stream and steady polling.
func newRetry() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{
		InitialInterval:     100 * time.Millisecond,
		RandomizationFactor: 0.25,
		Multiplier:          2,
		MaxInterval:         4 * time.Second,
	}
}

// errStopWatching ends a Watch stream whose member stopped serving.
var errStopWatching = errors.New("member is not serving")

// watch keeps m's state current until ctx ends (m removed, or the pool
// closed). While m is SERVING a Watch stream reports every change at once.
// When m stops serving the stream is closed and m is polled with Check
// instead: a draining toolsvc stops gracefully only once its streams end,
// and a watch held open by the pool would make it wait out its whole
// shutdown grace. A member without Watch is always polled.
func (p *Pool) watch(ctx context.Context, m *member) {
	defer p.wg.Done()
	var (
		client   healthpb.HealthClient
		retry    = newRetry()
		polling  bool // m is not serving: poll until it is
		pollOnly bool // m does not implement Watch
	)
	for ctx.Err() == nil {
		if client == nil {
			conn, err := p.cfg.Conn(m.addr)
			if err != nil {
				p.setState(m, Unreachable, fmt.Errorf("connection: %w", err))
				sleep(ctx, retry.NextBackOff())
				continue
			}
			client = healthpb.NewHealthClient(conn)
		}
		var err error
		if polling || pollOnly {
			var st State
			if st, err = p.check(ctx, client); err == nil {
				retry.Reset()
				p.setState(m, st, nil)
				if st == Serving && !pollOnly {
					polling = false
					continue
				}
				sleep(ctx, p.cfg.Poll)
				continue
			}
		} else {
			err = p.watchStream(ctx, m, client, retry)
			switch {
			case errors.Is(err, errStopWatching):
				polling = true
				sleep(ctx, p.cfg.Poll)
				continue
			case status.Code(err) == codes.Unimplemented:
				pollOnly = true
				p.log.Info("executor has no health Watch; polling Check instead", "addr", m.addr, "every", p.cfg.Poll)
				continue
			}
		}
		if ctx.Err() != nil {
			return
		}
		p.setState(m, Unreachable, err)
		sleep(ctx, retry.NextBackOff())
	}
}

// watchStream follows m's health on one Watch stream while it is SERVING.
// It returns errStopWatching once m reports anything else or Draining
// stops the stream, or the error that broke the stream.
func (p *Pool) watchStream(ctx context.Context, m *member, client healthpb.HealthClient, retry backoff.BackOff) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	p.mu.Lock()
	m.stopWatch = cancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		m.stopWatch = nil
		p.mu.Unlock()
	}()
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: p.cfg.Service})
	if err != nil {
		if errors.Is(context.Cause(ctx), errStopWatching) {
			return errStopWatching
		}
		return fmt.Errorf("health watch: %w", err)
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(context.Cause(ctx), errStopWatching) {
			return errStopWatching
		}
		if err == io.EOF {
			return errors.New("health watch ended by the executor")
		}
		if err != nil {
			return fmt.Errorf("health watch: %w", err)
		}
		retry.Reset()
		st := stateOf(resp.GetStatus())
		p.setState(m, st, nil)
		if st != Serving {
			return errStopWatching
		}
	}
}

// check asks for the member's health once.
func (p *Pool) check(ctx context.Context, client healthpb.HealthClient) (State, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: p.cfg.Service})
	if status.Code(err) == codes.NotFound {
		// The health service answers NotFound for a service it does not
		// know: the executor is up but not serving sessions.
		return NotServing, nil
	}
	if err != nil {
		return Unreachable, fmt.Errorf("health check: %w", err)
	}
	return stateOf(resp.GetStatus()), nil
}

func stateOf(s healthpb.HealthCheckResponse_ServingStatus) State {
	if s == healthpb.HealthCheckResponse_SERVING {
		return Serving
	}
	return NotServing
}

// resolveLoop resolves a DNS target now and every Config.Resolve until the
// pool closes.
func (p *Pool) resolveLoop() {
	defer p.wg.Done()
	var lastErr string // the last failure logged, so that a lasting one is logged once
	for {
		if err := p.resolve(); err != nil {
			if p.ctx.Err() != nil {
				return
			}
			if err.Error() != lastErr {
				p.log.Warn("resolving executors failed; keeping the members", "host", p.cfg.Target.Host, "err", err)
			}
			lastErr = err.Error()
		} else {
			lastErr = ""
		}
		if !sleep(p.ctx, p.cfg.Resolve) {
			return
		}
	}
}

// resolve looks the target's host up once and makes its addresses the
// members. A name that does not exist means no members (a headless Service
// with no ready pod); any other failure keeps the members as they are.
func (p *Pool) resolve() error {
	ctx, cancel := context.WithTimeout(p.ctx, lookupTimeout)
	defer cancel()
	hosts, err := p.cfg.LookupHost(ctx, p.cfg.Target.Host)
	if err != nil {
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
			return err
		}
		hosts = nil
	}
	addrs := make([]string, 0, len(hosts))
	for _, h := range hosts {
		addrs = append(addrs, net.JoinHostPort(h, p.cfg.Target.Port))
	}
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	if len(addrs) == 0 && len(p.members) > 0 {
		p.log.Warn("executor name resolves to no address; the pool is empty", "host", p.cfg.Target.Host)
	}
	p.setMembersLocked(addrs)
	return nil
}

// sleep waits d or until ctx ends, and reports whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
