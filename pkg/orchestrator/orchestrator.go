package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator/agents"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
)

// Orchestrator holds the conversations of one process: it creates sessions,
// finds them again (in memory, or in the store after a restart) and closes
// them.
type Orchestrator struct {
	cfg    Config
	log    *slog.Logger
	agents *agents.Set // the subagent types

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	sweeps sync.WaitGroup // the sweep for expired leases (shared store)

	mu       sync.Mutex // guards the fields below
	sessions map[string]*Session
	closed   bool
}

// New returns an Orchestrator for cfg.
func New(cfg Config) (*Orchestrator, error) {
	if cfg.Model == nil {
		return nil, fmt.Errorf("%w: orchestrator needs a model client", ErrInvalid)
	}
	if cfg.Executor == nil {
		return nil, fmt.Errorf("%w: orchestrator needs an Executor", ErrInvalid)
	}
	if cfg.Defaults.Executor == "" {
		cfg.Defaults.Executor = cfg.DefaultExecutor
	}
	if cfg.AbortGrace <= 0 {
		cfg.AbortGrace = DefaultAbortGrace
	}
	if cfg.ResumeWindow <= 0 {
		cfg.ResumeWindow = DefaultResumeWindow
	}
	if cfg.EventBacklog <= 0 {
		cfg.EventBacklog = defaultEventBacklog
	}
	if cfg.ClientName == "" {
		cfg.ClientName = "toolwire-orchestrator"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Replica == "" {
		cfg.Replica = newReplicaID()
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	cfg.Logger = log
	ctx, cancel := context.WithCancel(context.Background())
	o := &Orchestrator{cfg: cfg, log: log, agents: agents.NewSet(cfg.Agents), ctx: ctx, cancel: cancel, sessions: map[string]*Session{}}
	if o.shared() {
		o.sweeps.Go(o.sweep)
		listening := make(chan struct{})
		o.sweeps.Go(func() { o.listen(listening) })
		// Notes sent from now on reach this replica.
		select {
		case <-listening:
		case <-time.After(storeTimeout):
			log.Warn("not yet listening for interrupts and decisions from other replicas")
		}
	}
	return o, nil
}

// newSessionID returns a fresh random session id.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Create starts a session with id (empty picks one) and connects it to its
// executor. The session's configuration is cfg with the orchestrator's
// defaults filling its zero fields.
func (o *Orchestrator) Create(ctx context.Context, id string, cfg SessionConfig) (*Session, error) {
	if id == "" {
		id = newSessionID()
	}
	if err := checkID(id); err != nil {
		return nil, err
	}
	cfg = withDefaults(cfg, o.cfg.Defaults)
	if err := validate(cfg); err != nil {
		return nil, err
	}
	if err := o.checkMCP(cfg); err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, ErrClosed
	}
	if o.sessions[id] != nil {
		return nil, fmt.Errorf("%w: %s", ErrExists, id)
	}
	release := func() {}
	if o.cfg.Placer != nil {
		addr, rel, err := o.cfg.Placer.Place(ctx, cfg.Executor)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrExecutorUnavailable, err)
		}
		if addr != cfg.Executor {
			cfg.Pool, cfg.Executor = cfg.Executor, addr
		}
		release = rel
	}
	created := time.Now().UTC()
	if o.cfg.Store != nil {
		if err := o.cfg.Store.Create(ctx, id, cfg, created); err != nil {
			release()
			return nil, err
		}
	}
	s := newSession(o, id, cfg, created)
	s.release = release
	if _, _, err := s.connect(ctx); err != nil {
		s.close()
		if o.cfg.Store != nil {
			_ = o.cfg.Store.Remove(context.WithoutCancel(ctx), id)
		}
		return nil, err
	}
	o.sessions[id] = s
	s.log.Info("session created", "executor", cfg.Executor, "pool", cfg.Pool, "model", s.model())
	return s, nil
}

// checkMCP refuses a session's own MCP servers when the operator's are the
// only ones allowed, or when one takes the name of an operator's server.
func (o *Orchestrator) checkMCP(cfg SessionConfig) error {
	if len(cfg.MCPServers) == 0 {
		return nil
	}
	if o.cfg.StrictMCP {
		return fmt.Errorf("%w: this orchestrator takes no MCP servers from its clients (--strict-mcp-config); its own are %v",
			ErrInvalid, o.cfg.MCPServers.Names())
	}
	for _, name := range cfg.MCPServers.Names() {
		if _, ok := o.cfg.MCPServers[name]; ok {
			return fmt.Errorf("%w: MCP server %q is the orchestrator's own; a session cannot replace it", ErrInvalid, name)
		}
	}
	return nil
}

