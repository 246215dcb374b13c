package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/schema"
	"github.com/toolwire/toolwire/pkg/tool"
)

// maxDescription caps a tool description, as Claude Code does: some
// servers put whole manuals there.
const maxDescription = 2048

// server is one configured MCP server and its current connection.
type server struct {
	set      *Set
	name     string // as configured
	cfg      ServerConfig
	operator bool
	client   *mcp.Client

	mu         sync.Mutex // guards the fields below
	st         State
	err        string
	conn       *connection   // nil when not connected
	connecting chan struct{} // closed when the running (re)connect ends; nil when none runs
	info       *mcp.Implementation
	tools      []*mcpTool
	progress   map[string]func(mcp.ProgressNotificationParams) // by progress token (the tool_use id)
	closed     bool
}

// connection is one live session with the server.
type connection struct {
	cs     *mcp.ClientSession
	proc   *sandbox.Process // stdio only
	stderr *tail            // stdio only
	done   chan struct{}    // closed when the connection has ended
}

func newServer(set *Set, name string, cfg ServerConfig, operator bool) *server {
	s := &server{set: set, name: name, cfg: cfg, operator: operator, progress: map[string]func(mcp.ProgressNotificationParams){}}
	s.client = mcp.NewClient(&mcp.Implementation{Name: "toolwire", Version: set.opts.ClientVersion}, &mcp.ClientOptions{
		ToolListChangedHandler: func(_ context.Context, req *mcp.ToolListChangedRequest) {
			// Not on the connection's reader: listing needs it.
			go s.refresh(req.Session)
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			token, _ := req.Params.ProgressToken.(string)
			s.mu.Lock()
			report := s.progress[token]
			s.mu.Unlock()
			if report != nil {
				report(*req.Params)
			}
		},
	})
	return s
}

// fail marks a server that cannot be used at all.
func (s *server) fail(msg string) {
	s.mu.Lock()
	s.st, s.err = StateFailed, msg
	s.mu.Unlock()
}

func (s *server) state() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

func (s *server) status() ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ServerStatus{Name: s.name, Transport: s.cfg.Transport(), Operator: s.operator, State: s.st, Error: s.err, Tools: len(s.tools)}
	if s.info != nil {
		st.ServerName, st.ServerVersion = s.info.Name, s.info.Version
	}
	return st
}

func (s *server) currentTools() []*mcpTool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

// connect returns the live connection, starting the server when it has
// none. Concurrent callers share one start. A start that fails leaves a
// server that was never connected failed, and one that was disconnected.
func (s *server) connect(ctx context.Context) (*connection, error) {
	for {
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			return nil, errors.New("the session has ended")
		case s.conn != nil:
			c := s.conn
			s.mu.Unlock()
			return c, nil
		case s.connecting != nil:
			wait := s.connecting
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		wait := make(chan struct{})
		s.connecting = wait
		s.mu.Unlock()

		c, tools, info, err := s.start(ctx)
		s.mu.Lock()
		s.connecting = nil
		close(wait)
		if err == nil && s.closed {
			err = errors.New("the session has ended")
			s.mu.Unlock()
			c.close()
			return nil, err
		}
		if err != nil {
			if s.st != StateDisconnected {
				s.st = StateFailed
			}
			s.err = err.Error()
			s.mu.Unlock()
			return nil, err
		}
		changed := !sameTools(s.tools, tools)
		s.conn, s.tools, s.info, s.st, s.err = c, tools, info, StateConnected, ""
		s.mu.Unlock()
		go s.watch(c)
		if changed {
			s.set.changed()
		}
		return c, nil
	}
}

