package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/model"
)

// Session is one conversation: its transcript, its Execute stream to an
// executor, and the events clients follow. At most one turn runs at a time.
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

	linkMu    sync.Mutex // guards the fields below; held while connecting
	link      *link
	tools     []model.Tool
	system    string
	restarted bool // the transcript was loaded: the executor may hold stale calls

	mu       sync.Mutex // guards the fields below
	messages []model.Message
	nturns   int
	usage    model.Usage
	busy     bool
	stopTurn context.CancelCauseFunc
	calls    *callSet // calls of the response being handled; nil otherwise
	notes    []string // task notifications not yet told to the model
	closed   bool
}

func newSession(o *Orchestrator, id string, cfg SessionConfig, created time.Time) *Session {
	ctx, cancel := context.WithCancel(o.ctx)
	return &Session{
		o: o, id: id, cfg: cfg, created: created,
		log:    o.log.With("session_id", id),
		events: newEventLog(o.cfg.EventBacklog),
		ctx:    ctx, cancel: cancel,
	}
}

// ID returns the session id.
func (s *Session) ID() string { return s.id }

// Config returns the session's configuration.
func (s *Session) Config() SessionConfig { return s.cfg }

// Info describes the session.
func (s *Session) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Info{
		ID: s.id, Executor: s.cfg.Executor, Model: s.model(), CreatedAt: s.created,
		Turns: s.nturns, Usage: s.usage, MessageCount: len(s.messages), Busy: s.busy,
	}
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
	return &Subscription{log: s.events, after: after}
}

// LastSequence returns the sequence number of the newest event.
func (s *Session) LastSequence() uint64 { return s.events.last() }

// Tools returns the tools offered to the model (after the first connection
// to the executor).
func (s *Session) Tools() []model.Tool {
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	return append([]model.Tool(nil), s.tools...)
}

// Workspace returns the session's working directory on the executor, once
// connected.
func (s *Session) Workspace() string {
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	if s.link == nil {
		return ""
	}
	return s.link.hello.GetWorkspace()
}

func (s *Session) publish(ev Event) Event { return s.events.publish(ev) }

func (s *Session) publishError(kind string, err error, recoverable bool) {
	s.log.Warn("turn error", "kind", kind, "recoverable", recoverable, "err", err)
	s.publish(Event{Kind: EventError, Error: &ErrorInfo{Kind: kind, Message: err.Error(), Recoverable: recoverable}})
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
	turnCtx, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer s.turns.Done()
	return s.turn(turnCtx, text), nil
}

// Start runs one turn in the background; follow it with Subscribe.
func (s *Session) Start(text string) error {
	turnCtx, err := s.begin(s.ctx)
	if err != nil {
		return err
	}
	go func() {
		defer s.turns.Done()
		s.turn(turnCtx, text)
	}()
	return nil
}

// begin marks the session busy and returns the turn's context. The caller
// must call s.turns.Done when the turn is over.
func (s *Session) begin(ctx context.Context) (context.Context, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, fmt.Errorf("session %s: %w", s.id, ErrClosed)
	case s.busy:
		return nil, fmt.Errorf("session %s: %w", s.id, ErrBusy)
	}
	// A turn ends with the session even when its caller's ctx lives on.
	turnCtx, stop := context.WithCancelCause(ctx)
	stopAfter := context.AfterFunc(s.ctx, func() { stop(ErrClosed) })
	s.busy = true
	s.stopTurn = func(cause error) { stopAfter(); stop(cause) }
	s.turns.Add(1)
	return turnCtx, nil
}

// Interrupt stops the running turn: the model stream ends, every running
// call is aborted, and every tool_use still gets a tool_result. It does
// nothing between turns.
func (s *Session) Interrupt(reason string) {
	s.mu.Lock()
	stop := s.stopTurn
	s.mu.Unlock()
	if stop != nil {
		stop(errInterrupted{reason})
	}
}

// Decide answers a permission request.
func (s *Session) Decide(d *executorv1.PermissionDecision) error {
	if d.GetToolUseId() == "" {
		return fmt.Errorf("%w: permission decision without a tool_use id", ErrInvalid)
	}
	s.linkMu.Lock()
	l := s.link
	s.linkMu.Unlock()
	if l == nil || !l.alive() {
		return fmt.Errorf("session %s: %w", s.id, ErrExecutorUnavailable)
	}
	return l.decide(d)
}

