package web_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/pkg/egress"
	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/tool/tooltest"
	"github.com/toolwire/toolwire/pkg/tools/web"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const page = `<!doctype html><html><head><title>T</title><style>body{color:red}</style>
<script>var secret = "script text";</script></head>
<body><h1>Release notes</h1><p>Version <b>2.0</b> adds <a href="/docs/fetch">fetching</a>.</p>
<ul><li>one</li><li>two</li></ul></body></html>`

// site is an HTTPS server on loopback with the pages a test needs.
type site struct {
	srv   *httptest.Server
	hits  atomic.Int64
	roots *x509.CertPool
	port  string
}

func newSite(t *testing.T, mux *http.ServeMux) *site {
	t.Helper()
	s := &site{}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	s.roots = s.srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	_, s.port, _ = net.SplitHostPort(s.srv.Listener.Addr().String())
	return s
}

// url returns an http:// URL of the site, which WebFetch upgrades.
func (s *site) url(host, path string) string {
	return "http://" + net.JoinHostPort(host, s.port) + path
}

// env returns a session environment whose web policy is pol.
func env(t *testing.T, pol *egress.Policy) *tool.Env {
	t.Helper()
	e, _ := tooltest.NewEnv(t)
	e.Web = pol
	return e
}

// loopbackAllowed is the policy of network host with the operator's
// --allowed-addresses 127.0.0.1: what the tests' servers need.
func loopbackAllowed(t *testing.T) *egress.Policy {
	t.Helper()
	p, err := egress.NewPolicy([]string{"*"}, nil, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

func fetch(t *testing.T, f *web.WebFetch, e *tool.Env, url string) (*tool.Result, web.Structured) {
	t.Helper()
	r := tooltest.Call(t, f, e, tooltest.JSONInput(t, map[string]any{"url": url, "prompt": "What is new?"}))
	var s web.Structured
	if len(r.Structured) > 0 {
		if err := json.Unmarshal(r.Structured, &s); err != nil {
			t.Fatalf("structured data %s: %v", r.Structured, err)
		}
	}
	return r, s
}

func TestFetchConvertsAndCaches(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/notes", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	})
	mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/notes", http.StatusMovedPermanently)
	})
	s := newSite(t, mux)
	f := &web.WebFetch{RootCAs: s.roots}
	e := env(t, loopbackAllowed(t))

	r, st := fetch(t, f, e, s.url("127.0.0.1", "/old"))
	if r.IsError {
		t.Fatalf("fetch failed: %s", r.TextContent())
	}
	md := r.TextContent()
	for _, want := range []string{"# Release notes", "Version **2.0** adds [fetching](https://127.0.0.1:" + s.port + "/docs/fetch).", "- one\n- two"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "script text") || strings.Contains(md, "color:red") {
		t.Errorf("Markdown keeps the script or style:\n%s", md)
	}
	wantURL := "https://127.0.0.1:" + s.port + "/notes"
	if st.URL != wantURL || st.Code != 200 || st.Cached || st.Redirect != "" || st.Bytes != len(page) {
		t.Errorf("structured %+v, want url %s (the same-host redirect followed), code 200, %d bytes, not cached", st, wantURL, len(page))
	}
	hits := s.hits.Load()
	if hits != 2 {
		t.Fatalf("%d requests, want 2 (the redirect and the page)", hits)
	}

	r2, st2 := fetch(t, f, e, s.url("127.0.0.1", "/old"))
	if r2.TextContent() != md || !st2.Cached {
		t.Errorf("second fetch: cached %v, same text %v; want the cached page", st2.Cached, r2.TextContent() == md)
	}
	if s.hits.Load() != hits {
		t.Errorf("the second fetch reached the server")
	}
}