// Session returns the session with id: a live one, or one loaded from the
// store (the conversation resumes where the transcript ends; calls it shows
// without results get interrupted results).
func (o *Orchestrator) Session(ctx context.Context, id string) (*Session, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil, ErrClosed
	}
	if s := o.sessions[id]; s != nil {
		o.mu.Unlock()
		if s.shared && !s.localBusy() {
			// Another replica may have run turns since.
			if err := s.reload(ctx, false); err != nil {
				return nil, err
			}
		}
		return s, nil
	}
	if o.shared() {
		// Loading reads the database: other sessions need not wait.
		o.mu.Unlock()
		s, err := o.load(ctx, id)
		if err != nil {
			return nil, err
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.closed {
			s.close()
			return nil, ErrClosed
		}
		if prev := o.sessions[id]; prev != nil {
			s.close()
			return prev, nil
		}
		o.sessions[id] = s
		return s, nil
	}
	defer o.mu.Unlock()
	if o.cfg.Store == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	s, err := o.load(ctx, id)
	if err != nil {
		return nil, err
	}
	o.sessions[id] = s
	return s, nil
}

// load makes the session id from its transcript in the store.
func (o *Orchestrator) load(ctx context.Context, id string) (*Session, error) {
	t, err := o.cfg.Store.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	s := newSession(o, id, t.Config, t.Created)
	s.messages, s.nturns, s.usage = t.Messages, t.Turns, t.Usage
	if s.tasks, err = restoreTasks(t.Tasks); err != nil {
		return nil, fmt.Errorf("session %s: task list: %w", id, err)
	}
	if s.shared {
		// Its turn may run on another replica, or wait to be taken over:
		// the transcript is theirs to complete.
		last, err := o.cfg.Store.LastEvent(ctx, id)
		if err != nil {
			return nil, err
		}
		s.events.restart(last)
	} else if err := s.repair(); err != nil {
		// Calls the executor may still run for this session from before
		// the restart are aborted when it connects: the link takes the
		// executor's session over (see Executor.Open).
		return nil, err
	}
	if o.cfg.Placer != nil && t.Config.Pool != "" {
		s.release = o.cfg.Placer.Hold(t.Config.Pool, t.Config.Executor)
	}
	s.log.Info("session resumed from transcript", "messages", len(s.messages), "turns", s.nturns)
	return s, nil
}

// repair gives the tool_use blocks of a trailing assistant message, whose
// results were never recorded, the results clients were told of, or
// interrupted ones (told to clients too), so the transcript is valid to
// send again.
func (s *Session) repair() error {
	s.mu.Lock()
	var uses []model.Block
	if n := len(s.messages); n > 0 && s.messages[n-1].Role == model.RoleAssistant {
		uses = s.messages[n-1].ToolUses()
	}
	s.mu.Unlock()
	if len(uses) == 0 {
		return nil
	}
	announced := s.takeAnnounced()
	var blocks []model.Block
	for _, u := range uses {
		r := announced[u.ID]
		if r == nil {
			r = syntheticResult(u.ID, u.Name, textRestarted)
			s.publishResult(r)
		}
		blocks = append(blocks, ToolResultBlock(r))
	}
	return s.addMessage(model.Message{Role: model.RoleUser, Content: blocks}, "")
}

// List describes every session, live or stored, newest first.
func (o *Orchestrator) List(ctx context.Context) ([]Info, error) {
	var infos []Info
	seen := map[string]bool{}
	// With a shared store, what other replicas did is in the store only:
	// every session is listed from it.
	if !o.shared() {
		o.mu.Lock()
		for id, s := range o.sessions {
			infos = append(infos, s.Info())
			seen[id] = true
		}
		o.mu.Unlock()
	}
	if o.cfg.Store != nil {
		sums, err := o.cfg.Store.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range sums {
			if seen[t.ID] {
				continue
			}
			infos = append(infos, Info{
				ID: t.ID, Executor: t.Executor, Model: t.Model, CreatedAt: t.Created,
				Turns: t.Turns, Usage: t.Usage, MessageCount: t.Messages,
			})
		}
	}
	slices.SortFunc(infos, func(a, b Info) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return infos, nil
}

// Delete ends a session (aborting its running calls) and removes its
// transcript.
func (o *Orchestrator) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	o.mu.Lock()
	s := o.sessions[id]
	delete(o.sessions, id)
	o.mu.Unlock()
	if s != nil {
		s.close()
	}
	if o.cfg.Store == nil {
		if s == nil {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return nil
	}
	if s == nil {
		if _, err := o.cfg.Store.Load(ctx, id); err != nil {
			return err
		}
	}
	// A live session's transcript may be gone already: it is deleted then.
	if err := o.cfg.Store.Remove(ctx, id); err != nil && (s == nil || !errors.Is(err, ErrNotFound)) {
		return err
	}
	return nil
}

// checkID rejects a session id that is not a safe file name.
func checkID(id string) error {
	if err := transcript.CheckID(id); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// Close interrupts every running turn and closes every session; transcripts
// stay in the store.
func (o *Orchestrator) Close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	all := make([]*Session, 0, len(o.sessions))
	for _, s := range o.sessions {
		all = append(all, s)
	}
	o.sessions = map[string]*Session{}
	o.mu.Unlock()
	if o.shared() {
		// Running turns go on on another replica rather than end here.
		var wg sync.WaitGroup
		for _, s := range all {
			wg.Go(s.handOver)
		}
		wg.Wait()
	}
	o.cancel()
	o.sweeps.Wait()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(s.close)
	}
	wg.Wait()
	return nil
}