// addMessage appends m to the transcript and persists it. Consecutive user
// messages are joined into one.
func (s *Session) addMessage(m model.Message, messageID string) error {
	s.mu.Lock()
	s.messages = appendMessage(s.messages, m)
	s.mu.Unlock()
	s.publish(Event{Kind: EventMessage, Message: &m, MessageID: messageID})
	if st := s.o.cfg.Store; st != nil {
		if err := st.append(s.id, record{Type: recMessage, Time: time.Now(), Message: &m, MessageID: messageID}); err != nil {
			return fmt.Errorf("persist %s message: %w", m.Role, err)
		}
	}
	return nil
}

func (s *Session) snapshot() []model.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]model.Message(nil), s.messages...)
}

func (s *Session) takeNotes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.notes
	s.notes = nil
	return n
}

// connect returns a working Execute stream, opening or reopening it: a
// broken stream is resumed where it stopped, and a session loaded from disk
// reattaches to the executor's session if it still exists.
func (s *Session) connect(ctx context.Context) (*link, []model.Tool, error) {
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	if s.link != nil && s.link.alive() {
		return s.link, s.tools, nil
	}
	client, err := s.o.cfg.Dial(ctx, s.cfg.Executor)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrExecutorUnavailable, s.cfg.Executor, err)
	}
	openResume := func(after uint64, stale bool) (*link, error) {
		return openLink(ctx, client, &executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Resume{Resume: &executorv1.Resume{
			SessionId: s.id, LastSequence: after,
		}}}, stale, s.handleExec)
	}
	open := func() (*link, error) {
		return openLink(ctx, client, &executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{
			SessionId:     s.id,
			Workspace:     s.cfg.Workspace,
			Options:       s.cfg.Options,
			Settings:      s.cfg.Settings,
			ClientName:    s.o.cfg.ClientName,
			ClientVersion: s.o.cfg.ClientVersion,
		}}}, false, s.handleExec)
	}
	// A broken stream is resumed where it stopped; a first connection opens
	// the session. Either may find the other state on the executor (the
	// session expired, outlived an orchestrator restart, or is just
	// ending), so each falls back to the other, with a short pause.
	var (
		l      *link
		stale  bool
		resume = s.link != nil
		after  uint64
	)
	if resume {
		s.log.Warn("executor stream broke; reconnecting", "err", s.link.err)
		after = s.link.lastSeq.Load()
	}
	pause := 10 * time.Millisecond
	for attempt := 0; ; attempt++ {
		var retry bool
		if resume {
			l, err = openResume(after, stale)
			code := status.Code(err)
			retry = code == codes.NotFound || code == codes.FailedPrecondition
		} else {
			l, err = open()
			if retry = status.Code(err) == codes.AlreadyExists; retry {
				stale, after = true, 0
			}
		}
		if !retry || attempt == 5 {
			break
		}
		resume = !resume
		if !resume {
			select {
			case <-ctx.Done():
				return nil, nil, fmt.Errorf("connect to the executor: %w", ctx.Err())
			case <-time.After(pause):
			}
			pause *= 2
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if stale || s.restarted {
		// Calls the transcript already reports as interrupted must not go on.
		_ = l.abortAll(executorv1.AbortReason_ABORT_REASON_SHUTDOWN, "orchestrator restarted")
		s.restarted = false
	}
	if s.tools == nil {
		list, err := client.ListTools(ctx, &executorv1.ListToolsRequest{})
		if err != nil {
			l.drop()
			return nil, nil, fmt.Errorf("%w: list tools: %w", ErrExecutorUnavailable, err)
		}
		s.tools = toolPool(list.GetTools(), s.cfg.AllowedTools, s.cfg.DisallowedTools)
	}
	s.system = s.cfg.SystemPrompt
	if s.system == "" {
		s.system = model.SystemPrompt
	}
	if ws := l.hello.GetWorkspace(); ws != "" && s.cfg.SystemPrompt == "" {
		s.system += "\n\nWorking directory: " + ws
	}
	s.link = l
	s.log.Info("connected to executor", "executor", s.cfg.Executor, "resumed", l.hello.GetResumed(),
		"executor_version", l.hello.GetExecutorVersion(), "sandbox", l.hello.GetSandbox().GetBackend())
	return l, s.tools, nil
}

func (s *Session) systemPrompt() string {
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	return s.system
}

// handleExec handles an executor event; it runs on the link's goroutine.
// Events of calls the current turn does not wait for (replays, calls of a
// turn that ended) are not relayed.
func (s *Session) handleExec(l *link, resp *executorv1.ExecuteResponse) {
	s.mu.Lock()
	cs := s.calls
	s.mu.Unlock()
	switch ev := resp.GetEvent().(type) {
	case *executorv1.ExecuteResponse_Result:
		if cs != nil && cs.deliver(ev.Result) {
			s.publish(Event{Kind: EventToolResult, Result: ev.Result})
		}
	case *executorv1.ExecuteResponse_Started:
		if cs.has(ev.Started.GetToolUseId()) {
			s.publish(Event{Kind: EventToolStarted, Started: ev.Started})
		}
	case *executorv1.ExecuteResponse_Progress:
		if cs.has(ev.Progress.GetToolUseId()) {
			s.publish(Event{Kind: EventProgress, Progress: ev.Progress})
		}
	case *executorv1.ExecuteResponse_PermissionRequest:
		s.permission(l, cs, ev.PermissionRequest)
	case *executorv1.ExecuteResponse_TaskNotification:
		// A task the model stopped itself (TaskStop) is not news to it:
		// like Claude Code, only completed and failed tasks are told.
		if ev.TaskNotification.GetStatus() != "killed" {
			s.mu.Lock()
			s.notes = append(s.notes, notificationText(ev.TaskNotification))
			s.mu.Unlock()
		}
		s.publish(Event{Kind: EventTaskNotification, Notification: ev.TaskNotification})
	}
}

func (s *Session) permission(l *link, cs *callSet, req *executorv1.PermissionRequest) {
	if !cs.has(req.GetToolUseId()) {
		// Nobody waits for this call any more (a replay after a restart).
		_ = l.decide(&executorv1.PermissionDecision{ToolUseId: req.GetToolUseId(),
			Behavior: executorv1.PermissionBehavior_PERMISSION_BEHAVIOR_DENY, Message: "The turn that made this call has ended."})
		return
	}
	if f := s.o.cfg.Permissions; f != nil {
		if d := f(s.id, req); d != nil {
			if d.ToolUseId == "" {
				d.ToolUseId = req.GetToolUseId()
			}
			if err := l.decide(d); err != nil {
				s.log.Warn("send permission decision", "tool_use_id", req.GetToolUseId(), "err", err)
			}
			return
		}
	}
	s.publish(Event{Kind: EventPermissionRequest, Permission: req})
}

// close ends the session: the running turn is interrupted, the Execute
// stream is half-closed (the executor then ends its session) and the
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
		s.link.close()
	}
	s.linkMu.Unlock()
	if st := s.o.cfg.Store; st != nil {
		st.release(s.id)
	}
}

