package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator/tasklist"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Session is one conversation: its transcript, its link to an executor
// session, and the events clients follow. At most one turn runs at a time.
type Session struct {
	o       *Orchestrator
	id      string
	cfg     SessionConfig // fixed at creation
	created time.Time
	log     *slog.Logger
	events  *eventLog

	ctx    context.Context // ends when the session closes
	cancel context.CancelFunc
	turns  sync.WaitGroup // running turns

	// shared: the store is shared with replicas (see replica.go). fenced:
	// another replica runs the session's turn now; this one must not
	// write to the store.
	shared bool
	fenced atomic.Bool

	linkMu   sync.Mutex // guards the fields below; held while connecting
	link     execapi.Link
	builtins []model.Tool // the built-in tools offered, chosen at the first connection
	system   string

	mu       sync.Mutex // guards the fields below
	messages []model.Message
	// raws holds model.EncodeMessage of messages[i] for i < len(raws),
	// made once for all the requests that send them, and encoded what
	// each was made from.
	raws     []json.RawMessage
	encoded  []encodedMessage
	nturns   int
	usage    model.Usage
	busy     bool
	stopTurn context.CancelCauseFunc
	calls    *callSet // calls of the response being handled; nil otherwise
	executor string   // address of the executor the session runs on
	release  func()   // frees the session's place on a pooled executor; may be nil
	notes    []string // task notifications not yet told to the model
	endLease func()   // stops renewing the running turn's lease; nil otherwise
	turnOpen bool     // the stored transcript shows a turn that has not ended (shared store)
	// announced holds the results of the open turn's last calls that
	// clients were told of (stored as events) before this replica took the
	// lease: the calls without a recorded result get these, not new ones.
	announced map[string]*execapi.CallResult
	closed    bool

	// What the executor said of the session (Hello, McpToolsChanged).
	sandbox    *execapi.SandboxInfo
	mcpTools   []tool.Spec
	mcpServers []mcpclient.ServerStatus
	mcpLink    execapi.Link                  // the link the MCP state came from
	mcpSeq     uint64                        // the sequence number it is as new as
	answers    map[string]chan execapi.Event // executor answers awaited, by request id
	requests   int                           // request ids handed out

	tasks *tasklist.Tasks // the task list (TaskCreate, ...); safe for concurrent use

	agents agentRegistry // running subagents
}

func newSession(o *Orchestrator, id string, cfg SessionConfig, created time.Time) *Session {
	ctx, cancel := context.WithCancel(o.ctx)
	s := &Session{
		o: o, id: id, cfg: cfg, created: created, executor: cfg.Executor,
		log:    o.log.With("session_id", id),
		events: newEventLog(o.cfg.EventBacklog),
		ctx:    ctx, cancel: cancel,
		shared: o.shared(),
		tasks:  tasklist.New(),
	}
	if s.shared {
		s.events.persist, s.events.failed = s.persistEvent, s.eventFailed
	}
	return s
}

// ID returns the session id.
func (s *Session) ID() string { return s.id }

// Config returns the session's configuration; Executor is the executor it
// runs on now (a pooled session moves when its executor is gone).
func (s *Session) Config() SessionConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg := s.cfg
	cfg.Executor = s.executor
	return cfg
}

// Reconfigure replaces the configuration of a session that is not
// connected to its executor yet: one just loaded from the store, before
// its first turn in this process (orchestrator -p --resume applies the
// flags of the new run this way). Where the conversation lives stays as it
// was (Executor, Pool, Workspace, Directory); everything else is taken
// from cfg, with the orchestrator's defaults filling its zero fields, and
// recorded in the transcript, so the session keeps it from then on.
func (s *Session) Reconfigure(cfg SessionConfig) error {
	cfg = withDefaults(cfg, s.o.cfg.Defaults)
	if err := validate(cfg); err != nil {
		return err
	}
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return fmt.Errorf("session %s: %w", s.id, ErrClosed)
	case s.busy:
		return fmt.Errorf("session %s: %w", s.id, ErrBusy)
	case s.link != nil:
		return fmt.Errorf("%w: session %s is connected to its executor; its configuration can change only before it connects", ErrInvalid, s.id)
	}
	cfg.Executor, cfg.Pool, cfg.Workspace, cfg.Directory = s.executor, s.cfg.Pool, s.cfg.Workspace, s.cfg.Directory
	if st := s.o.cfg.Store; st != nil {
		if err := st.Append(s.ctx, s.id, transcript.Record{Kind: transcript.KindConfig, Time: time.Now(), Config: &cfg}); err != nil {
			return fmt.Errorf("persist the new configuration: %w", err)
		}
	}
	s.cfg = cfg
	s.builtins = nil // offered again from the new lists when it connects
	return nil
}

