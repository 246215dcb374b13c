package mcpclient

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Defaults of Options.
const (
	// DefaultStartTimeout bounds a server's start: process, initialize and
	// the first tools/list.
	DefaultStartTimeout = 10 * time.Second
	// DefaultMaxOutputTokens is Claude Code's cap on an MCP tool's output
	// (MAX_MCP_OUTPUT_TOKENS), counted as four characters a token.
	DefaultMaxOutputTokens = 25000
	// charsPerToken is how Claude Code estimates tokens from text.
	charsPerToken = 4
)

// Options configure a Set.
type Options struct {
	// Operator are the executor's servers: every session gets them and a
	// session's own server of the same name is refused.
	Operator Servers
	// Session are the session's own servers.
	Session Servers
	// Procs starts stdio servers inside the session's sandbox. Without it
	// stdio servers fail.
	Procs *sandbox.Runner
	// Network is the session's network policy (sandbox.NetworkNone,
	// NetworkAllowlist or NetworkHost). Unless it is "host", the session's
	// own http and sse servers may only be reached on loopback addresses;
	// the operator's are not restricted.
	Network string
	// StartTimeout bounds each server's start (default 10 s).
	StartTimeout time.Duration
	// MaxOutputTokens caps a call's text output (default 25,000 tokens).
	MaxOutputTokens int
	// ClientVersion is sent to servers in initialize.
	ClientVersion string
	// Logger receives the servers' standard error (at debug level) and
	// their state changes; nil discards.
	Logger *slog.Logger
	// OnChange is called, from any goroutine, when the set's tools changed
	// after Start returned (tools/list_changed, or a restarted server that
	// lists other tools).
	OnChange func()
}

// State is a server's connection state.
type State int

const (
	// StateConnected: the server answered initialize and listed its tools.
	StateConnected State = iota + 1
	// StateFailed: the configuration is unusable, or the server could not
	// be started or did not answer in time. It offers no tools.
	StateFailed
	// StateDisconnected: the server was connected and went away (its
	// process exited, its connection broke). Its tools stay in the pool;
	// the next call starts it again.
	StateDisconnected
)

// String returns "connected", "failed" or "disconnected".
func (s State) String() string {
	switch s {
	case StateConnected:
		return "connected"
	case StateFailed:
		return "failed"
	case StateDisconnected:
		return "disconnected"
	}
	return "unknown"
}

// ServerStatus describes one server of a Set.
type ServerStatus struct {
	// Name is the server's name as configured.
	Name string
	// Transport is "stdio", "http" or "sse".
	Transport string
	// Operator is true for the executor's own servers.
	Operator bool
	// State is the connection state.
	State State
	// Error says why the server failed or disconnected.
	Error string
	// ServerName and ServerVersion are what the server said in initialize.
	ServerName, ServerVersion string
	// Tools is the number of tools the server offers in the pool.
	Tools int
}

// Set is the MCP servers of one session.
type Set struct {
	opts    Options
	log     *slog.Logger
	servers []*server // sorted by name

	mu      sync.Mutex // guards started
	started bool       // Start returned: changes are reported
}

// Start connects to every server of opts at once and returns when each
// is connected, has failed, or ran out of opts.StartTimeout. It never
// fails: servers that cannot be used are reported by Status. ctx bounds
// the start only.
func Start(ctx context.Context, opts Options) *Set {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.MaxOutputTokens <= 0 {
		opts.MaxOutputTokens = DefaultMaxOutputTokens
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Set{opts: opts, log: opts.Logger}
	byTool := map[string]string{} // normalised name -> configured name
	add := func(name string, cfg ServerConfig, operator bool) {
		srv := newServer(s, name, cfg, operator)
		norm := NormalizeName(name)
		switch {
		case name == "":
			srv.fail("a server needs a name")
		case byTool[norm] != "":
			other := byTool[norm]
			if _, op := opts.Operator[other]; op && !operator {
				srv.fail(fmt.Sprintf("the executor's operator configured a server named %q; a session cannot replace it", other))
			} else {
				srv.fail(fmt.Sprintf("its tool names (mcp__%s__…) would be the same as those of server %q", norm, other))
			}
		default:
			byTool[norm] = name
			if err := cfg.Validate(); err != nil {
				srv.fail("invalid configuration: " + err.Error())
			}
		}
		s.servers = append(s.servers, srv)
	}
	for _, name := range opts.Operator.Names() {
		add(name, opts.Operator[name], true)
	}
	for _, name := range opts.Session.Names() {
		add(name, opts.Session[name], false)
	}
	sort.SliceStable(s.servers, func(i, j int) bool { return s.servers[i].name < s.servers[j].name })

	var wg sync.WaitGroup
	for _, srv := range s.servers {
		if srv.state() == StateFailed {
			continue
		}
		wg.Go(func() {
			if _, err := srv.connect(ctx); err != nil {
				s.log.Warn("mcp server not available", "server", srv.name, "error", err)
			}
		})
	}
	wg.Wait()
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	return s
}

// changed reports a change of the tools once Start has returned.
func (s *Set) changed() {
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if started && s.opts.OnChange != nil {
		s.opts.OnChange()
	}
}

// Tools returns the tools of every server, sorted by name.
func (s *Set) Tools() []tool.Tool {
	if s == nil {
		return nil
	}
	var out []tool.Tool
	for _, srv := range s.servers {
		for _, t := range srv.currentTools() {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec().Name < out[j].Spec().Name })
	return out
}

// Status returns the state of every server, sorted by name.
func (s *Set) Status() []ServerStatus {
	if s == nil {
		return nil
	}
	out := make([]ServerStatus, 0, len(s.servers))
	for _, srv := range s.servers {
		out = append(out, srv.status())
	}
	return out
}

// Close stops every server and waits until their processes are gone.
func (s *Set) Close() {
	if s == nil {
		return
	}
	var wg sync.WaitGroup
	for _, srv := range s.servers {
		wg.Go(srv.close)
	}
	wg.Wait()
}
