package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/queue"
	"github.com/toolwire/toolwire/pkg/schema"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Defaults of Config.
const (
	DefaultMaxConcurrency    = 10
	DefaultRetention         = 5 * time.Minute
	DefaultPermissionTimeout = 5 * time.Minute
)

// Errors of the Executor.
var (
	// ErrDraining: the executor takes no new sessions.
	ErrDraining = execapi.ErrDraining
	// ErrSessionExists: Open named a session that already exists.
	ErrSessionExists = execapi.ErrSessionExists
	// ErrSessionNotFound: Resume named a session that is gone or never was.
	ErrSessionNotFound = execapi.ErrSessionNotFound
	// ErrSessionSetup: the session's workspace or sandbox could not be set
	// up as configured (a bad workspace path, a directory the sandbox user
	// cannot reach, ...).
	ErrSessionSetup = errors.New("session setup failed")
	// ErrInvalidWorkspace: the workspace a session asks for cannot be
	// used (outside the root, or not a directory that can be made). An
	// EnvFactory wraps it; Open's error then wraps ErrSessionSetup too.
	ErrInvalidWorkspace = errors.New("invalid workspace")
	// ErrSessionLimit: the executor holds as many sessions as it may
	// (Config.MaxSessions).
	ErrSessionLimit = errors.New("session limit reached")
	// ErrClientSessionLimit: the client identity holds as many sessions as
	// one may (Config.MaxSessionsPerClient).
	ErrClientSessionLimit = errors.New("session limit of the client reached")
)

// EnvFactory builds the tool environment of a new session: its workspace,
// sandbox runner and scratch directories.
type EnvFactory func(ctx context.Context, req EnvRequest) (*tool.Env, SandboxInfo, error)

// EnvRequest is what a new session asks of its environment.
type EnvRequest struct {
	// SessionID is the session's id.
	SessionID string
	// Workspace is the Open request's value (relative to the root,
	// absolute under it, or empty).
	Workspace string
	// Network is the network part of the session's settings
	// (sandbox.network), which may narrow the executor's egress allowlist
	// and never widens it.
	Network settings.Network
}

// Config configures an Executor.
type Config struct {
	// Tools are the tools offered, including hidden aliases.
	Tools []tool.Tool
	// NewEnv builds each session's environment.
	NewEnv EnvFactory
	// Limits are the default caps of calls.
	Limits tool.Limits
	// MaxConcurrency caps parallel calls per session (default 10).
	MaxConcurrency int
	// Retention is how long a disconnected session is kept (default 5 min).
	Retention time.Duration
	// PermissionTimeout bounds the wait for a permission decision.
	PermissionTimeout time.Duration
	// Version is reported in Hello.
	Version string
	// Operator holds executor-wide permission rules, mode and hooks. They
	// apply to every session, and a session cannot loosen them.
	Operator settings.Settings
	// Logger receives the executor's logs; nil discards them. Per-call
	// lines are logged with the call's context, so a handler that reads the
	// span from it (telemetry.TraceHandler) can add the trace ids.
	Logger *slog.Logger
	// TraceContent records each call's input (gen_ai.tool.call.arguments)
	// and result text (gen_ai.tool.call.result), each cut to 8 KiB, on its
	// run_tool span. Off by default: inputs and outputs may hold secrets.
	// TOOLWIRE_TRACE_CONTENT=true turns it on too.
	TraceContent bool
	// MCP configures the MCP servers of sessions.
	MCP MCPConfig
	// MaxSessions bounds the sessions held at once, those being opened and
	// those kept for resume included; 0 means no bound. Open fails with
	// ErrSessionLimit past it.
	MaxSessions int
	// MaxSessionsPerClient bounds the sessions of one client identity
	// (OpenRequest.ClientIdentity); 0 means no bound. Open fails with
	// ErrClientSessionLimit past it.
	MaxSessionsPerClient int
}

// MCPConfig is the operator's MCP configuration.
type MCPConfig struct {
	// Servers are the operator's MCP servers: every session gets them
	// (started in its own sandbox) and cannot remove or replace them.
	Servers mcpclient.Servers
	// StartTimeout bounds the start of each MCP server of a session; Open
	// waits for them at most this long (default 10 s).
	StartTimeout time.Duration
	// MaxOutputTokens caps an MCP tool's output (default 25,000 tokens).
	MaxOutputTokens int
}

// Executor owns the tools and the sessions of one toolsvc.
type Executor struct {
	cfg   Config
	tools map[string]*registered
	log   *slog.Logger
	tel   *telemetry

	mu       sync.Mutex // guards the fields below
	sessions map[string]*Session
	clients  map[string]int // sessions of each client identity
	draining bool
}

