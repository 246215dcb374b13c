package egress_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/pkg/egress"
	"github.com/toolwire/toolwire/pkg/egress/egresstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// resolver answers from a table: each lookup of a name takes its next
// answer (the last one repeats), and lookups are counted.
type resolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	calls   map[string]int
}

func newResolver() *resolver {
	return &resolver{answers: make(map[string][][]netip.Addr), calls: make(map[string]int)}
}

func (r *resolver) set(host string, answers ...[]netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers[host] = answers
}

func (r *resolver) lookups(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

func (r *resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq := r.answers[host]
	r.calls[host]++
	if len(seq) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return seq[min(r.calls[host], len(seq))-1], nil
}

func addrs(a ...netip.Addr) []netip.Addr { return a }

// startProxy serves a proxy on loopback until the test ends and returns
// its address.
func startProxy(t *testing.T, cfg egress.Config) (*egress.Proxy, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := egress.New(cfg)
	done := make(chan error, 1)
	go func() { done <- p.Serve(ln) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-done; !errors.Is(err, egress.ErrClosed) {
			t.Errorf("Serve returned %v, want ErrClosed", err)
		}
	})
	return p, ln.Addr().String()
}

func policy(t *testing.T, allowed, denied, addresses []string) egress.Policy {
	t.Helper()
	p, err := egress.NewPolicy(allowed, denied, addresses)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// client returns an HTTP client that goes through the proxy at addr and
// does not follow redirects unless follow.
func client(t *testing.T, proxyAddr string, follow bool) *http.Client {
	t.Helper()
	tr := &http.Transport{
		Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: proxyAddr}),
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // the tunnel is under test, not the certificate
		DisableKeepAlives: true,
	}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	if !follow {
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return c
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", u, err)
	}
	return resp.StatusCode, string(b)
}

// raw sends text to the proxy on a connection of its own and returns the
// status line and body of the answer.
func raw(t *testing.T, proxyAddr, text string) (string, string) {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A guard, not a measure: a proxy that wrongly opens a tunnel would
	// leave the read below waiting for the tunnel's end.
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, text); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("proxy's answer to %q: %v", text, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.Status, string(b)
}

// upstream is an HTTP server on loopback that counts its requests.
func upstream(t *testing.T) (*httptest.Server, *atomic.Int32, int) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprintf(w, "hello from upstream, %s", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	port, _ := strconv.Atoi(strings.TrimPrefix(srv.URL, "http://127.0.0.1:"))
	return srv, &hits, port
}

