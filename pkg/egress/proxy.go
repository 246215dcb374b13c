package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of Config.
const (
	// DefaultMaxConns is how many connections a proxy holds open at once.
	DefaultMaxConns = 256
	// DefaultDialTimeout bounds each connection attempt upstream.
	DefaultDialTimeout = 10 * time.Second
)

// headerTimeout bounds how long a client may take to send its request
// head.
const headerTimeout = 30 * time.Second

// maxDenials is how many recent refusals a proxy remembers for
// DeniedSince.
const maxDenials = 64

// Resolver looks up the addresses of a host name; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Proxy.
type Config struct {
	// Policy decides what may be reached.
	Policy Policy
	// Resolver resolves host names; nil means net.DefaultResolver (the
	// host's /etc/hosts and DNS).
	Resolver Resolver
	// Dial opens a TCP connection to an "ip:port" address; nil means a
	// net.Dialer with DefaultDialTimeout. Tests point it elsewhere.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// MaxConns caps the connections open at once (client and upstream
	// side count as one); zero means DefaultMaxConns.
	MaxConns int
	// Logger receives a line for every refusal (warn) and every allowed
	// connection (debug); nil discards. Give it the session's attributes.
	Logger *slog.Logger
}

// Proxy is an HTTP proxy that enforces a Policy. It is safe for
// concurrent use.
type Proxy struct {
	cfg    Config
	log    *slog.Logger
	tel    *telemetry
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex // guards the fields below
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	active    int
	closed    bool
	denials   []Denial // the latest, oldest first
	wg        sync.WaitGroup
}

// New returns a proxy; Serve puts it to work.
func New(cfg Config) *Proxy {
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: DefaultDialTimeout}
		cfg.Dial = d.DialContext
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Proxy{
		cfg: cfg, log: cfg.Logger, tel: newTelemetry(), ctx: ctx, cancel: cancel,
		listeners: make(map[net.Listener]struct{}), conns: make(map[net.Conn]struct{}),
	}
}

// Policy returns the policy the proxy enforces.
func (p *Proxy) Policy() Policy { return p.cfg.Policy }

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("egress: proxy closed")

// Serve accepts connections on l and serves each until l fails or Close
// is called; it closes l. After Close it returns ErrClosed.
func (p *Proxy) Serve(l net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return ErrClosed
	}
	p.listeners[l] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.listeners, l)
		p.mu.Unlock()
		l.Close()
		p.wg.Done()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return ErrClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("egress: accept: %w", err)
			}
			// Out of file descriptors and the like: the session's
			// proxy must outlive a moment of scarcity.
			p.log.Warn("egress accept failed; retrying", "err", err)
			select {
			case <-p.ctx.Done():
				return ErrClosed
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		busy, ok := p.track(c)
		if !ok {
			c.Close()
			continue
		}
		go func() {
			defer p.untrack(c, true)
			if busy {
				p.refuse(c, &Denial{Reason: ReasonBusy})
				return
			}
			p.handle(c)
		}()
	}
}

// track registers a client connection; busy when the proxy is full (it is
// then answered and closed), !ok when the proxy is closed.
func (p *Proxy) track(c net.Conn) (busy, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false, false
	}
	p.conns[c] = struct{}{}
	p.wg.Add(1)
	if p.active >= p.cfg.MaxConns {
		return true, true
	}
	p.active++
	return false, true
}

// untrack forgets c; client is true for the connection track counted.
func (p *Proxy) untrack(c net.Conn, client bool) {
	c.Close()
	p.mu.Lock()
	_, had := p.conns[c]
	delete(p.conns, c)
	if client && had {
		p.wg.Done()
	}
	p.mu.Unlock()
}