// start starts the server, initializes the session and lists its tools,
// within the start timeout.
func (s *server) start(ctx context.Context) (*connection, []*mcpTool, *mcp.Implementation, error) {
	timeout := s.set.opts.StartTimeout
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("no answer to initialize and tools/list within %s", timeout))
	defer cancel()
	c := &connection{done: make(chan struct{})}
	var transport mcp.Transport
	var err error
	switch s.cfg.Transport() {
	case TransportStdio:
		transport, err = s.startProcess(ctx, c)
	default:
		transport, err = s.httpTransport()
	}
	if err != nil {
		return nil, nil, nil, err
	}
	type connected struct {
		cs  *mcp.ClientSession
		err error
	}
	// Connect may not see ctx end while it writes to a server that reads
	// nothing; the process's end (or the timeout) decides then.
	ch := make(chan connected, 1)
	go func() {
		cs, err := s.client.Connect(ctx, transport, nil)
		ch <- connected{cs, err}
	}()
	var r connected
	select {
	case r = <-ch:
	case <-ctx.Done():
		c.kill()
		if r = <-ch; r.err == nil {
			r.cs.Close()
		}
		return nil, nil, nil, fmt.Errorf("%w%s", context.Cause(ctx), c.stderr.suffix())
	}
	if r.err != nil {
		c.kill()
		return nil, nil, nil, s.explain("initialize", c, r.err)
	}
	c.cs = r.cs
	tools, err := s.listTools(ctx, c.cs)
	if err != nil {
		c.close()
		return nil, nil, nil, s.explain("tools/list", c, err)
	}
	return c, tools, c.cs.InitializeResult().ServerInfo, nil
}

// explain turns a failed step into an error that says what happened: a
// process that exited says so, with the end of its standard error.
func (s *server) explain(step string, c *connection, err error) error {
	if c.proc != nil {
		select {
		case <-c.proc.Done():
			code, _ := c.proc.Wait()
			return fmt.Errorf("the server exited with code %d during %s%s", code, step, c.stderr.suffix())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: %w%s", step, err, c.stderr.suffix())
}

// startProcess starts a stdio server in the session's sandbox.
func (s *server) startProcess(ctx context.Context, c *connection) (mcp.Transport, error) {
	procs := s.set.opts.Procs
	if procs == nil {
		return nil, errors.New("stdio servers need a sandbox runner, and this executor has none")
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	var env []string
	for _, k := range sortedKeys(s.cfg.Env) {
		env = append(env, k+"="+s.cfg.Env[k])
	}
	p, err := procs.Start(ctx, sandbox.Cmd{
		Args:   append([]string{s.cfg.Command}, s.cfg.Args...),
		Env:    env,
		Stdin:  stdinR,
		Stderr: errW,
	})
	stdinR.Close()
	errW.Close()
	if err != nil {
		stdinW.Close()
		errR.Close()
		return nil, fmt.Errorf("start %s: %w", s.cfg.Command, err)
	}
	c.proc = p
	c.stderr = newTail()
	go c.stderr.readFrom(errR, s.set.log.With("mcp_server", s.name))
	return &mcp.IOTransport{Reader: p.Output(), Writer: stdinW}, nil
}

// httpTransport returns the transport of an http or sse server. A
// session's own server is held to loopback unless its network is "host"
// (the executor reaches it, not the session's egress proxy).
func (s *server) httpTransport() (mcp.Transport, error) {
	restricted := !s.operator && s.set.opts.Network != sandbox.NetworkHost
	if restricted {
		u, _ := url.Parse(s.cfg.URL)
		if !loopbackHost(u.Hostname()) {
			return nil, fmt.Errorf("the session's network policy is %q: its own MCP servers may only be reached on loopback (localhost, 127.0.0.0/8, ::1), not %s", s.set.opts.Network, u.Hostname())
		}
	}
	dialer := &net.Dialer{Timeout: s.set.opts.StartTimeout}
	if restricted {
		// Checked on every connection, redirects and names that resolve
		// elsewhere included.
		dialer.Control = func(_, address string, _ syscall.RawConn) error {
			host, _, _ := net.SplitHostPort(address)
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return fmt.Errorf("refused to connect to %s: the session's network policy allows loopback only", address)
			}
			return nil
		}
	}
	rt := &http.Transport{DialContext: dialer.DialContext, ForceAttemptHTTP2: true, Proxy: nil}
	client := &http.Client{Transport: headerTransport{base: rt, headers: s.cfg.Headers}}
	if s.cfg.Transport() == TransportSSE {
		return &mcp.SSEClientTransport{Endpoint: s.cfg.URL, HTTPClient: client}, nil
	}
	return &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: client, MaxRetries: 1}, nil
}

// loopbackHost reports whether host names the loopback interface.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(r)
}