// TestProxyLoopback: the policy against a server on loopback, which is
// a special address that only an explicit range lets through.
func TestProxyLoopback(t *testing.T) {
	_, hits, port := upstream(t)
	res := newResolver()
	res.set("local.test", addrs(netip.MustParseAddr("127.0.0.1")))
	res.set("other.test", addrs(netip.MustParseAddr("127.0.0.1")))
	target := fmt.Sprintf("http://local.test:%d/x", port)

	t.Run("loopback refused by default", func(t *testing.T) {
		_, addr := startProxy(t, egress.Config{Policy: policy(t, []string{"local.test"}, nil, nil), Resolver: res})
		code, body := get(t, client(t, addr, false), target)
		if code != http.StatusForbidden || !strings.Contains(body, "egress policy refused local.test:"+strconv.Itoa(port)+": local.test resolves to 127.0.0.1, a loopback address (127.0.0.0/8), which the policy does not allow") {
			t.Errorf("got %d %q", code, body)
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("upstream got %d requests", n)
		}
	})

	p, addr := startProxy(t, egress.Config{
		Policy:   policy(t, []string{"local.test"}, []string{"blocked.local.test"}, []string{"127.0.0.0/8"}),
		Resolver: res,
	})
	c := client(t, addr, false)
	t.Run("allowed domain reached", func(t *testing.T) {
		code, body := get(t, c, target)
		if code != http.StatusOK || body != "hello from upstream, /x" {
			t.Errorf("got %d %q", code, body)
		}
	})
	t.Run("other domain refused", func(t *testing.T) {
		before := hits.Load()
		code, body := get(t, c, fmt.Sprintf("http://other.test:%d/", port))
		want := fmt.Sprintf("toolwire egress proxy: egress policy refused other.test:%d: other.test is not an allowed domain.\n"+
			"The sandbox's network policy (allowlist) lets this session reach only: local.test (loopback, private and link-local addresses excluded unless allowed).\n", port)
		if code != http.StatusForbidden || body != want {
			t.Errorf("got %d %q\nwant 403 %q", code, body, want)
		}
		if hits.Load() != before {
			t.Error("the refused request reached the server")
		}
		if n := res.lookups("other.test"); n != 0 {
			t.Errorf("a name the policy refuses was looked up %d times", n)
		}
	})
	t.Run("IP literal refused", func(t *testing.T) {
		code, body := get(t, c, fmt.Sprintf("http://127.0.0.1:%d/", port))
		if code != http.StatusForbidden || !strings.Contains(body, "127.0.0.1 is not an allowed domain") {
			t.Errorf("got %d %q", code, body)
		}
	})
	t.Run("CONNECT tunnel", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "CONNECT local.test:%d HTTP/1.1\r\nHost: local.test:%d\r\n\r\nGET /tunnel HTTP/1.1\r\nHost: local.test\r\nConnection: close\r\n\r\n", port, port)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		resp, err = http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "hello from upstream, /tunnel" {
			t.Errorf("through the tunnel: %q", b)
		}
	})
	t.Run("denied domain", func(t *testing.T) {
		res.set("blocked.local.test", addrs(netip.MustParseAddr("127.0.0.1")))
		status, body := raw(t, addr, fmt.Sprintf("CONNECT blocked.local.test:%d HTTP/1.1\r\n\r\n", port))
		if status != "403 Forbidden" || !strings.Contains(body, "blocked.local.test is a denied domain (entry blocked.local.test)") {
			t.Errorf("got %s %q", status, body)
		}
	})
	t.Run("non-HTTP protocol refused", func(t *testing.T) {
		status, body := raw(t, addr, "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n\r\n")
		if status != "400 Bad Request" || !strings.Contains(body, "not an HTTP proxy request") {
			t.Errorf("got %s %q", status, body)
		}
		status, body = raw(t, addr, "GET / HTTP/1.1\r\nHost: local.test\r\n\r\n")
		if status != "400 Bad Request" || !strings.Contains(body, "is not a request for an absolute http:// URL") {
			t.Errorf("origin-form request: got %s %q", status, body)
		}
	})
	var reasons []string
	for _, d := range p.DeniedSince(time.Time{}) {
		reasons = append(reasons, string(d.Reason))
	}
	if want := "not_allowed not_allowed denied_domain protocol protocol"; strings.Join(reasons, " ") != want {
		t.Errorf("DeniedSince: %q, want %q", reasons, want)
	}
	if got := p.DeniedSince(time.Now().Add(time.Hour)); len(got) != 0 {
		t.Errorf("DeniedSince(later): %+v", got)
	}
}

// TestProxyPort: an entry with a port covers that port only, for CONNECT
// as for plain HTTP.
func TestProxyPort(t *testing.T) {
	_, hits, port := upstream(t)
	res := newResolver()
	res.set("local.test", addrs(netip.MustParseAddr("127.0.0.1")))
	_, addr := startProxy(t, egress.Config{
		Policy:   policy(t, []string{"local.test:443"}, nil, []string{"127.0.0.1"}),
		Resolver: res,
	})
	status, body := raw(t, addr, fmt.Sprintf("CONNECT local.test:%d HTTP/1.1\r\n\r\n", port))
	want := fmt.Sprintf("egress policy refused local.test:%d: port %d is not allowed for local.test (allowed: local.test:443)", port, port)
	if status != "403 Forbidden" || !strings.Contains(body, want) {
		t.Errorf("got %s %q, want it to say %q", status, body, want)
	}
	if code, _ := get(t, client(t, addr, false), fmt.Sprintf("http://local.test:%d/", port)); code != http.StatusForbidden {
		t.Errorf("plain HTTP to the other port: %d", code)
	}
	if hits.Load() != 0 {
		t.Error("a refused request reached the server")
	}
}