// addUpstream registers an upstream connection so that Close ends it.
func (p *Proxy) addUpstream(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// Close stops every Serve, ends every connection and waits for them.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return
	}
	p.closed = true
	p.cancel() // first: what the closing below makes fail is no refusal
	for l := range p.listeners {
		l.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// DeniedSince returns the refusals at or after t (of the latest few),
// oldest first.
func (p *Proxy) DeniedSince(t time.Time) []Denial {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Denial
	for _, d := range p.denials {
		if !d.Time.Before(t) {
			out = append(out, d)
		}
	}
	return out
}

func (p *Proxy) handle(c net.Conn) {
	defer func() {
		p.mu.Lock()
		p.active--
		p.mu.Unlock()
	}()
	_ = c.SetReadDeadline(time.Now().Add(headerTimeout))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		// A connection closed before it sent anything, or one the proxy
		// closed itself, is no refusal.
		if errors.Is(err, io.EOF) || p.ctx.Err() != nil {
			return
		}
		p.refuse(c, &Denial{Reason: ReasonProtocol,
			Detail: "what was sent is not an HTTP proxy request; the proxy takes CONNECT host:port, and requests for absolute http:// URLs"})
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if req.Method == http.MethodConnect {
		p.connect(c, br, req)
		return
	}
	p.forward(c, req)
}

// connect serves CONNECT: a tunnel to the checked address.
func (p *Proxy) connect(c net.Conn, br *bufio.Reader, req *http.Request) {
	host, port, err := splitTarget(req.Host, 0)
	if err != nil {
		p.refuse(c, &Denial{Method: req.Method, Reason: ReasonProtocol, Detail: fmt.Sprintf("CONNECT needs host:port, not %q", req.Host)})
		return
	}
	up, d, err := p.open(req.Method, host, port)
	switch {
	case d != nil:
		p.refuse(c, d)
		return
	case err != nil:
		p.fail(c, req.Method, host, port, err)
		return
	}
	defer p.untrack(up, false)
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// Bytes the client sent after its request head belong to the tunnel.
	splice(c, br, up)
}

// forward serves a plain HTTP request: one request upstream, its response
// back as it is (redirects included: the proxy follows none), then the
// client connection ends.
func (p *Proxy) forward(c net.Conn, req *http.Request) {
	if req.URL.Scheme != "http" || req.URL.Host == "" {
		detail := fmt.Sprintf("%s %s is not a request for an absolute http:// URL; the proxy forwards those, and tunnels anything else with CONNECT host:port", req.Method, req.RequestURI)
		p.refuse(c, &Denial{Method: req.Method, Reason: ReasonProtocol, Detail: detail})
		return
	}
	host, port, err := splitTarget(req.URL.Host, 80)
	if err != nil {
		p.refuse(c, &Denial{Method: req.Method, Reason: ReasonProtocol, Detail: fmt.Sprintf("bad host %q", req.URL.Host)})
		return
	}
	up, d, err := p.open(req.Method, host, port)
	switch {
	case d != nil:
		p.refuse(c, d)
		return
	case err != nil:
		p.fail(c, req.Method, host, port, err)
		return
	}
	defer p.untrack(up, false)
	req.RequestURI = ""
	if req.Host == "" {
		req.Host = req.URL.Host
	}
	removeHopHeaders(req.Header)
	req.Close = true
	// The client waits for leave to send its body; the proxy gives it,
	// and the upstream gets the body without being asked.
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		req.Header.Del("Expect")
		if _, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return
		}
	}
	if err := req.Write(up); err != nil {
		p.fail(c, req.Method, host, port, fmt.Errorf("send the request: %w", err))
		return
	}
	upr := bufio.NewReader(up)
	resp, err := http.ReadResponse(upr, req)
	// Informational responses (103 Early Hints) precede the one that
	// counts; the client gets that one.
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
		resp, err = http.ReadResponse(upr, req)
	}
	if err != nil {
		p.fail(c, req.Method, host, port, fmt.Errorf("read the response: %w", err))
		return
	}
	defer resp.Body.Close()
	removeHopHeaders(resp.Header)
	resp.Close = true
	_ = resp.Write(c)
}