// New returns an Executor.
func New(cfg Config) (*Executor, error) {
	if cfg.NewEnv == nil {
		return nil, errors.New("executor: Config.NewEnv is required")
	}
	if cfg.MaxConcurrency <= 0 {
		cfg.MaxConcurrency = DefaultMaxConcurrency
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.PermissionTimeout <= 0 {
		cfg.PermissionTimeout = DefaultPermissionTimeout
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tools := make(map[string]*registered, len(cfg.Tools))
	for _, t := range cfg.Tools {
		r := register(t)
		if _, dup := tools[r.spec.Name]; dup {
			return nil, fmt.Errorf("executor: tool %q registered twice", r.spec.Name)
		}
		tools[r.spec.Name] = r
	}
	tel, err := newTelemetry(cfg.TraceContent || traceContentFromEnv())
	if err != nil {
		return nil, err
	}
	return &Executor{cfg: cfg, tools: tools, log: cfg.Logger, tel: tel, sessions: make(map[string]*Session), clients: make(map[string]int)}, nil
}

// Tools returns the specs of the tools offered to the model, sorted by name.
func (e *Executor) Tools() []tool.Spec {
	var specs []tool.Spec
	for _, t := range e.tools {
		if !t.spec.Hidden {
			specs = append(specs, t.spec)
		}
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	return specs
}

// Aliases returns the older names of the tool called name, sorted.
func (e *Executor) Aliases(name string) []string {
	var names []string
	for _, t := range e.tools {
		if t.spec.AliasOf == name {
			names = append(names, t.spec.Name)
		}
	}
	sort.Strings(names)
	return names
}

func (e *Executor) lookup(name string) *registered { return e.tools[name] }

// toolSet resolves the tool names a client offers its model (OpenRequest's
// Tools) into the set of canonical names the session runs; nil means
// every tool.
func (e *Executor) toolSet(names []string) (map[string]bool, error) {
	if names == nil {
		return nil, nil
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		r := e.lookup(n)
		if r == nil {
			var known []string
			for _, s := range e.Tools() {
				known = append(known, s.Name)
			}
			return nil, fmt.Errorf("%w: the session's tools name %q, which this executor does not have (it has %s)",
				ErrInvalidSettings, n, strings.Join(known, ", "))
		}
		set[r.canonical()] = true
	}
	return set, nil
}

// registered is a tool with what every call of it needs, worked out once:
// its spec and its compiled input schema.
type registered struct {
	tool.Tool
	spec      tool.Spec
	schema    *schema.Schema
	schemaErr error // the schema does not compile: the tool is at fault
}

func register(t tool.Tool) *registered {
	r := &registered{Tool: t, spec: t.Spec()}
	if r.schema, r.schemaErr = schema.Compile(r.spec.CheckedSchema()); r.schemaErr != nil {
		r.schemaErr = fmt.Errorf("tool %s: %w", r.spec.Name, r.schemaErr)
	}
	return r
}

// canonical returns the name of the tool r is: its own, or for an older
// name, the tool's it stands for.
func (r *registered) canonical() string {
	if r.spec.AliasOf != "" {
		return r.spec.AliasOf
	}
	return r.spec.Name
}

// validate parses input and checks it against the tool's schema.
func (r *registered) validate(input string) (json.RawMessage, error) {
	if r.schemaErr != nil {
		return nil, r.schemaErr
	}
	return r.schema.Validate(r.spec.Name, input)
}

// Open starts a session.
func (e *Executor) Open(ctx context.Context, req OpenRequest) (*Session, error) {
	id := req.SessionID
	if id == "" {
		id = newID()
	}
	e.mu.Lock()
	switch {
	case e.draining:
		e.mu.Unlock()
		return nil, ErrDraining
	case e.sessions[id] != nil:
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrSessionExists, id)
	case e.cfg.MaxSessions > 0 && len(e.sessions) >= e.cfg.MaxSessions:
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: the executor holds %d sessions, its most; close one, or open it on another executor", ErrSessionLimit, e.cfg.MaxSessions)
	case e.cfg.MaxSessionsPerClient > 0 && e.clients[req.ClientIdentity] >= e.cfg.MaxSessionsPerClient:
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: %s holds %d sessions, the most one client may; close one first", ErrClientSessionLimit, clientName(req.ClientIdentity), e.cfg.MaxSessionsPerClient)
	}
	// Reserve the id while the environment is built.
	e.sessions[id] = nil
	e.clients[req.ClientIdentity]++
	e.mu.Unlock()

	release := func() {
		e.mu.Lock()
		delete(e.sessions, id)
		e.dropClientLocked(req.ClientIdentity)
		e.mu.Unlock()
	}
	g, err := newGate(e.cfg.Operator, req.Settings)
	if err != nil {
		release()
		return nil, err
	}
	offered, err := e.toolSet(req.Tools)
	if err != nil {
		release()
		return nil, err
	}
	env, sandboxInfo, err := e.cfg.NewEnv(ctx, EnvRequest{SessionID: id, Workspace: req.Workspace, Network: req.Settings.Sandbox.Network})
	if err != nil {
		release()
		return nil, fmt.Errorf("%w: session %s: %w", ErrSessionSetup, id, err)
	}
	opts := req.Options
	if opts.MaxConcurrency <= 0 || opts.MaxConcurrency > e.cfg.MaxConcurrency {
		opts.MaxConcurrency = e.cfg.MaxConcurrency
	}
	if opts.DefaultTimeout > 0 {
		env.Limits.DefaultTimeout = min(opts.DefaultTimeout, env.Limits.MaxTimeout)
	}
	if opts.PermissionTimeout <= 0 {
		opts.PermissionTimeout = e.cfg.PermissionTimeout
	}
	s := &Session{
		id:        id,
		client:    req.ClientIdentity,
		ex:        e,
		env:       env,
		opts:      opts,
		gate:      g,
		offered:   offered,
		q:         queue.New(opts.MaxConcurrency),
		out:       newOutbox(e.cfg.Limits.ProgressInterval, opts.FoldLifecycle),
		log:       e.log.With("session_id", id),
		live:      make(map[string]*call),
		done:      make(map[string]finishedCall),
		ran:       newSeenIDs(),
		order:     make(map[string]*messageOrder),
		errored:   make(map[string]string),
		decisions: make(map[string]chan PermissionDecision),
	}
	s.sandbox = sandboxInfo
	env.Notify = func(n tool.TaskNotice) { s.out.push(&Event{Time: time.Now(), Task: &n}) }
	s.startMCP(ctx, req.MCPServers)
	e.mu.Lock()
	e.sessions[id] = s
	e.mu.Unlock()
	s.log.Info("session opened", "client", req.ClientName, "client_version", req.ClientVersion, "workspace", env.Files.Dir())
	return s, nil
}

// dropClientLocked counts one session of client less.
func (e *Executor) dropClientLocked(client string) {
	if e.clients[client]--; e.clients[client] <= 0 {
		delete(e.clients, client)
	}
}

// clientName names a client identity in messages.
func clientName(id string) string {
	if id == "" {
		return "the client"
	}
	return "client " + strconv.Quote(id)
}

// Session returns the live session with id.
func (e *Executor) Session(id string) (*Session, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.sessions[id]
	if s == nil {
		return nil, fmt.Errorf("%w: %s", ErrSessionNotFound, id)
	}
	return s, nil
}

func (e *Executor) forget(s *Session) {
	e.mu.Lock()
	if e.sessions[s.id] == s {
		delete(e.sessions, s.id)
		e.dropClientLocked(s.client)
	}
	e.mu.Unlock()
}

func (e *Executor) hello(s *Session, resumed bool) *Hello {
	return &Hello{
		SessionID:      s.id,
		Version:        e.cfg.Version,
		Sandbox:        s.sandbox,
		Limits:         s.env.Limits,
		MaxConcurrency: s.opts.MaxConcurrency,
		Retention:      e.cfg.Retention,
		Resumed:        resumed,
		Workspace:      s.env.Files.Dir(),
		MCPServers:     s.mcp.Status(),
		MCPTools:       s.mcpSpecs(),
		Tools:          s.toolNames(),
	}
}

// SessionTools returns the tools offered to the model in session id: the
// built-in tools of its set sorted by name, then the session's MCP tools sorted by
// name.
func (e *Executor) SessionTools(id string) ([]tool.Spec, error) {
	s, err := e.Session(id)
	if err != nil {
		return nil, err
	}
	var specs []tool.Spec
	for _, spec := range e.Tools() {
		if s.offered == nil || s.offered[spec.Name] {
			specs = append(specs, spec)
		}
	}
	return append(specs, s.mcpSpecs()...), nil
}

// Sessions returns the number of live sessions.
func (e *Executor) Sessions() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.sessions)
}

// Drain stops new sessions, waits up to grace for the live sessions' calls
// to end, then closes every session: calls still running are killed and
// reported interrupted.
func (e *Executor) Drain(ctx context.Context, grace time.Duration) {
	e.mu.Lock()
	e.draining = true
	e.mu.Unlock()
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
wait:
	for e.busy() {
		select {
		case <-deadline.C:
			break wait
		case <-ctx.Done():
			break wait
		case <-tick.C:
		}
	}
	e.Close()
}

// busy reports whether any session has calls queued or running.
func (e *Executor) busy() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.sessions {
		if s != nil && s.q.Len() > 0 {
			return true
		}
	}
	return false
}

// Draining reports whether Drain was called.
func (e *Executor) Draining() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.draining
}

// Close closes every session at once.
func (e *Executor) Close() {
	e.mu.Lock()
	e.draining = true
	var all []*Session
	for _, s := range e.sessions {
		if s != nil {
			all = append(all, s)
		}
	}
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(func() { s.Close(&abortCause{reason: AbortShutdown}) })
	}
	wg.Wait()
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
