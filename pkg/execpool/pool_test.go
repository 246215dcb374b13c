package execpool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolwire/toolwire/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor bounds every wait for the pool to see a change; it is a hang
// guard, not a timing assertion.
const waitFor = 20 * time.Second

// executor is a real gRPC server on loopback TCP with the standard health
// service, standing in for toolsvc.
type executor struct {
	addr   string
	srv    *grpc.Server
	health *health.Server
}

// startExecutor serves health on listen ("127.0.0.1:0" or a fixed
// address), SERVING for DefaultService.
func startExecutor(t testing.TB, listen string) *executor {
	t.Helper()
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatalf("listen %s: %v", listen, err)
	}
	return serveOn(t, lis, true)
}

func serveOn(t testing.TB, lis net.Listener, watch bool) *executor {
	e := &executor{addr: lis.Addr().String(), srv: grpc.NewServer(), health: health.NewServer()}
	if watch {
		healthpb.RegisterHealthServer(e.srv, e.health)
	} else {
		healthpb.RegisterHealthServer(e.srv, checkOnly{h: e.health})
	}
	e.health.SetServingStatus(DefaultService, healthpb.HealthCheckResponse_SERVING)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.srv.Serve(lis)
	}()
	t.Cleanup(func() {
		e.srv.Stop()
		<-done
	})
	return e
}

// checkOnly is a health service without Watch, like an older executor.
type checkOnly struct {
	healthpb.UnimplementedHealthServer
	h *health.Server
}

func (c checkOnly) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return c.h.Check(ctx, req)
}

// drain does what toolsvc does on SIGTERM.
func (e *executor) drain() {
	e.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	e.health.SetServingStatus(DefaultService, healthpb.HealthCheckResponse_NOT_SERVING)
}

func (e *executor) serve() {
	e.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	e.health.SetServingStatus(DefaultService, healthpb.HealthCheckResponse_SERVING)
}

// connCache is the caller's side: one client connection per address,
// closed when the test ends (after the pool, which is closed first).
func connCache(t testing.TB) func(string) (grpc.ClientConnInterface, error) {
	var mu sync.Mutex
	conns := map[string]*grpc.ClientConn{}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return func(addr string) (grpc.ClientConnInterface, error) {
		mu.Lock()
		defer mu.Unlock()
		if c := conns[addr]; c != nil {
			return c, nil
		}
		c, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		conns[addr] = c
		return c, nil
	}
}

// newPool starts a pool over target, closed when the test ends.
func newPool(t testing.TB, cfg Config) *Pool {
	t.Helper()
	if cfg.Conn == nil {
		cfg.Conn = connCache(t)
	}
	if cfg.Poll == 0 {
		cfg.Poll = 20 * time.Millisecond
	}
	p, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func staticTarget(es ...*executor) Target {
	var t Target
	for _, e := range es {
		t.Addrs = append(t.Addrs, e.addr)
	}
	return t
}

// waitMembers waits until cond holds for the pool's members.
func waitMembers(t testing.TB, p *Pool, what string, cond func(map[string]Member) bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		ms := map[string]Member{}
		for _, m := range p.Members() {
			ms[m.Addr] = m
		}
		if cond(ms) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: members are %+v", what, p.Members())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitState(t testing.TB, p *Pool, addr string, want State) {
	t.Helper()
	waitMembers(t, p, addr+" "+want.String(), func(ms map[string]Member) bool {
		m, ok := ms[addr]
		return ok && !m.NotMember && m.State == want
	})
}

// waitServing waits until every executor is a Serving member. Until then
// sessions go to those that are, so tests of the spread wait first.
func waitServing(t testing.TB, p *Pool, es ...*executor) {
	t.Helper()
	for _, e := range es {
		waitState(t, p, e.addr, Serving)
	}
}

// sessions returns the live session count per member address.
func sessions(p *Pool) map[string]int {
	out := map[string]int{}
	for _, m := range p.Members() {
		out[m.Addr] = m.Sessions
	}
	return out
}

// pickN picks n sessions and returns how many went to each address and
// their release functions.
func pickN(t testing.TB, p *Pool, n int) (map[string]int, map[string][]func()) {
	t.Helper()
	got := map[string]int{}
	rel := map[string][]func(){}
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		addr, release, err := p.Pick(ctx)
		cancel()
		if err != nil {
			t.Fatalf("Pick: %v", err)
		}
		got[addr]++
		rel[addr] = append(rel[addr], release)
	}
	return got, rel
}