// TestProxyMetrics: every connection is counted by outcome, refusals by
// reason.
func TestProxyMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	otel.SetMeterProvider(mp)
	t.Cleanup(func() {
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
		_ = mp.Shutdown(context.Background())
	})
	_, _, port := upstream(t)
	res := newResolver()
	res.set("local.test", addrs(netip.MustParseAddr("127.0.0.1")))
	_, addr := startProxy(t, egress.Config{Policy: policy(t, []string{"local.test"}, nil, []string{"127.0.0.1"}), Resolver: res})
	c := client(t, addr, false)
	get(t, c, fmt.Sprintf("http://local.test:%d/", port))
	get(t, c, fmt.Sprintf("http://local.test:%d/", port))
	get(t, c, "http://elsewhere.test/")
	raw(t, addr, "hello\r\n\r\n")

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "toolwire.egress.connections" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				o, _ := dp.Attributes.Value(attribute.Key("toolwire.egress.outcome"))
				r, _ := dp.Attributes.Value(attribute.Key("toolwire.egress.reason"))
				got[o.AsString()+"/"+r.AsString()] += dp.Value
			}
		}
	}
	want := map[string]int64{"allowed/": 2, "denied/not_allowed": 1, "denied/protocol": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("toolwire.egress.connections = %v, want %v", got, want)
	}
}