func TestFetchRedirects(t *testing.T) {
	mux := http.NewServeMux()
	s := newSite(t, mux)
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://localhost:"+s.port+"/page", http.StatusFound)
	})
	mux.HandleFunc("/metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	mux.HandleFunc("/private", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://10.0.0.7:"+s.port+"/", http.StatusTemporaryRedirect)
	})
	f := &web.WebFetch{RootCAs: s.roots}
	e := env(t, loopbackAllowed(t))

	r, st := fetch(t, f, e, s.url("127.0.0.1", "/elsewhere"))
	want := fmt.Sprintf("REDIRECT DETECTED: The URL redirects to a different host.\n\n"+
		"Original URL: https://127.0.0.1:%[1]s/elsewhere\nRedirect URL: https://localhost:%[1]s/page\nStatus: 302 Found\n\n"+
		"The page was not fetched from the new host. To get it, call WebFetch again with:\n"+
		"- url: \"https://localhost:%[1]s/page\"\n- prompt: \"What is new?\"", s.port)
	if r.IsError || r.TextContent() != want {
		t.Errorf("cross-host redirect:\n got %q\nwant %q", r.TextContent(), want)
	}
	if st.Redirect != "https://localhost:"+s.port+"/page" || st.Code != 302 {
		t.Errorf("structured %+v, want the redirect and code 302", st)
	}

	for path, what := range map[string]string{"/metadata": "169.254.169.254:80", "/private": "10.0.0.7:" + s.port} {
		r, _ := fetch(t, f, e, s.url("127.0.0.1", path))
		if !r.IsError || r.FinalOutcome() != tool.OutcomeSandboxDenied || !strings.Contains(r.TextContent(), "egress policy refused "+what) {
			t.Errorf("redirect %s to an internal address: %v %s %q; want a sandbox_denied refusal of %s", path, r.IsError, r.FinalOutcome(), r.TextContent(), what)
		}
	}
}

func TestFetchCutsLargePages(t *testing.T) {
	body := strings.Repeat("<p>"+strings.Repeat("x", 95)+"</p>\n", 2000) // about 200 KB
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, body)
	})
	s := newSite(t, mux)
	e := env(t, loopbackAllowed(t))

	// The default limits: the Markdown is cut at 100,000 characters.
	r, st := fetch(t, &web.WebFetch{RootCAs: s.roots}, e, s.url("127.0.0.1", "/big"))
	md := r.TextContent()
	if r.IsError || !st.Truncated || !strings.HasSuffix(md, "only its first 100000 are shown.]") || strings.Count(md, "x") != 100_000-strings.Count(md[:100_000], "\n") {
		t.Errorf("default limits: error %v, truncated %v, %d characters ending %q", r.IsError, st.Truncated, len(md), md[max(0, len(md)-120):])
	}

	// A smaller body limit: only that much is read.
	r, st = fetch(t, &web.WebFetch{RootCAs: s.roots, MaxBytes: 1000}, e, s.url("127.0.0.1", "/big?small"))
	md = r.TextContent()
	if r.IsError || !st.Truncated || st.Bytes != 1000 || !strings.Contains(md, "[The page is larger than 1000 bytes; only its first 1000 bytes were read.]") {
		t.Errorf("body limit: error %v, structured %+v, text %q", r.IsError, st, md)
	}
}

func TestFetchTimesOut(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, "<p>the start")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	s := newSite(t, mux)
	defer close(release)
	e := env(t, loopbackAllowed(t))
	e.Limits.WebFetchTimeout = 300 * time.Millisecond
	r, _ := fetch(t, &web.WebFetch{RootCAs: s.roots}, e, s.url("127.0.0.1", "/slow"))
	want := "WebFetch of https://127.0.0.1:" + s.port + "/slow timed out after 300ms."
	if !r.IsError || r.FinalOutcome() != tool.OutcomeTimeout || r.TextContent() != want {
		t.Errorf("slow page: %v %s %q; want a timeout %q", r.IsError, r.FinalOutcome(), r.TextContent(), want)
	}
}

// resolver answers from a table: each lookup of a name takes the next
// answer, the last repeating.
type resolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	calls   map[string]int
}