func TestSpreadsEvenlyOverStaticList(t *testing.T) {
	es := []*executor{startExecutor(t, "127.0.0.1:0"), startExecutor(t, "127.0.0.1:0"), startExecutor(t, "127.0.0.1:0")}
	p := newPool(t, Config{Target: staticTarget(es...)})
	waitServing(t, p, es...)

	got, rel := pickN(t, p, 30)
	for _, e := range es {
		if got[e.addr] != 10 {
			t.Fatalf("30 sessions over 3 members: got %v, want 10 each", got)
		}
	}
	if s := sessions(p); s[es[1].addr] != 10 {
		t.Fatalf("Members: %v", s)
	}

	// The member with the fewest sessions is picked next.
	for _, r := range rel[es[1].addr][:3] {
		r()
		r() // a second call is a no-op
	}
	again, rel2 := pickN(t, p, 3)
	if again[es[1].addr] != 3 {
		t.Fatalf("after 3 sessions on %s ended, the next 3 went to %v", es[1].addr, again)
	}
	for _, rs := range []map[string][]func(){rel, rel2} {
		for _, r := range slices.Concat(slices.Collect(maps.Values(rs))...) {
			r()
		}
	}
	for addr, n := range sessions(p) {
		if n != 0 {
			t.Fatalf("after every release, %s still counts %d sessions", addr, n)
		}
	}
}

func TestDrainingMemberGetsNoNewSessions(t *testing.T) {
	es := []*executor{startExecutor(t, "127.0.0.1:0"), startExecutor(t, "127.0.0.1:0"), startExecutor(t, "127.0.0.1:0")}
	p := newPool(t, Config{Target: staticTarget(es...)})
	waitServing(t, p, es...)
	_, old := pickN(t, p, 6)
	drained := es[0].addr
	if len(old[drained]) != 2 {
		t.Fatalf("6 sessions over 3 members: got %v", sessions(p))
	}

	es[0].drain()
	waitState(t, p, drained, NotServing)
	got, _ := pickN(t, p, 6)
	if got[drained] != 0 || got[es[1].addr] != 3 || got[es[2].addr] != 3 {
		t.Fatalf("while %s drains, 6 new sessions went to %v", drained, got)
	}

	// Its sessions stay counted, and end normally.
	if n := sessions(p)[drained]; n != 2 {
		t.Fatalf("draining member counts %d sessions, want 2", n)
	}
	old[drained][0]()
	// A session loaded from disk is counted wherever it is bound.
	release := p.Acquire(drained)
	release2 := p.Acquire(drained)
	release2()
	if n := sessions(p)[drained]; n != 2 {
		t.Fatalf("after one release and one Acquire, draining member counts %d, want 2", n)
	}

	// Back to SERVING: it is the least loaded, so it gets the next ones.
	es[0].serve()
	waitState(t, p, drained, Serving)
	got, _ = pickN(t, p, 3)
	if got[drained] != 3 {
		t.Fatalf("member back to SERVING with 2 sessions (others 5): next 3 went to %v", got)
	}
	release()
	old[drained][1]()
	if n := sessions(p)[drained]; n != 3 {
		t.Fatalf("member counts %d sessions, want 3", n)
	}
}