// TestProxyNetwork: servers in a network namespace of the test's own,
// one at a public-looking address and one at a private one, as a package
// registry and an internal service would be.
func TestProxyNetwork(t *testing.T) {
	h := egresstest.NewHost(t)
	var privateHits atomic.Int32
	h.Serve(t, h.Private, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		privateHits.Add(1)
		io.WriteString(w, "SECRET")
	}))
	public := http.NewServeMux()
	public.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "public ok") })
	public.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://internal.allowed.test/secret", http.StatusFound)
	})
	public.HandleFunc("/redirect-ip", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+h.Private.String()+"/secret", http.StatusFound)
	})
	h.Serve(t, h.Public, 80, public)
	tlsLn := h.Listen(t, h.Public, 443)
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "public tls ok") }))
	tlsSrv.Listener.Close()
	tlsSrv.Listener = tlsLn
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)

	res := newResolver()
	res.set("www.allowed.test", addrs(h.Public))
	res.set("www.other.test", addrs(h.Public))
	res.set("internal.allowed.test", addrs(h.Private))
	res.set("rebind.allowed.test", addrs(h.Public), addrs(h.Private))
	res.set("mixed.allowed.test", addrs(h.Private, h.Public))
	_, addr := startProxy(t, egress.Config{Policy: policy(t, []string{"*.allowed.test"}, nil, nil), Resolver: res})
	c := client(t, addr, false)

	t.Run("allowed domain reached", func(t *testing.T) {
		if code, body := get(t, c, "http://www.allowed.test/"); code != http.StatusOK || body != "public ok" {
			t.Errorf("got %d %q", code, body)
		}
		if code, body := get(t, c, "https://www.allowed.test/"); code != http.StatusOK || body != "public tls ok" {
			t.Errorf("https through CONNECT: got %d %q", code, body)
		}
	})
	t.Run("other domain refused", func(t *testing.T) {
		code, body := get(t, c, "http://www.other.test/")
		if code != http.StatusForbidden || !strings.Contains(body, "www.other.test is not an allowed domain") {
			t.Errorf("got %d %q", code, body)
		}
		if _, err := c.Get("https://www.other.test/"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("https to another domain: %v", err)
		}
	})
	t.Run("redirect to a private address refused", func(t *testing.T) {
		// The proxy passes the redirect on as it is...
		resp, err := c.Get("http://www.allowed.test/redirect")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "http://internal.allowed.test/secret" {
			t.Errorf("redirect: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		// ...and a client that follows it makes a request the proxy checks.
		follow := client(t, addr, true)
		code, body := get(t, follow, "http://www.allowed.test/redirect")
		want := fmt.Sprintf("internal.allowed.test resolves to %s, a private address (10.0.0.0/8), which the policy does not allow", h.Private)
		if code != http.StatusForbidden || !strings.Contains(body, want) {
			t.Errorf("followed redirect: got %d %q, want it to say %q", code, body, want)
		}
		if code, body := get(t, follow, "http://www.allowed.test/redirect-ip"); code != http.StatusForbidden || !strings.Contains(body, h.Private.String()+" is not an allowed domain") {
			t.Errorf("redirect to the address itself: got %d %q", code, body)
		}
		if n := privateHits.Load(); n != 0 {
			t.Errorf("the private server got %d requests", n)
		}
	})
	t.Run("DNS rebinding refused", func(t *testing.T) {
		// The first answer is public: reached. The next is private:
		// refused, although the name is allowed.
		if code, body := get(t, c, "http://rebind.allowed.test/"); code != http.StatusOK || body != "public ok" {
			t.Errorf("first request: got %d %q", code, body)
		}
		code, body := get(t, c, "http://rebind.allowed.test/")
		if code != http.StatusForbidden || !strings.Contains(body, "rebind.allowed.test resolves to "+h.Private.String()+", a private address") {
			t.Errorf("after rebinding: got %d %q", code, body)
		}
		// One lookup per request: the proxy dials the address it checked
		// and never asks again.
		if n := res.lookups("rebind.allowed.test"); n != 2 {
			t.Errorf("%d lookups for 2 requests", n)
		}
		// An answer that mixes both: only the public address is dialled.
		if code, body := get(t, c, "http://mixed.allowed.test/"); code != http.StatusOK || body != "public ok" {
			t.Errorf("mixed answer: got %d %q", code, body)
		}
		if n := privateHits.Load(); n != 0 {
			t.Errorf("the private server got %d requests", n)
		}
	})
	t.Run("private address allowed when listed", func(t *testing.T) {
		_, addr := startProxy(t, egress.Config{
			Policy:   policy(t, []string{"internal.allowed.test"}, nil, []string{h.Private.String() + "/32"}),
			Resolver: res,
		})
		if code, body := get(t, client(t, addr, false), "http://internal.allowed.test/"); code != http.StatusOK || body != "SECRET" {
			t.Errorf("got %d %q", code, body)
		}
	})
	t.Run("CONNECT to a port not allowed", func(t *testing.T) {
		_, addr := startProxy(t, egress.Config{Policy: policy(t, []string{"www.allowed.test:443"}, nil, nil), Resolver: res})
		status, body := raw(t, addr, "CONNECT www.allowed.test:80 HTTP/1.1\r\n\r\n")
		if status != "403 Forbidden" || !strings.Contains(body, "port 80 is not allowed for www.allowed.test") {
			t.Errorf("got %s %q", status, body)
		}
		if code, _ := get(t, client(t, addr, false), "https://www.allowed.test/"); code != http.StatusOK {
			t.Errorf("the allowed port: %d", code)
		}
	})
}

// TestProxyPlainHTTPBodies: a request body (with Expect: 100-continue, as
// curl sends for large ones) reaches the upstream, and an informational
// response before the real one does not end the exchange.
func TestProxyPlainHTTPBodies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		fmt.Fprintf(w, "got %d bytes by %s", len(b), r.Method)
	}))
	t.Cleanup(srv.Close)
	port, _ := strconv.Atoi(strings.TrimPrefix(srv.URL, "http://127.0.0.1:"))
	res := newResolver()
	res.set("local.test", addrs(netip.MustParseAddr("127.0.0.1")))
	_, addr := startProxy(t, egress.Config{Policy: policy(t, []string{"local.test"}, nil, []string{"127.0.0.1"}), Resolver: res})
	body := strings.Repeat("b", 1<<20)
	status, got := raw(t, addr, fmt.Sprintf("POST http://local.test:%d/up HTTP/1.1\r\nHost: local.test:%d\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n%s", port, port, len(body), body))
	// raw reads the first response: the proxy's own 100 Continue.
	if status != "100 Continue" {
		t.Errorf("first answer %s %q", status, got)
	}
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://local.test:%d/up", port), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Expect", "100-continue")
	resp, err := client(t, addr, false).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != fmt.Sprintf("got %d bytes by POST", len(body)) {
		t.Errorf("got %d %q", resp.StatusCode, b)
	}
}