// Connect connects the session to its executor now rather than at its
// next turn, so that Tools and Workspace are known before it runs (a
// session loaded from the store connects lazily).
func (s *Session) Connect(ctx context.Context) error {
	_, _, err := s.connect(ctx)
	return err
}

// executorAddr returns the address of the session's executor.
func (s *Session) executorAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.executor
}

// Info describes the session.
func (s *Session) Info() Info {
	s.mu.Lock()
	info := Info{
		ID: s.id, Executor: s.executor, Model: s.model(), CreatedAt: s.created,
		Turns: s.nturns, Usage: s.usage, MessageCount: len(s.messages), Busy: s.busy,
		Sandbox: s.sandbox, MCPServers: slices.Clone(s.mcpServers),
	}
	s.mu.Unlock()
	if s.shared && !info.Busy {
		// Another replica may run its turn.
		ctx, cancel := context.WithTimeout(s.ctx, storeTimeout)
		holder, _, err := s.o.cfg.Store.Lease(ctx, s.id)
		cancel()
		// This replica's own lease outlives its turn by the moment it
		// takes to free it.
		info.Busy = err == nil && holder != "" && holder != s.o.cfg.Replica
	}
	return info
}

func (s *Session) localBusy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy
}

func (s *Session) model() string {
	if s.cfg.Model != "" {
		return s.cfg.Model
	}
	return s.o.cfg.Model.Model()
}

// Messages returns a copy of the transcript.
func (s *Session) Messages() []model.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]model.Message(nil), s.messages...)
}

// Subscribe returns a reader of the session's events with sequence numbers
// above after that are still held, then of every new event.
func (s *Session) Subscribe(after uint64) *Subscription {
	sub := &Subscription{log: s.events, after: after}
	if s.shared {
		sub.shared = &storedEvents{store: s.o.cfg.Store, id: s.id}
	}
	return sub
}

// LastSequence returns the sequence number of the newest event.
func (s *Session) LastSequence() uint64 { return s.events.last() }

// Tools returns the tools offered to the model (after the first connection
// to the executor): the built-in tools, then the MCP tools, as the next
// model request offers them.
func (s *Session) Tools() []model.Tool {
	s.linkMu.Lock()
	builtins := s.builtins
	s.linkMu.Unlock()
	return s.offered(builtins)
}

// offered returns builtins and the session's current MCP tools as the
// list of a model request.
func (s *Session) offered(builtins []model.Tool) []model.Tool {
	s.mu.Lock()
	specs := s.mcpTools
	s.mu.Unlock()
	return offer(builtins, mcpPool(specs, s.cfg.AllowedTools, s.cfg.DisallowedTools))
}

// Sandbox returns what the executor said of its sandbox, once connected.
func (s *Session) Sandbox() (execapi.SandboxInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sandbox == nil {
		return execapi.SandboxInfo{}, false
	}
	return *s.sandbox, true
}

// MCPServers returns the session's MCP servers with their state, as the
// executor last reported them.
func (s *Session) MCPServers() []mcpclient.ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.mcpServers)
}

// Workspace returns the session's working directory on the executor, once
// connected.
func (s *Session) Workspace() string {
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	if s.link == nil {
		return ""
	}
	return s.link.Hello().Workspace
}

func (s *Session) publish(ev Event) Event { return s.events.publish(ev) }