func (r *resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq := r.answers[host]
	if len(seq) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	r.calls[host]++
	return []netip.Addr{seq[min(r.calls[host], len(seq))-1]}, nil
}

// TestFetchRefusesRebinding: a name that resolved to an allowed address
// for the first request and to a private one for the redirect's is
// refused at the second connection.
func TestFetchRefusesRebinding(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/start", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/next", http.StatusFound) })
	mux.HandleFunc("/next", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<p>inside</p>") })
	s := newSite(t, mux)
	// The test certificate names example.com; the resolver sends it to
	// the test server first, then to a private address.
	res := &resolver{calls: map[string]int{}, answers: map[string][]netip.Addr{
		"example.com": {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.9.8.7")},
	}}
	pol, err := egress.NewPolicy([]string{"example.com"}, nil, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	var dialled []string
	var mu sync.Mutex
	f := &web.WebFetch{RootCAs: s.roots, Resolver: res, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		mu.Lock()
		dialled = append(dialled, address)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, address)
	}}
	r, _ := fetch(t, f, env(t, &pol), s.url("example.com", "/start"))
	if !r.IsError || r.FinalOutcome() != tool.OutcomeSandboxDenied || !strings.Contains(r.TextContent(), "example.com resolves to 10.9.8.7, a private address") {
		t.Errorf("rebound name: %v %s %q; want a refusal of 10.9.8.7", r.IsError, r.FinalOutcome(), r.TextContent())
	}
	if len(dialled) != 1 || dialled[0] != "127.0.0.1:"+s.port {
		t.Errorf("dialled %v, want only the first, checked address", dialled)
	}
	if s.hits.Load() != 1 {
		t.Errorf("%d requests reached the server, want 1", s.hits.Load())
	}
}

func TestFetchRefusals(t *testing.T) {
	allowlist, err := egress.NewPolicy([]string{"docs.example.com"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &web.WebFetch{}
	for _, c := range []struct {
		name    string
		pol     *egress.Policy
		url     string
		outcome tool.Outcome
		text    string
	}{
		{"network none", nil, "https://docs.example.com/", tool.OutcomeSandboxDenied,
			`<tool_use_error>WebFetch cannot fetch anything in this session: its sandbox network policy is "none" (loopback only), which WebFetch follows too. The user can allow network access with --network host, or --network allowlist with --allowed-domains.</tool_use_error>`},
		{"not allowed", &allowlist, "http://example.org/x", tool.OutcomeSandboxDenied,
			"<tool_use_error>WebFetch refused https://example.org/x: egress policy refused example.org:443: example.org is not an allowed domain. This session's network policy allows only docs.example.com; loopback, private and link-local addresses are refused unless the operator allows them (--allowed-addresses).</tool_use_error>"},
		{"loopback without the operator", loopbackAllowed(t), "https://127.0.0.2:8443/", tool.OutcomeSandboxDenied,
			"<tool_use_error>WebFetch refused https://127.0.0.2:8443/: egress policy refused 127.0.0.2:8443: 127.0.0.2 is a loopback address (127.0.0.0/8), which the policy does not allow. This session may fetch from public addresses; loopback, private and link-local addresses are refused unless the operator allows them (--allowed-addresses).</tool_use_error>"},
		{"not a URL", loopbackAllowed(t), "file:///etc/passwd", tool.OutcomeInvalidInput,
			`<tool_use_error>Invalid URL "file:///etc/passwd": give a complete http:// or https:// URL.</tool_use_error>`},
		{"credentials", loopbackAllowed(t), "https://u:p@example.com/", tool.OutcomeInvalidInput,
			"<tool_use_error>The URL holds a user name or password; WebFetch does not send credentials.</tool_use_error>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := fetch(t, f, env(t, c.pol), c.url)
			if !r.IsError || r.FinalOutcome() != c.outcome || r.TextContent() != c.text {
				t.Errorf("got %v %s\n%q\nwant %s\n%q", r.IsError, r.FinalOutcome(), r.TextContent(), c.outcome, c.text)
			}
		})
	}
}
