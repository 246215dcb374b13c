// Package execpool is the orchestrator's pool of executors (toolsvc
// servers): it keeps the members of a target (a static list, or every
// address a DNS name resolves to), watches each member's gRPC health, and
// hands each new session to the SERVING member with the fewest live
// sessions.
//
// It only chooses addresses and counts sessions. It does not dial (the
// caller's Config.Conn does, and owns the connections), does not remember
// which session is bound where (the caller stores the address, which makes
// a session stick to its executor), and does not retry calls.
//
// Why one package of this size (about 750 lines): choosing a member,
// following its health and draining it act on one table of members under
// one lock.
package execpool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
)

// ErrNoExecutor is wrapped by Pick's error when no member is SERVING before
// its context ends, or when the pool is closed. Callers map it to
// codes.Unavailable.
var ErrNoExecutor = errors.New("no executor available")

// DefaultService is the health service name toolsvc sets SERVING while it
// accepts sessions and NOT_SERVING while it drains.
const DefaultService = "toolwire.executor.v1.ExecutorService"

// Defaults of Config.
const (
	DefaultResolve = 10 * time.Second
	DefaultPoll    = 2 * time.Second
)

// Config configures a Pool.
type Config struct {
	// Target names the members. Required.
	Target Target
	// Conn returns the client connection for a member address. The caller
	// owns and caches the connections (the sessions use the same ones); the
	// pool only opens health calls on them and never closes them. Required.
	Conn func(addr string) (grpc.ClientConnInterface, error)
	// Service is the health service name to watch; default DefaultService.
	Service string
	// Resolve is how often a DNS target is resolved again; default
	// DefaultResolve.
	Resolve time.Duration
	// Poll is how often a member is asked for its health while it is not
	// SERVING, or always when it does not implement Watch; default
	// DefaultPoll.
	Poll time.Duration
	// LookupHost resolves a DNS target's host; default
	// net.DefaultResolver.LookupHost.
	LookupHost func(ctx context.Context, host string) ([]string, error)
	// Logger receives member state changes; nil discards them.
	Logger *slog.Logger
}

// State is what the pool knows of a member's health.
type State int

// States of a member. Only Serving members get new sessions.
const (
	// Connecting: no health answer yet.
	Connecting State = iota
	// Serving: the health service says SERVING.
	Serving
	// NotServing: the health service says NOT_SERVING (e.g. draining),
	// SERVICE_UNKNOWN or UNKNOWN.
	NotServing
	// Unreachable: the last health call failed.
	Unreachable
)

// String returns the state's name as it appears in logs and errors.
func (s State) String() string {
	switch s {
	case Connecting:
		return "connecting"
	case Serving:
		return "serving"
	case NotServing:
		return "not serving"
	case Unreachable:
		return "unreachable"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Member is a snapshot of one address the pool knows.
type Member struct {
	// Addr is the member's address, as given to Config.Conn.
	Addr string
	// State is its health.
	State State
	// Err is the last health error of an Unreachable member.
	Err error
	// Sessions is the number of live sessions counted on Addr.
	Sessions int
	// NotMember marks an address that is not (or no longer, e.g. gone from
	// DNS) a member but still has sessions counted on it. It gets no new
	// sessions.
	NotMember bool
}

// Pool is a set of executors that new sessions are spread over. Its
// methods are safe for concurrent use.
type Pool struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context // ends on Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the resolver and member watchers

	mu      sync.Mutex // guards the fields below
	members map[string]*member
	order   []string       // sorted keys of members
	load    map[string]int // live sessions per address, members or not
	changed chan struct{}  // closed and replaced when a member becomes Serving
	next    int            // round-robin start among equally loaded members
	closed  bool
}

// member is one address's health, written by its watcher.
type member struct {
	addr      string
	state     State
	err       error
	cancel    context.CancelFunc      // ends the watcher
	stopWatch context.CancelCauseFunc // ends its Watch stream, while it has one
}

// New starts a pool: a watcher per member and, for a DNS target, a
// resolver. It does not wait for any member; Pick does. A DNS name that
// does not resolve yet is not an error: it is tried again every
// Config.Resolve. Close stops the pool.
func New(ctx context.Context, cfg Config) (*Pool, error) {
	if cfg.Conn == nil {
		return nil, errors.New("execpool: Config.Conn is required")
	}
	if !cfg.Target.IsDNS() {
		if len(cfg.Target.Addrs) == 0 {
			return nil, fmt.Errorf("%w: no members", ErrBadTarget)
		}
		for _, a := range cfg.Target.Addrs {
			if err := checkAddr(a); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrBadTarget, err)
			}
		}
	} else if cfg.Target.Port == "" {
		return nil, fmt.Errorf("%w: DNS target %q has no port", ErrBadTarget, cfg.Target.Host)
	}
	if cfg.Service == "" {
		cfg.Service = DefaultService
	}
	if cfg.Resolve <= 0 {
		cfg.Resolve = DefaultResolve
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.LookupHost == nil {
		cfg.LookupHost = net.DefaultResolver.LookupHost
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Pool{
		cfg:     cfg,
		log:     cfg.Logger.With("target", cfg.Target.String()),
		members: map[string]*member{},
		load:    map[string]int{},
		changed: make(chan struct{}),
	}
	// The end of ctx stops the watchers and the resolver as Close does;
	// Close is still needed to wait for them.
	p.ctx, p.cancel = context.WithCancel(ctx)
	if cfg.Target.IsDNS() {
		p.wg.Add(1)
		go p.resolveLoop()
	} else {
		p.mu.Lock()
		p.setMembersLocked(cfg.Target.Addrs)
		p.mu.Unlock()
	}
	return p, nil
}

// Close stops every watcher and the resolver and waits for them. Pick
// fails from then on; release functions stay safe to call.
func (p *Pool) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.changed)
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}