func (s *Session) publishError(kind string, err error, recoverable bool) {
	s.log.Warn("turn error", "kind", kind, "recoverable", recoverable, "err", err)
	s.publish(Event{Kind: EventError, Error: &ErrorInfo{Kind: kind, Message: err.Error(), Recoverable: recoverable, Err: err}})
}

// errInterrupted is the cause of a turn stopped by Interrupt.
type errInterrupted struct{ reason string }

func (e errInterrupted) Error() string {
	if e.reason == "" {
		return "interrupted by the client"
	}
	return "interrupted by the client: " + e.reason
}

// Run runs one turn for the user's text and returns when it ended. Canceling
// ctx interrupts the turn like Interrupt.
func (s *Session) Run(ctx context.Context, text string) (*TurnResult, error) {
	turnCtx, err := s.begin(ctx, false)
	if err != nil {
		return nil, err
	}
	defer s.turns.Done()
	return s.turn(turnCtx, text, false), nil
}

// Start runs one turn in the background; follow it with Subscribe.
func (s *Session) Start(text string) error {
	turnCtx, err := s.begin(s.ctx, false)
	if err != nil {
		return err
	}
	go func() {
		defer s.turns.Done()
		s.turn(turnCtx, text, false)
	}()
	return nil
}

// claimLocked marks the session busy, or says why it cannot be: closed
// (ErrClosed) or busy already (ErrBusy).
func (s *Session) claimLocked() error {
	switch {
	case s.closed:
		return fmt.Errorf("session %s: %w", s.id, ErrClosed)
	case s.busy:
		return fmt.Errorf("session %s: %w", s.id, ErrBusy)
	}
	s.busy = true
	return nil
}