// callSet tracks the calls of one model response until each has a result.
type callSet struct {
	mu      sync.Mutex        // guards the fields below
	names   map[string]string // every call: tool_use id -> tool name
	pending map[string]bool
	order   []string
	results []*executorv1.Result // in arrival order
	signal  chan struct{}        // receives a token when a result arrives
}

func newCallSet() *callSet {
	return &callSet{names: map[string]string{}, pending: map[string]bool{}, signal: make(chan struct{}, 1)}
}

func (c *callSet) add(id, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.names[id]; dup {
		return
	}
	c.names[id] = name
	c.pending[id] = true
	c.order = append(c.order, id)
}

// has reports whether id is a call of the set still waiting for its result.
func (c *callSet) has(id string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending[id]
}

// deliver records r if its call waits for it.
func (c *callSet) deliver(r *executorv1.Result) bool {
	c.mu.Lock()
	if !c.pending[r.GetToolUseId()] {
		c.mu.Unlock()
		return false
	}
	delete(c.pending, r.GetToolUseId())
	c.results = append(c.results, r)
	c.mu.Unlock()
	select {
	case c.signal <- struct{}{}:
	default:
	}
	return true
}

func (c *callSet) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.order)
}

func (c *callSet) waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// missing returns the calls still without a result, in tool_use order.
func (c *callSet) missing() [][2]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out [][2]string
	for _, id := range c.order {
		if c.pending[id] {
			out = append(out, [2]string{id, c.names[id]})
		}
	}
	return out
}

func (c *callSet) arrived() []*executorv1.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*executorv1.Result(nil), c.results...)
}

// waitAll waits until every call has its result. It returns early when ctx
// ends or the link breaks.
func (c *callSet) waitAll(ctx context.Context, linkDone <-chan struct{}) error {
	for c.waiting() > 0 {
		select {
		case <-c.signal:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-linkDone:
			if c.waiting() > 0 {
				return errLinkLost
			}
		}
	}
	return nil
}

var errLinkLost = errors.New("executor stream lost")