// Pick chooses the executor for a new session: the SERVING member with the
// fewest live sessions, ties taken in turn. It waits until some member is
// SERVING, or fails with an error wrapping ErrNoExecutor that names every
// member's state when ctx ends first. The session counts against addr
// until release is called (release may be called more than once).
func (p *Pool) Pick(ctx context.Context) (addr string, release func(), err error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return "", nil, fmt.Errorf("%w: pool for %s is closed", ErrNoExecutor, p.cfg.Target)
		}
		if addr, ok := p.pickLocked(); ok {
			p.load[addr]++
			p.mu.Unlock()
			return addr, p.releaser(addr), nil
		}
		wake := p.changed
		p.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return "", nil, p.noExecutor(ctx)
		}
	}
}

// Acquire counts a session already bound to addr, e.g. one loaded from disk
// after a restart, whatever addr's state and even if it is not a member;
// release undoes it.
func (p *Pool) Acquire(addr string) (release func()) {
	p.mu.Lock()
	p.load[addr]++
	p.mu.Unlock()
	return p.releaser(addr)
}

// Draining records that the member at addr refused a session because it
// is draining, which its health may not have told the pool yet: it gets no
// new session from now on. Its health is polled from then on, so it gets
// sessions again once it says SERVING. An address that is not a member is
// ignored.
func (p *Pool) Draining(addr string) {
	p.mu.Lock()
	m := p.members[addr]
	p.mu.Unlock()
	if m == nil {
		return
	}
	p.log.Info("executor refused a session: draining", "addr", addr)
	p.setState(m, NotServing, nil)
	// A Watch stream says nothing until the health changes: ask afresh,
	// so that whatever the health says next is what the pool goes by.
	p.mu.Lock()
	if m.stopWatch != nil {
		m.stopWatch(errStopWatching)
	}
	p.mu.Unlock()
}

// Members returns a snapshot of every member, and of each former member
// that still has sessions, sorted by address.
func (p *Pool) Members() []Member {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Member, 0, len(p.order))
	for _, a := range p.order {
		m := p.members[a]
		out = append(out, Member{Addr: a, State: m.state, Err: m.err, Sessions: p.load[a]})
	}
	for a, n := range p.load {
		if p.members[a] == nil {
			out = append(out, Member{Addr: a, State: NotServing, Sessions: n, NotMember: true})
		}
	}
	slices.SortFunc(out, func(x, y Member) int { return strings.Compare(x.Addr, y.Addr) })
	return out
}

// pickLocked returns the least loaded Serving member, starting the scan
// at p.next so that equally loaded members take turns.
func (p *Pool) pickLocked() (string, bool) {
	n := len(p.order)
	best, bestLoad := "", 0
	for i := range n {
		a := p.order[(p.next+i)%n]
		if p.members[a].state != Serving {
			continue
		}
		if l := p.load[a]; best == "" || l < bestLoad {
			best, bestLoad = a, l
		}
	}
	if best == "" {
		return "", false
	}
	p.next++
	return best, true
}

// releaser returns a function that uncounts one session on addr, once.
func (p *Pool) releaser(addr string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.load[addr]--; p.load[addr] <= 0 {
				delete(p.load, addr)
			}
		})
	}
}

// noExecutor builds Pick's error when ctx ends with no member SERVING.
func (p *Pool) noExecutor(ctx context.Context) error {
	var states []string
	for _, m := range p.Members() {
		if m.NotMember {
			continue
		}
		s := m.Addr + " " + m.State.String()
		if m.Err != nil {
			s += " (" + m.Err.Error() + ")"
		}
		states = append(states, s)
	}
	if len(states) == 0 {
		states = append(states, "no members")
		if p.cfg.Target.IsDNS() {
			states[0] += ": " + p.cfg.Target.Host + " resolves to no address"
		}
	}
	return fmt.Errorf("%w: nothing in %s is serving (%v): %s", ErrNoExecutor, p.cfg.Target, context.Cause(ctx), strings.Join(states, "; "))
}

// setMembersLocked makes addrs the members: new ones get a watcher, gone
// ones have theirs stopped. Their session counts are kept.
func (p *Pool) setMembersLocked(addrs []string) {
	keep := map[string]bool{}
	for _, a := range addrs {
		keep[a] = true
		if p.members[a] != nil {
			continue
		}
		ctx, cancel := context.WithCancel(p.ctx)
		m := &member{addr: a, cancel: cancel}
		p.members[a] = m
		p.log.Info("executor added", "addr", a)
		p.wg.Add(1)
		go p.watch(ctx, m)
	}
	for a, m := range p.members {
		if !keep[a] {
			m.cancel()
			delete(p.members, a)
			p.log.Info("executor removed", "addr", a, "sessions", p.load[a])
		}
	}
	p.order = p.order[:0]
	for a := range p.members {
		p.order = append(p.order, a)
	}
	slices.Sort(p.order)
}

// setState records a member's health and wakes waiting Picks when it
// becomes Serving. A member already removed is left alone.
func (p *Pool) setState(m *member, s State, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.members[m.addr] != m {
		return
	}
	old, oldErr := m.state, m.err
	m.state, m.err = s, err
	if old == s {
		if s == Unreachable && errString(err) != errString(oldErr) {
			p.log.Debug("executor still unreachable", "addr", m.addr, "err", err)
		}
		return
	}
	level := slog.LevelWarn
	if s == Serving {
		level = slog.LevelInfo
		if !p.closed {
			close(p.changed)
			p.changed = make(chan struct{})
		}
	}
	attrs := []any{"addr", m.addr, "from", old.String(), "to", s.String(), "sessions", p.load[m.addr]}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	p.log.Log(p.ctx, level, "executor state changed", attrs...)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