// open checks host:port against the policy, resolves it once, and dials
// the first address the policy allows. It returns a Denial when the
// policy refuses, an error when the connection fails otherwise.
func (p *Proxy) open(method, host string, port int) (net.Conn, *Denial, error) {
	up, a, d, err := dialChecked(p.ctx, p.cfg.Policy, p.cfg.Resolver, p.cfg.Dial, host, port)
	switch {
	case d != nil:
		d.Method = method
		return nil, d, nil
	case err != nil:
		return nil, nil, err
	}
	if !p.addUpstream(up) {
		up.Close()
		return nil, nil, ErrClosed
	}
	p.tel.count(p.ctx, outcomeAllowed, "")
	p.log.Debug("egress allowed", "method", method, "target", net.JoinHostPort(normalizeHost(host), strconv.Itoa(port)), "addr", a.String())
	return up, nil, nil
}

// refuse answers a refused request and records it.
func (p *Proxy) refuse(c net.Conn, d *Denial) {
	d.Time = time.Now()
	p.mu.Lock()
	if len(p.denials) == maxDenials {
		p.denials = append(p.denials[:0], p.denials[1:]...)
	}
	p.denials = append(p.denials, *d)
	p.mu.Unlock()
	p.tel.count(p.ctx, outcomeDenied, d.Reason)
	p.log.Warn("egress denied", "method", d.Method, "target", d.Target(), "reason", string(d.Reason), "detail", d.Why())
	status := http.StatusForbidden
	switch d.Reason {
	case ReasonProtocol:
		status = http.StatusBadRequest
	case ReasonBusy:
		status = http.StatusServiceUnavailable
	}
	body := "toolwire egress proxy: " + d.Error() + ".\n"
	if d.Reason != ReasonProtocol && d.Reason != ReasonBusy {
		body += p.allowedNote()
	}
	writeResponse(c, status, body)
}

// allowedNote says what the policy lets through, for the refusal's body.
func (p *Proxy) allowedNote() string {
	entries := p.cfg.Policy.AllowedEntries()
	if len(entries) == 0 {
		return "The sandbox's network policy (allowlist) lets this session reach no host.\n"
	}
	return "The sandbox's network policy (allowlist) lets this session reach only: " + strings.Join(entries, ", ") +
		" (loopback, private and link-local addresses excluded unless allowed).\n"
}

// fail answers a request whose upstream could not be reached.
func (p *Proxy) fail(c net.Conn, method, host string, port int, err error) {
	if errors.Is(err, ErrClosed) || p.ctx.Err() != nil {
		return
	}
	p.tel.count(p.ctx, outcomeFailed, "")
	target := net.JoinHostPort(host, strconv.Itoa(port))
	p.log.Info("egress failed", "method", method, "target", target, "err", err)
	writeResponse(c, http.StatusBadGateway, fmt.Sprintf("toolwire egress proxy: %s %s: %v\n", method, target, err))
}

func writeResponse(c net.Conn, status int, body string) {
	_ = c.SetWriteDeadline(time.Now().Add(headerTimeout))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

// splitTarget splits "host:port"; a missing port is defPort, or an error
// when defPort is 0.
func splitTarget(hostport string, defPort int) (string, int, error) {
	host, portText, err := net.SplitHostPort(hostport)
	if err != nil {
		if defPort == 0 || strings.Count(hostport, ":") > 0 && !strings.HasPrefix(hostport, "[") {
			return "", 0, err
		}
		host, portText = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), strconv.Itoa(defPort)
	}
	port, err := parsePort(portText)
	if err != nil || host == "" {
		return "", 0, fmt.Errorf("bad target %q", hostport)
	}
	return host, port, nil
}

// hopHeaders are the headers of one connection, not to be passed on.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Upgrade"}

func removeHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for name := range strings.SplitSeq(f, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// splice copies both ways until each side has finished sending, passing
// each end-of-stream on as a half-close.
func splice(client net.Conn, fromClient io.Reader, up net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(up, fromClient)
		closeWrite(up)
	}()
	_, _ = io.Copy(client, up)
	closeWrite(client)
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