// listTools lists the server's tools as pool tools. Tools whose name is
// too long for the Messages API, that repeat a name, or whose input schema
// the executor cannot check are left out, with a warning.
func (s *server) listTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcpTool, error) {
	var out []*mcpTool
	seen := map[string]bool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		mt, err := newTool(s, t)
		switch {
		case err != nil:
			s.set.log.Warn("mcp tool left out", "server", s.name, "tool", t.Name, "error", err)
			continue
		case seen[mt.spec.Name]:
			s.set.log.Warn("mcp tool left out: its name repeats another's", "server", s.name, "tool", t.Name, "name", mt.spec.Name)
			continue
		}
		seen[mt.spec.Name] = true
		out = append(out, mt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].spec.Name < out[j].spec.Name })
	return out, nil
}

// refresh lists the tools again after tools/list_changed.
func (s *server) refresh(cs *mcp.ClientSession) {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	if c == nil || c.cs != cs {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.set.opts.StartTimeout)
	defer cancel()
	tools, err := s.listTools(ctx, cs)
	if err != nil {
		s.set.log.Warn("mcp tools/list after list_changed failed", "server", s.name, "error", err)
		return
	}
	s.mu.Lock()
	if s.conn != c {
		s.mu.Unlock()
		return
	}
	changed := !sameTools(s.tools, tools)
	s.tools = tools
	s.mu.Unlock()
	if changed {
		s.set.log.Info("mcp tools changed", "server", s.name, "tools", len(tools))
		s.set.changed()
	}
}

// watch marks the server disconnected when c ends: its process exited or
// its connection broke.
func (s *server) watch(c *connection) {
	c.cs.Wait()
	reason := "the connection to the server ended; it is started again for the next call"
	if c.proc != nil {
		c.proc.Abort()
		code, _ := c.proc.Wait()
		reason = fmt.Sprintf("the server exited with code %d; it is started again for the next call%s", code, c.stderr.suffix())
	}
	s.mu.Lock()
	if s.conn == c {
		s.conn, s.st, s.err = nil, StateDisconnected, reason
		// A server stopped because its session ends is not news.
		if !s.closed {
			s.set.log.Warn("mcp server disconnected", "server", s.name, "reason", reason)
		}
	}
	s.mu.Unlock()
	// Closed last: whoever waits for c to end reads the reason above.
	close(c.done)
}

// lost forgets c after a call found it broken, so that the next call
// starts the server again.
func (s *server) lost(c *connection) {
	c.close()
	<-c.done
}

// close ends the server for good.
func (s *server) close() {
	s.mu.Lock()
	s.closed = true
	c := s.conn
	wait := s.connecting
	s.mu.Unlock()
	if wait != nil {
		<-wait
		s.mu.Lock()
		c = s.conn
		s.mu.Unlock()
	}
	if c != nil {
		c.close()
		<-c.done
	}
}

// close ends the connection and, for stdio, kills the process tree.
func (c *connection) close() {
	c.kill()
	if c.cs != nil {
		c.cs.Close()
	}
}

// kill kills a stdio server's process tree and waits until it is gone.
func (c *connection) kill() {
	if c.proc != nil {
		c.proc.Kill()
	}
}

// sameTools reports whether two tool lists offer the same tools.
func sameTools(a, b []*mcpTool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].sameAs(b[i]) {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// compileSchema checks that the executor can validate input against s.
func compileSchema(s []byte) error {
	_, err := schema.Compile(s)
	return err
}

var _ tool.Tool = (*mcpTool)(nil)