func TestStoppedExecutorIsNotPicked(t *testing.T) {
	a, b := startExecutor(t, "127.0.0.1:0"), startExecutor(t, "127.0.0.1:0")
	var logs testkit.Buffer
	p := newPool(t, Config{Target: staticTarget(a, b), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	waitServing(t, p, a, b)

	a.srv.Stop() // closes the listener and every connection
	waitState(t, p, a.addr, Unreachable)
	for _, m := range p.Members() {
		if m.Addr == a.addr && m.Err == nil {
			t.Fatalf("unreachable member has no error: %+v", m)
		}
	}
	got, _ := pickN(t, p, 10)
	if got[b.addr] != 10 {
		t.Fatalf("with %s stopped, 10 sessions went to %v", a.addr, got)
	}
	if want := "addr=" + a.addr + " from=serving to=unreachable"; !strings.Contains(logs.String(), want) {
		t.Fatalf("logs do not say %q:\n%s", want, logs.String())
	}
}

func TestPickWaitsForServing(t *testing.T) {
	a, b := startExecutor(t, "127.0.0.1:0"), startExecutor(t, "127.0.0.1:0")
	a.drain()
	b.drain()
	p := newPool(t, Config{Target: staticTarget(a, b)})
	waitState(t, p, a.addr, NotServing)
	waitState(t, p, b.addr, NotServing)

	type result struct {
		addr    string
		release func()
		err     error
	}
	done := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	go func() {
		addr, release, err := p.Pick(ctx)
		done <- result{addr, release, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("Pick returned %+v while no member is serving", r)
	default:
	}
	b.serve()
	r := <-done
	if r.err != nil || r.addr != b.addr {
		t.Fatalf("Pick = %q, %v; want %s", r.addr, r.err, b.addr)
	}
	r.release()
}

func TestPickFailsWhenNothingServes(t *testing.T) {
	a := startExecutor(t, "127.0.0.1:0")
	a.drain()
	// A port nobody listens on.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	_ = lis.Close()

	p := newPool(t, Config{Target: Target{Addrs: []string{a.addr, dead}}})
	waitState(t, p, a.addr, NotServing)
	waitState(t, p, dead, Unreachable)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	addr, release, err := p.Pick(ctx)
	if !errors.Is(err, ErrNoExecutor) || release != nil || addr != "" {
		t.Fatalf("Pick = %q, %v; want ErrNoExecutor", addr, err)
	}
	for _, want := range []string{a.addr + " not serving", dead + " unreachable", "deadline exceeded"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	t.Log(err)
}

func TestCloseEndsWaitingPick(t *testing.T) {
	a := startExecutor(t, "127.0.0.1:0")
	a.drain()
	p := newPool(t, Config{Target: staticTarget(a)})
	waitState(t, p, a.addr, NotServing)
	done := make(chan error, 1)
	go func() {
		_, _, err := p.Pick(context.Background())
		done <- err
	}()
	p.Close()
	if err := <-done; !errors.Is(err, ErrNoExecutor) {
		t.Fatalf("Pick after Close: %v", err)
	}
	p.Close() // idempotent
}

// A draining executor must be able to stop gracefully: the pool must not
// hold a health stream open on it.
func TestDrainingExecutorCanStopGracefully(t *testing.T) {
	a := startExecutor(t, "127.0.0.1:0")
	p := newPool(t, Config{Target: staticTarget(a), Poll: time.Hour})
	waitState(t, p, a.addr, Serving)
	a.drain()
	waitState(t, p, a.addr, NotServing)
	stopped := make(chan struct{})
	go func() {
		a.srv.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(waitFor):
		a.srv.Stop()
		<-stopped
		t.Fatal("GracefulStop of a draining executor waited on the pool's health stream")
	}
}

func TestPollsExecutorWithoutWatch(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := serveOn(t, lis, false)
	p := newPool(t, Config{Target: staticTarget(a)})
	waitState(t, p, a.addr, Serving)
	a.drain()
	waitState(t, p, a.addr, NotServing)
	a.serve()
	waitState(t, p, a.addr, Serving)
	got, _ := pickN(t, p, 2)
	if got[a.addr] != 2 {
		t.Fatalf("picks: %v", got)
	}
}

func TestUnknownServiceIsNotServing(t *testing.T) {
	a := startExecutor(t, "127.0.0.1:0")
	p := newPool(t, Config{Target: staticTarget(a), Service: "some.other.Service"})
	waitState(t, p, a.addr, NotServing)
	a.health.SetServingStatus("some.other.Service", healthpb.HealthCheckResponse_SERVING)
	waitState(t, p, a.addr, Serving)
}

// hasIPv6Loopback reports whether [::1] can be listened on.
func hasIPv6Loopback() bool {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// startOnPort starts executors on every host, all on one port (DNS members
// share the target's port). It retries with a new port when one is taken.
func startOnPort(t *testing.T, hosts ...string) (string, []*executor) {
	t.Helper()
	for range 20 {
		first, err := net.Listen("tcp", net.JoinHostPort(hosts[0], "0"))
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(first.Addr().String())
		lis := []net.Listener{first}
		for _, h := range hosts[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(h, port))
			if err != nil {
				break
			}
			lis = append(lis, l)
		}
		if len(lis) < len(hosts) {
			for _, l := range lis {
				_ = l.Close()
			}
			continue
		}
		var es []*executor
		for _, l := range lis {
			es = append(es, serveOn(t, l, true))
		}
		return port, es
	}
	t.Fatalf("no free port shared by %v", hosts)
	return "", nil
}

func TestDNSTargetWithSystemResolver(t *testing.T) {
	hosts := []string{"127.0.0.1"}
	if hasIPv6Loopback() {
		hosts = append(hosts, "::1")
	} else {
		t.Log("no IPv6 loopback: serving on 127.0.0.1 only")
	}
	port, _ := startOnPort(t, hosts...)
	target, err := ParseTarget("dns:///localhost:" + port)
	if err != nil {
		t.Fatal(err)
	}
	ips, err := net.DefaultResolver.LookupHost(context.Background(), "localhost")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, ip := range ips {
		if !slices.Contains(hosts, ip) {
			t.Skipf("localhost resolves to %v here; no loopback server on %s", ips, ip)
		}
		want = append(want, net.JoinHostPort(ip, port))
	}
	if !slices.Contains(ips, "::1") {
		t.Logf("localhost resolves to %v here (not to ::1); the IPv6 member is covered by TestDNSMembersFollowResolution", ips)
	}
	p := newPool(t, Config{Target: target, Resolve: 50 * time.Millisecond})
	for _, addr := range want {
		waitState(t, p, addr, Serving)
	}
	got, _ := pickN(t, p, 4*len(want))
	for _, addr := range want {
		if got[addr] != 4 {
			t.Fatalf("%d sessions over %v went to %v", 4*len(want), want, got)
		}
	}
	if len(p.Members()) != len(want) {
		t.Fatalf("members %+v, want %v", p.Members(), want)
	}
}

// resolver is a LookupHost whose answer the test changes.
type resolver struct {
	mu     sync.Mutex // guards the fields below
	answer []string
	err    error
	calls  int
}

func (r *resolver) set(err error, ips ...string) {
	r.mu.Lock()
	r.answer, r.err = ips, err
	r.mu.Unlock()
}

func (r *resolver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

func (r *resolver) LookupHost(_ context.Context, host string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if host != "toolsvc.test" {
		return nil, fmt.Errorf("unexpected host %q", host)
	}
	return slices.Clone(r.answer), r.err
}

func TestDNSMembersFollowResolution(t *testing.T) {
	hosts := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	if hasIPv6Loopback() {
		hosts = append(hosts, "::1")
	}
	port, _ := startOnPort(t, hosts...)
	addr := func(h string) string { return net.JoinHostPort(h, port) }
	r := &resolver{}
	r.set(nil, "127.0.0.1", "127.0.0.2")
	target, err := ParseTarget("dns:///toolsvc.test:" + port)
	if err != nil {
		t.Fatal(err)
	}
	p := newPool(t, Config{Target: target, Resolve: 10 * time.Millisecond, LookupHost: r.LookupHost})
	sameMembers := func(want ...string) func(map[string]Member) bool {
		return func(ms map[string]Member) bool {
			var got []string
			for a, m := range ms {
				if !m.NotMember {
					if m.State != Serving {
						return false
					}
					got = append(got, a)
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			return slices.Equal(got, want)
		}
	}
	waitMembers(t, p, "first answer", sameMembers(addr("127.0.0.1"), addr("127.0.0.2")))
	_, rel := pickN(t, p, 4)

	// The answer changes: one member leaves, others (IPv6 too) join.
	next := append([]string{}, hosts[1:]...)
	r.set(nil, next...)
	var nextAddrs []string
	for _, h := range next {
		nextAddrs = append(nextAddrs, addr(h))
	}
	waitMembers(t, p, "second answer", sameMembers(nextAddrs...))
	gone := addr("127.0.0.1")
	if m := sessions(p)[gone]; m != 2 {
		t.Fatalf("removed member's sessions: %d, want 2 (%+v)", m, p.Members())
	}
	got, _ := pickN(t, p, 12)
	if got[gone] != 0 {
		t.Fatalf("removed member got new sessions: %v", got)
	}
	for _, a := range nextAddrs {
		if got[a] == 0 {
			t.Fatalf("new member %s got no session: %v", a, got)
		}
	}
	for _, f := range rel[gone] {
		f()
	}
	waitMembers(t, p, "removed member forgotten once its sessions end", func(ms map[string]Member) bool {
		_, ok := ms[gone]
		return !ok
	})

	// A failed look-up keeps the members.
	r.set(errors.New("server misbehaving"))
	calls := r.count()
	waitMembers(t, p, "three failed look-ups", func(map[string]Member) bool { return r.count() >= calls+3 })
	waitMembers(t, p, "members kept", sameMembers(nextAddrs...))

	// A name that does not exist means no members.
	r.set(&net.DNSError{Err: "no such host", Name: "toolsvc.test", IsNotFound: true})
	waitMembers(t, p, "no members", func(ms map[string]Member) bool {
		for _, m := range ms {
			if !m.NotMember {
				return false
			}
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := p.Pick(ctx); !errors.Is(err, ErrNoExecutor) || !strings.Contains(err.Error(), "no members") {
		t.Fatalf("Pick with no members: %v", err)
	}

	// And back: a waiting Pick gets the new member.
	done := make(chan string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		a, release, err := p.Pick(ctx)
		if err == nil {
			release()
		}
		done <- a + " " + fmt.Sprint(err)
	}()
	r.set(nil, "127.0.0.3")
	if got, want := <-done, addr("127.0.0.3")+" <nil>"; got != want {
		t.Fatalf("Pick = %s, want %s", got, want)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	conn := func(string) (grpc.ClientConnInterface, error) { return nil, errors.New("unused") }
	for name, cfg := range map[string]Config{
		"no conn":     {Target: Target{Addrs: []string{"a:1"}}},
		"no members":  {Conn: conn},
		"bad member":  {Conn: conn, Target: Target{Addrs: []string{"a"}}},
		"no DNS port": {Conn: conn, Target: Target{Host: "x"}},
	} {
		if p, err := New(context.Background(), cfg); err == nil {
			p.Close()
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}

func TestConnErrorMakesMemberUnreachable(t *testing.T) {
	a := startExecutor(t, "127.0.0.1:0")
	cache := connCache(t)
	var mu sync.Mutex
	fail := true
	p := newPool(t, Config{Target: staticTarget(a), Conn: func(addr string) (grpc.ClientConnInterface, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return nil, errors.New("no credentials for " + addr)
		}
		return cache(addr)
	}})
	waitMembers(t, p, "connection error reported", func(ms map[string]Member) bool {
		m := ms[a.addr]
		return m.State == Unreachable && m.Err != nil && strings.Contains(m.Err.Error(), "no credentials")
	})
	mu.Lock()
	fail = false
	mu.Unlock()
	waitState(t, p, a.addr, Serving)
}

func BenchmarkPick(b *testing.B) {
	for _, n := range []int{3, 30} {
		b.Run("members="+strconv.Itoa(n), func(b *testing.B) {
			var es []*executor
			for range n {
				es = append(es, startExecutor(b, "127.0.0.1:0"))
			}
			p := newPool(b, Config{Target: staticTarget(es...)})
			waitServing(b, p, es...)
			ctx := context.Background()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, release, err := p.Pick(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					release()
				}
			})
		})
	}
}

// A member that refused a session because it drains gets no new sessions
// at once, before its health says so.
func TestRefusedMemberGetsNoNewSessions(t *testing.T) {
	a, b := startExecutor(t, "127.0.0.1:0"), startExecutor(t, "127.0.0.1:0")
	p := newPool(t, Config{Target: staticTarget(a, b), Poll: time.Hour})
	waitServing(t, p, a, b)
	p.Draining(a.addr)
	for _, m := range p.Members() {
		if m.Addr == a.addr && m.State != NotServing {
			t.Fatalf("refused member is %s, want not serving", m.State)
		}
	}
	if got, _ := pickN(t, p, 4); got[b.addr] != 4 {
		t.Fatalf("4 sessions after %s refused one went to %v", a.addr, got)
	}
	p.Draining("127.0.0.1:1") // not a member: nothing happens
}

// The health of a member that refused a session is asked again: one that
// says SERVING (it came back, or the refusal came from an old process)
// gets sessions again.
func TestRefusedMemberComesBackByItsHealth(t *testing.T) {
	a, b := startExecutor(t, "127.0.0.1:0"), startExecutor(t, "127.0.0.1:0")
	p := newPool(t, Config{Target: staticTarget(a, b)})
	waitServing(t, p, a, b)
	p.Draining(a.addr)
	waitState(t, p, a.addr, Serving)
}