// begin marks the session busy and returns the turn's context. The caller
// must call s.turns.Done when the turn is over. With a shared store the
// turn runs under the session's lease: taken here (ErrBusy, a *LeaseError,
// when another replica runs a turn), or, for a turn taken over, taken
// already by the sweep.
func (s *Session) begin(ctx context.Context, takenOver bool) (context.Context, error) {
	s.mu.Lock()
	if err := s.claimLocked(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.turns.Add(1)
	s.mu.Unlock()
	if s.shared {
		if err := s.lease(ctx, takenOver); err != nil {
			s.mu.Lock()
			s.busy = false
			s.mu.Unlock()
			s.turns.Done()
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A turn ends with the session even when its caller's ctx lives on.
	turnCtx, stop := context.WithCancelCause(ctx)
	stopAfter := context.AfterFunc(s.ctx, func() { stop(ErrClosed) })
	s.stopTurn = func(cause error) { stopAfter(); stop(cause) }
	if s.shared {
		s.endLease = s.holdLease(turnCtx, stop)
	}
	return turnCtx, nil
}

// Interrupt stops the running turn: the model stream ends, every running
// call is aborted, and every tool_use still gets a tool_result. It does
// nothing between turns.
//
// With replicas, an interrupt for a turn that runs on another replica is
// sent there.
func (s *Session) Interrupt(reason string) {
	s.mu.Lock()
	stop := s.stopTurn
	s.mu.Unlock()
	if stop != nil {
		stop(errInterrupted{reason})
		return
	}
	if s.shared {
		if err := s.notify(Note{Interrupt: &reason}); err != nil {
			s.log.Warn("send the interrupt to the replica running the turn", "err", err)
		}
	}
}

// Decide answers a permission request.
func (s *Session) Decide(d execapi.PermissionDecision) error {
	if d.ToolUseID == "" {
		return fmt.Errorf("%w: permission decision without a tool_use id", ErrInvalid)
	}
	l := s.linkFor(d.ToolUseID)
	if s.shared && !s.localBusy() {
		// The turn runs on another replica, if any: the decision goes there.
		d := d
		return s.notify(Note{Decision: &d})
	}
	if l == nil {
		return fmt.Errorf("session %s: %w", s.id, ErrExecutorUnavailable)
	}
	if err := l.Decide(d); err != nil {
		return fmt.Errorf("session %s: %w: %w", s.id, ErrExecutorUnavailable, err)
	}
	return nil
}

// addMessage appends m to the transcript and persists it. Consecutive user
// messages are joined into one.
func (s *Session) addMessage(m model.Message, messageID string) error {
	s.mu.Lock()
	s.messages = transcript.AppendMessage(s.messages, m)
	s.mu.Unlock()
	s.publish(Event{Kind: EventMessage, Message: &m, MessageID: messageID})
	if s.fenced.Load() {
		return fmt.Errorf("persist %s message: session %s: %w", m.Role, s.id, ErrLeaseLost)
	}
	if st := s.o.cfg.Store; st != nil {
		if err := st.Append(context.WithoutCancel(s.ctx), s.id, transcript.Record{Kind: transcript.KindMessage, Time: time.Now(), Message: &m, MessageID: messageID}); err != nil {
			return fmt.Errorf("persist %s message: %w", m.Role, err)
		}
	}
	return nil
}

// encodedMessage is what an encoding in Session.raws was made from: the
// message's role and content slice. A message is never changed in place
// (joining makes a new content slice; a rewind cuts the list, and the
// messages after it are new), so an encoding whose source is the same
// slice is the message's; the pointer keeps that slice alive, so its
// address is never another's.
type encodedMessage struct {
	role  model.Role
	first *model.Block
	n     int
}

// of reports whether e describes m: whether the encoding made from e is
// m's.
func (e encodedMessage) of(m model.Message) bool {
	return len(m.Content) > 0 && e.role == m.Role && e.n == len(m.Content) && e.first == &m.Content[0]
}

// snapshot returns the messages and the encodings of all but the newest,
// encoding those it has no encoding of: new ones, and any that replaced
// others (a rewind, a join). Both lists are the session's own, not copies
// (a copy of each per request grew with the conversation): a request
// holds them while the session goes on, so the session never writes into
// them below the length handed out. Appending writes past it; a join or a
// rewind makes a new list of messages (transcript.AppendMessage,
// cutLocked), and an encoding that replaces another makes a new list of
// encodings here.
func (s *Session) snapshot() ([]model.Message, []json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := max(len(s.messages)-1, 0)
	for i, m := range s.messages[:n] {
		if i < len(s.encoded) && s.encoded[i].of(m) {
			continue
		}
		raw, err := model.EncodeMessage(m)
		if err != nil {
			return nil, nil, err
		}
		// Kept at the message's index (those after it are re-checked
		// as they come); one without content is never matched again.
		e := encodedMessage{role: m.Role, n: len(m.Content)}
		if len(m.Content) > 0 {
			e.first = &m.Content[0]
		}
		if i < len(s.encoded) {
			s.encoded, s.raws = s.encoded[:i], slices.Clip(s.raws[:i])
		}
		s.encoded, s.raws = append(s.encoded, e), append(s.raws, raw)
	}
	return slices.Clip(s.messages), s.raws[:n:n], nil
}

// cutLocked keeps the first n messages (a rewind). The list is clipped, so
// that the messages appended after the cut go to a new list and not over
// those a request may still hold.
func (s *Session) cutLocked(n int) {
	s.messages = slices.Clip(s.messages[:n])
}

func (s *Session) takeNotes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.notes
	s.notes = nil
	return n
}

// close ends the session: the running turn is interrupted, the link to the
// executor is closed (the executor then ends its session) and the
// transcript file is released.
func (s *Session) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.turns.Wait()
	s.events.close()
	s.linkMu.Lock()
	if s.link != nil {
		if s.shared {
			// Other replicas serve the session too: its executor session
			// stays for them.
			s.link.Detach()
		} else {
			s.link.Close()
		}
	}
	s.linkMu.Unlock()
	if st := s.o.cfg.Store; st != nil {
		st.Release(s.id)
	}
	s.mu.Lock()
	release := s.release
	s.release = nil
	s.mu.Unlock()
	if release != nil {
		release()
	}
}
