package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/rpcerr"
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
	executor string   // address of the executor the session runs on
	release  func()   // frees the session's place on a pooled executor; may be nil
	notes    []string // task notifications not yet told to the model
	closed   bool
}

func newSession(o *Orchestrator, id string, cfg SessionConfig, created time.Time) *Session {
	ctx, cancel := context.WithCancel(o.ctx)
	return &Session{
		o: o, id: id, cfg: cfg, created: created, executor: cfg.Executor,
		log:    o.log.With("session_id", id),
		events: newEventLog(o.cfg.EventBacklog),
		ctx:    ctx, cancel: cancel,
	}
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
	cfg = cfg.withDefaults(s.o.cfg.Defaults)
	if err := cfg.validate(); err != nil {
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
		if err := st.append(s.id, record{Type: recConfig, Time: time.Now(), Config: &cfg}); err != nil {
			return fmt.Errorf("persist the new configuration: %w", err)
		}
	}
	s.cfg = cfg
	s.tools = nil // offered again from the new lists when it connects
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
	defer s.mu.Unlock()
	return Info{
		ID: s.id, Executor: s.executor, Model: s.model(), CreatedAt: s.created,
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
//
// A session placed from a pool whose executor cannot be reached (gone, or
// draining) moves to another member of the pool: a fresh executor session,
// which the model is told about, since files, the working directory and
// background tasks stay behind. Between turns no call is running, so
// nothing runs twice.
func (s *Session) connect(ctx context.Context) (*link, []model.Tool, error) {
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	addr := s.executorAddr()
	pooled := s.cfg.Pool != "" && s.o.cfg.Placer != nil
	leaving := pooled && s.o.cfg.Placer.Leaving(s.cfg.Pool, addr)
	if s.link != nil && s.link.alive() {
		if !leaving {
			return s.link, s.tools, nil
		}
		// No call runs between model requests: end the executor's session
		// cleanly and move before it goes away under the next calls.
		s.log.Warn("executor is draining; ending the session there", "executor", addr)
		s.link.close()
	}
	var err error
	if leaving {
		err = fmt.Errorf("%w: %s is draining or unreachable", ErrExecutorUnavailable, addr)
	} else {
		broken := s.link != nil
		l, tools, cerr := s.connectTo(ctx, addr)
		if cerr != nil && broken && !pooled {
			l, tools, cerr = s.reconnect(ctx, addr, cerr)
		}
		if cerr == nil || !pooled || !errors.Is(cerr, ErrExecutorUnavailable) || ctx.Err() != nil {
			return l, tools, cerr
		}
		err = cerr
	}
	next, release, perr := s.o.cfg.Placer.Place(ctx, s.cfg.Pool)
	if perr != nil {
		return nil, nil, fmt.Errorf("%w (and no other executor of %s: %w)", err, s.cfg.Pool, perr)
	}
	if next == addr {
		release()
		return nil, nil, err
	}
	s.log.Warn("executor unavailable; moving the session to another executor of its pool",
		"from", addr, "to", next, "pool", s.cfg.Pool, "err", err)
	if st := s.o.cfg.Store; st != nil {
		if perr := st.append(s.id, record{Type: recPlaced, Time: time.Now(), Executor: next}); perr != nil {
			release()
			return nil, nil, fmt.Errorf("persist the move to executor %s: %w", next, perr)
		}
	}
	s.mu.Lock()
	s.executor = next
	s.notes = append(s.notes, fmt.Sprintf(textMoved, addr))
	old := s.release
	s.release = release
	s.mu.Unlock()
	if old != nil {
		old()
	}
	s.link = nil
	return s.connectTo(ctx, next)
}

// reconnect keeps trying to reach the session's only executor after its
// stream broke and a first attempt failed with err: the link may come back
// after the executor dropped the session (a cut longer than its
// retention), and then a new session there lets the conversation go on.
// It retries only failures that waiting can cure (the executor unreachable
// or not answering), with backoff for the resume window and each attempt
// bounded like a resume attempt, then gives up with the last error. linkMu
// is held.
func (s *Session) reconnect(ctx context.Context, addr string, err error) (*link, []model.Tool, error) {
	deadline := time.Now().Add(s.o.cfg.ResumeWindow)
	pause := resumeFirstPause
	if transient(err) {
		s.log.Warn("executor unreachable; retrying", "executor", addr, "for", s.o.cfg.ResumeWindow, "err", err)
	}
	for transient(err) && time.Now().Add(pause).Before(deadline) {
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, context.Cause(ctx)
		case <-t.C:
		}
		pause = min(2*pause, resumeMaxPause)
		actx, cancel := context.WithTimeout(ctx, resumeAttempt)
		l, tools, cerr := s.connectTo(actx, addr) // the stream itself outlives actx
		cancel()
		if cerr == nil {
			return l, tools, nil
		}
		err = cerr
	}
	return nil, nil, err
}

// transient reports whether a failure to reach the executor may pass by
// itself: it is unreachable or did not answer in time (statuses gRPC makes
// itself, without a reason), or it is draining and may come back.
// Refusals (authentication, permission, a bad request) do not.
func transient(err error) bool {
	switch rpcerr.Reason(err) {
	case rpcerr.Draining:
		return true
	case "":
		switch status.Code(err) {
		case codes.Unavailable, codes.DeadlineExceeded:
			return true
		}
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// connectTo opens or resumes the session's stream to the executor at addr.
// linkMu is held.
func (s *Session) connectTo(ctx context.Context, addr string) (*link, []model.Tool, error) {
	client, err := s.o.cfg.Dial(ctx, addr)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrExecutorUnavailable, addr, err)
	}
	openResume := func(after uint64, stale bool) (*link, error) {
		return openLink(ctx, client, &executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Resume{Resume: &executorv1.Resume{
			SessionId: s.id, LastSequence: after,
		}}}, stale, s.handleExec)
	}
	if s.tools == nil {
		list, err := client.ListTools(ctx, &executorv1.ListToolsRequest{})
		if err != nil {
			return nil, nil, fmt.Errorf("%w: list tools: %w", ErrExecutorUnavailable, err)
		}
		s.tools = toolPool(list.GetTools(), s.cfg.AllowedTools, s.cfg.DisallowedTools)
	}
	// The executor runs no call of a tool the model was not offered.
	offered := &executorv1.ToolSet{Names: make([]string, 0, len(s.tools))}
	for _, t := range s.tools {
		offered.Names = append(offered.Names, t.Name)
	}
	open := func() (*link, error) {
		return openLink(ctx, client, &executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{
			SessionId:     s.id,
			Workspace:     s.cfg.Workspace,
			Options:       s.cfg.Options,
			Settings:      s.cfg.Settings,
			ClientName:    s.o.cfg.ClientName,
			ClientVersion: s.o.cfg.ClientVersion,
			Tools:         offered,
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
			reason := rpcerr.Reason(err)
			retry = reason == rpcerr.SessionNotFound || reason == rpcerr.SessionClosed
		} else {
			l, err = open()
			if retry = rpcerr.Reason(err) == rpcerr.SessionExists; retry {
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
	s.system = s.cfg.SystemPrompt
	if s.system == "" {
		s.system = model.SystemPrompt
	}
	if ws := l.hello.GetWorkspace(); ws != "" && s.cfg.SystemPrompt == "" {
		s.system += "\n\nWorking directory: " + ws
	}
	if s.cfg.AppendSystemPrompt != "" {
		s.system += "\n\n" + s.cfg.AppendSystemPrompt
	}
	s.link = l
	s.log.Info("connected to executor", "executor", addr, "resumed", l.hello.GetResumed(),
		"executor_version", l.hello.GetExecutorVersion(), "sandbox", l.hello.GetSandbox().GetBackend())
	return l, s.tools, nil
}

// Backoff between attempts to resume a broken stream.
const (
	resumeFirstPause = 50 * time.Millisecond
	resumeMaxPause   = time.Second
	resumeAttempt    = 10 * time.Second // bound on one attempt (dial, hello)
)

// resume reattaches to the executor's session after old broke, retrying
// with backoff for the resume window (capped by the executor's retention).
// It never opens a new session: the calls already sent may have run and
// must not run again; a session the executor no longer has is an error.
// On success the new stream is the session's link, and the events after
// the last one old received have been replayed to handleExec.
func (s *Session) resume(ctx context.Context, old *link) (*link, error) {
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	if s.link != old && s.link != nil && s.link.alive() {
		return s.link, nil // resumed by someone else meanwhile
	}
	window := s.o.cfg.ResumeWindow
	if r := old.hello.GetResumeRetention().AsDuration(); r > 0 && r < window {
		window = r
	}
	after := old.lastSeq.Load()
	s.log.Warn("executor stream broke; resuming", "executor", s.executorAddr(), "after", after, "window", window, "err", old.err)
	start := time.Now()
	deadline := start.Add(window)
	pause := resumeFirstPause
	for attempt := 1; ; attempt++ {
		l, err := s.resumeOnce(ctx, after)
		if err == nil {
			s.link = l
			s.log.Info("executor session resumed", "executor", s.executorAddr(), "attempts", attempt,
				"after", after, "took", time.Since(start))
			return l, nil
		}
		if r := rpcerr.Reason(err); r == rpcerr.SessionNotFound || r == rpcerr.SessionClosed {
			return nil, fmt.Errorf("the executor no longer has the session: %w", err)
		}
		if !time.Now().Add(pause).Before(deadline) {
			return nil, fmt.Errorf("could not resume within %s (%d attempts): %w", window, attempt, err)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		case <-t.C:
		}
		pause = min(2*pause, resumeMaxPause)
	}
}

// resumeOnce makes one attempt to reattach to the executor's session.
func (s *Session) resumeOnce(ctx context.Context, after uint64) (*link, error) {
	actx, cancel := context.WithTimeout(ctx, resumeAttempt)
	defer cancel()
	client, err := s.o.cfg.Dial(actx, s.executorAddr())
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	return openLink(actx, client, &executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Resume{Resume: &executorv1.Resume{
		SessionId: s.id, LastSequence: after,
	}}}, false, s.handleExec)
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
		if cs != nil {
			cs.deliver(ev.Result, s.publishResult)
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

// publishResult tells clients a call's result.
func (s *Session) publishResult(r *executorv1.Result) {
	s.publish(Event{Kind: EventToolResult, Result: r})
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
	s.mu.Lock()
	release := s.release
	s.release = nil
	s.mu.Unlock()
	if release != nil {
		release()
	}
}

// callSet tracks the calls of one model response until each has a result.
type callSet struct {
	mu      sync.Mutex                     // guards the fields below
	uses    map[string]*executorv1.ToolUse // every call, by tool_use id, as sent
	spans   map[string]trace.Span          // the span of each call without a result
	pending map[string]bool
	order   []string
	results []*executorv1.Result // in arrival order
	signal  chan struct{}        // receives a token when a result arrives
}

func newCallSet() *callSet {
	return &callSet{uses: map[string]*executorv1.ToolUse{}, spans: map[string]trace.Span{}, pending: map[string]bool{}, signal: make(chan struct{}, 1)}
}

// add records a call and its span, which ends with the call's result.
func (c *callSet) add(use *executorv1.ToolUse, span trace.Span) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.uses[use.GetId()]; dup {
		span.End()
		return
	}
	c.uses[use.GetId()] = use
	c.spans[use.GetId()] = span
	c.pending[use.GetId()] = true
	c.order = append(c.order, use.GetId())
}

// unfinished returns the calls still waiting for a result, in tool_use
// order, as they were sent.
func (c *callSet) unfinished() []*executorv1.ToolUse {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*executorv1.ToolUse
	for _, id := range c.order {
		if c.pending[id] {
			out = append(out, c.uses[id])
		}
	}
	return out
}

func (c *callSet) has(id string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending[id]
}

// deliver records r if its call waits for it, and reports whether it did.
// announce (publishResult) runs before the turn waiting for the calls can
// see r: the tool_result event is out before the turn goes on and
// publishes what follows it (the next request's events, turn_complete).
func (c *callSet) deliver(r *executorv1.Result, announce func(*executorv1.Result)) bool {
	c.mu.Lock()
	if !c.pending[r.GetToolUseId()] {
		c.mu.Unlock()
		return false
	}
	announce(r)
	delete(c.pending, r.GetToolUseId())
	c.results = append(c.results, r)
	span := c.spans[r.GetToolUseId()]
	delete(c.spans, r.GetToolUseId())
	c.mu.Unlock()
	if span != nil {
		endToolCall(span, r)
	}
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

// missing returns the calls still without a result, in tool_use order, as
// (id, tool name) pairs.
func (c *callSet) missing() [][2]string {
	var out [][2]string
	for _, u := range c.unfinished() {
		out = append(out, [2]string{u.GetId(), u.GetName()})
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
