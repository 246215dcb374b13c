package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/queue"
	"github.com/toolwire/toolwire/pkg/schema"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Errors a session reports to its client (the gRPC edge maps them to
// status codes).
var (
	// ErrSessionClosed: the session has ended.
	ErrSessionClosed = execapi.ErrSessionClosed
	// ErrInvalidToolUse: a ToolUse lacks its id.
	ErrInvalidToolUse = errors.New("invalid tool_use")
)

// call is one tool_use moving through the pipeline.
type call struct {
	use      ToolUse
	tool     *registered // nil for an unknown tool
	input    json.RawMessage
	inputErr error
	prepared any // what the tool's Prepare returned for input, until Run
	safe     bool
	received time.Time
	ctx      context.Context // holds span; never cancelled
	span     trace.Span      // run_tool
	done     chan struct{}   // closed once result is set
	result   *CallResult
	// background is closed to move the running call to the background
	// (Session.Background); set while a Bash call runs. Guarded by the
	// session's mu, as is backgrounded.
	background   chan struct{}
	backgrounded bool
}

// keepFinishedCalls is how many finished calls a session keeps whole, for
// a repeated tool_use id to get the first's Result again.
const keepFinishedCalls = 1000

// finishedCall is what a session keeps of a finished call.
type finishedCall struct {
	result *CallResult
	safe   bool
}

// messageOrder holds back Results of one assistant message until the ones
// before them are out.
type messageOrder struct {
	ids     []string
	results map[string]*Event
	next    int
}

// Session is one conversation's tool-call pipeline.
type Session struct {
	id      string
	client  string // the client identity that opened it
	ex      *Executor
	env     *tool.Env
	opts    SessionOptions
	gate    *gate
	offered map[string]bool // canonical names of the tools the session runs; nil: all
	q       *queue.Queue
	out     *outbox
	log     *slog.Logger
	sandbox SandboxInfo
	mcp     *mcpclient.Set // nil without MCP servers

	mcpChangeMu sync.Mutex // serialises reports of MCP tool changes

	toolsMu  sync.RWMutex // guards mcpTools
	mcpTools map[string]*registered

	mu sync.Mutex // guards the fields below
	// live holds the calls that have no Result yet.
	live map[string]*call
	// done holds what is kept of a call once it has its Result: enough to
	// answer its id again, and no more, since a busy session keeps
	// thousands.
	done map[string]finishedCall
	// finished lists the ids in done, oldest first; past
	// keepFinishedCalls the oldest leave done for ran, which keeps a hash
	// of their id and their tool name for seenCalls more, so that a
	// session's memory is bounded by its live calls and a window, not its
	// history.
	finished  []string
	ran       *seenIDs
	order     map[string]*messageOrder
	errored   map[string]string // assistant message id → id of its failed Bash call
	decisions map[string]chan PermissionDecision
	attachGen uint64
	detach    context.CancelFunc // ends the attached reader
	expiry    *time.Timer        // closes a detached session after the retention window
	closed    bool
	closeOnce sync.Once
	wg        sync.WaitGroup // background goroutines (duplicate replies)
}

// ID returns the session id.
func (s *Session) ID() string { return s.id }

// Env returns the session's tool environment.
func (s *Session) Env() *tool.Env { return s.env }

// Submit takes one tool_use. It never blocks on the call: the call is
// accepted, queued, and its Result comes later as an Event. Submitting an id
// seen before in the session runs nothing and repeats the first outcome.
//
// ctx gives the call's trace parent when use carries no W3C trace context
// (the Execute stream's span); only its span context is used, so ending
// ctx does not stop the call.
func (s *Session) Submit(ctx context.Context, use ToolUse) error {
	if use.ID == "" {
		return fmt.Errorf("%w: tool_use id is empty (tool %q)", ErrInvalidToolUse, use.Name)
	}
	now := time.Now()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrSessionClosed
	}
	if name, dup := s.ran.lookup(use.ID); dup {
		s.mu.Unlock()
		span := s.acceptDuplicate(ctx, use, now, false)
		cr := &CallResult{ToolUseID: use.ID, ToolName: name, ReceivedAt: now, FinishedAt: now,
			Result: tool.UseError(tool.OutcomeInvalidInput, "This tool_use id already ran earlier in this session; its result was sent then.")}
		s.ex.tel.endCall(span, cr)
		s.out.push(&Event{Time: now, Result: cr})
		return nil
	}
	if first, dup := s.live[use.ID]; dup {
		s.mu.Unlock()
		span := s.acceptDuplicate(ctx, use, now, first.safe)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			<-first.done
			s.repeatResult(first.result, span)
		}()
		return nil
	}
	if first, dup := s.done[use.ID]; dup {
		s.mu.Unlock()
		s.repeatResult(first.result, s.acceptDuplicate(ctx, use, now, first.safe))
		return nil
	}
	c := &call{use: use, received: now, done: make(chan struct{})}
	c.ctx, c.span = s.ex.tel.startCall(ctx, s.id, use, now, false)
	s.live[use.ID] = c
	if s.opts.ResultOrder == OrderToolUse {
		o := s.order[use.MessageID]
		if o == nil {
			o = &messageOrder{results: make(map[string]*Event)}
			s.order[use.MessageID] = o
		}
		o.ids = append(o.ids, use.ID)
	}
	s.mu.Unlock()

	// A tool the session does not offer is refused like one that does not
	// exist: before the queue, the permission rules and the hooks.
	t := s.lookup(use.Name)
	if t == nil || !s.offers(t) {
		_, span := s.ex.tel.tracer.Start(c.ctx, spanValidate)
		text, why := schema.UnknownTool(use.Name), "no tool has that name"
		if t != nil {
			text, why = schema.ToolNotEnabled(use.Name), "the session does not offer that tool"
		}
		fail(span, errValidation, why)
		span.End()
		s.out.push(&Event{Time: now, Accepted: &Accepted{ToolUseID: use.ID}})
		s.finish(c, time.Time{}, tool.UseError(tool.OutcomeUnknownTool, text))
		return nil
	}
	c.tool = t
	c.input, c.inputErr = c.tool.validate(use.Input)
	c.safe = c.inputErr == nil && isConcurrencySafe(c.tool, c.input)
	s.out.push(&Event{Time: now, Accepted: &Accepted{ToolUseID: use.ID, ConcurrencySafe: c.safe}})
	s.q.Add(queue.Job{ID: use.ID, Group: use.MessageID, Safe: c.safe, Run: func(ctx context.Context) { s.run(ctx, c) }})
	return nil
}

// offers reports whether the session runs calls of t. The tool set names
// built-in tools; MCP tools come from the session's servers, so the set
// does not hold them back (deny rules do).
func (s *Session) offers(t *registered) bool {
	return s.offered == nil || s.offered[t.canonical()] || s.ex.lookup(t.spec.Name) == nil
}

// toolNames returns the canonical names of the tools the session runs,
// sorted.
func (s *Session) toolNames() []string {
	names := []string{}
	for _, spec := range s.ex.Tools() {
		if s.offered == nil || s.offered[spec.Name] {
			names = append(names, spec.Name)
		}
	}
	return names
}

func isConcurrencySafe(t *registered, input json.RawMessage) bool {
	switch t.spec.Concurrency {
	case tool.ConcurrencyAlways:
		return true
	case tool.ConcurrencyDependsOnInput:
		return t.ConcurrencySafe(input)
	}
	return false
}

// acceptDuplicate starts the span of a repeated tool_use id and sends its
// Accepted, marked as a duplicate.
func (s *Session) acceptDuplicate(ctx context.Context, use ToolUse, now time.Time, safe bool) trace.Span {
	_, span := s.ex.tel.startCall(ctx, s.id, use, now, true)
	s.out.push(&Event{Time: now, Accepted: &Accepted{ToolUseID: use.ID, ConcurrencySafe: safe, Duplicate: true}})
	return span
}

// repeatResult sends the first call's Result again for a duplicate, and
// ends the duplicate's span.
func (s *Session) repeatResult(first *CallResult, span trace.Span) {
	repeated := *first
	repeated.FinishedAt = time.Now()
	s.ex.tel.endCall(span, &repeated)
	s.out.push(&Event{Time: repeated.FinishedAt, Result: first})
}

// run takes a call out of the queue through the pipeline to its Result.
// ctx is the queue's (cancelled on abort); the call's span joins it.
func (s *Session) run(ctx context.Context, c *call) {
	ctx = trace.ContextWithSpan(ctx, c.span)
	tel := s.ex.tel
	var started time.Time
	// end counts an aborted call, then sends its Result: whoever sees the
	// Result sees the count.
	end := func(res *tool.Result) {
		var ac *abortCause
		if ctx.Err() != nil && errors.As(context.Cause(ctx), &ac) {
			tel.aborts.Add(ctx, 1, tel.with(attrsKey{k1: keyToolName, v1: c.metricToolName(), k2: keyAbortReason, v2: ac.reason.String()}))
		}
		s.finish(c, started, res)
	}
	defer func() {
		if v := recover(); v != nil {
			s.log.ErrorContext(ctx, "tool panicked", "tool", c.use.Name, "tool_use_id", c.use.ID, "panic", v)
			end(panicResult(c.use.Name, v))
		}
	}()
	if ctx.Err() != nil {
		_, wait := tel.tracer.Start(ctx, spanQueueWait, trace.WithTimestamp(c.received))
		wait.End()
		end(interruptedResult(context.Cause(ctx)))
		return
	}
	started = time.Now()
	_, wait := tel.tracer.Start(ctx, spanQueueWait, trace.WithTimestamp(c.received))
	wait.End(trace.WithTimestamp(started))
	toolName := tel.toolAttrs(c.metricToolName())
	tel.queueWait.Record(ctx, started.Sub(c.received).Seconds(), toolName)
	tel.inFlight.Add(ctx, 1, toolName)
	s.out.push(&Event{Time: started, Started: &Started{ToolUseID: c.use.ID, QueueWait: started.Sub(c.received)}})
	end(s.execute(ctx, c))
}

// validate runs the checks of a call that left the queue under a validate
// span: the parse and schema verdict reached on arrival, then the tool's
// own checks. It returns the Result of a call that fails them.
func (s *Session) validate(ctx context.Context, c *call) *tool.Result {
	vctx, span := s.ex.tel.tracer.Start(ctx, spanValidate)
	defer span.End()
	if c.inputErr != nil {
		fail(span, errValidation, "input does not match the tool's schema")
		return tool.UseError(tool.OutcomeInvalidInput, c.inputErr.Error())
	}
	var err error
	if p, ok := c.tool.Tool.(tool.Preparer); ok {
		c.prepared, err = p.Prepare(vctx, s.env, c.input)
	} else {
		err = c.tool.Validate(vctx, s.env, c.input)
	}
	if err != nil {
		fail(span, errValidation, "the tool's checks refused the input")
		return tool.ValidationResult(err)
	}
	return nil
}

// permission runs the permission step (rules, PreToolUse hooks, the
// client's answer) under a permission span. It returns what before does.
func (s *Session) permission(ctx context.Context, c *call) (json.RawMessage, string, *tool.Result) {
	_, span := s.ex.tel.tracer.Start(ctx, spanPermission)
	defer span.End()
	input, v, denied := s.gate.before(ctx, s, c)
	s.ex.tel.recordDecision(ctx, span, v)
	return input, v.decidedBy, denied
}

// execute validates, authorises and runs a call that left the queue.
func (s *Session) execute(ctx context.Context, c *call) *tool.Result {
	name := c.tool.spec.Name
	if res := s.validate(ctx, c); res != nil {
		return res
	}
	input, decidedBy, denied := s.permission(ctx, c)
	if denied != nil {
		denied.DecidedBy = decidedBy
		return denied
	}
	if ctx.Err() != nil {
		return interruptedResult(context.Cause(ctx))
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if c.use.Timeout > 0 {
		// Tools with their own timeout (Bash) get the call timeout too and
		// stop first; this deadline, a little later, catches the others.
		runCtx, cancel = context.WithTimeoutCause(ctx, c.use.Timeout+time.Second, errCallTimeout)
	}
	defer cancel()
	prepared := c.prepared
	c.prepared = nil // the call is kept after its end; this is not needed then
	if !bytes.Equal(input, c.input) {
		prepared = nil // a hook rewrote the input
	}
	var finished atomic.Bool
	res := c.tool.Run(runCtx, s.env, &tool.Call{
		ID:         c.use.ID,
		Name:       name,
		Input:      input,
		Prepared:   prepared,
		Timeout:    c.use.Timeout,
		Background: s.backgroundable(c),
		Progress: func(p tool.Progress) {
			if finished.Load() {
				return
			}
			s.out.pushProgress(&Event{Time: time.Now(), Progress: &Progress{
				ToolUseID: c.use.ID, Output: p.Output, Elapsed: p.Elapsed,
				TotalLines: p.TotalLines, TotalBytes: p.TotalBytes, Dropped: p.Dropped,
			}})
		},
	})
	finished.Store(true)
	switch {
	case ctx.Err() != nil:
		return withPartialOutput(interruptedResult(context.Cause(ctx)), res)
	case errors.Is(context.Cause(runCtx), errCallTimeout) && res.FinalOutcome() != tool.OutcomeTimeout:
		return timeoutResult(c.use.Timeout)
	case res == nil:
		return panicResult(name, "no result")
	}
	res.DecidedBy = decidedBy
	return s.gate.after(ctx, s, c, input, res)
}

// finish records a call's Result, applies sibling abort and emits it in the
// session's result order.
func (s *Session) finish(c *call, started time.Time, res *tool.Result) {
	if res.Outcome == 0 {
		res.Outcome = res.FinalOutcome()
	}
	cr := &CallResult{ToolUseID: c.use.ID, ToolName: c.use.Name, Result: res,
		ReceivedAt: c.received, StartedAt: started, FinishedAt: time.Now()}
	if c.tool != nil {
		cr.ToolName = c.tool.spec.Name
	}
	tel := s.ex.tel
	if !started.IsZero() {
		tel.inFlight.Add(c.ctx, -1, tel.toolAttrs(c.metricToolName()))
	}
	tel.recordResult(c.ctx, c.metricToolName(), cr)
	tel.endCall(c.span, cr)
	s.mu.Lock()
	c.result = cr
	delete(s.live, c.use.ID)
	s.done[c.use.ID] = finishedCall{result: cr, safe: c.safe}
	close(c.done)
	s.finished = append(s.finished, c.use.ID)
	if len(s.finished) > keepFinishedCalls {
		old := s.finished[0]
		s.finished[0] = ""
		s.finished = s.finished[1:]
		if oc, ok := s.done[old]; ok {
			s.ran.add(old, oc.result.ToolName)
			delete(s.done, old)
		}
	}
	s.mu.Unlock()
	// The failed call's Result goes out before its siblings are stopped, so
	// that in completion order the cause comes before its effects.
	if c.tool != nil && cr.ToolName == "Bash" && !s.opts.NoSiblingAbort &&
		(res.Outcome == tool.OutcomeToolError || res.Outcome == tool.OutcomeTimeout) {
		defer s.abortSiblings(c)
	}
	s.emit(c, &Event{Time: cr.FinishedAt, Result: cr})
}

// emit sends a call's Result in the session's result order.
func (s *Session) emit(c *call, ev *Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.ResultOrder == OrderCompletion {
		s.out.push(ev)
		return
	}
	o := s.order[c.use.MessageID]
	o.results[c.use.ID] = ev
	for o.next < len(o.ids) {
		next, ok := o.results[o.ids[o.next]]
		if !ok {
			break
		}
		delete(o.results, o.ids[o.next])
		o.ids[o.next] = ""
		o.next++
		s.out.push(next)
	}
	if o.next == len(o.ids) {
		// Every Result of the message is out: a later tool_use of it
		// starts a new order.
		delete(s.order, c.use.MessageID)
	}
}

// abortSiblings stops the unfinished calls of failed's assistant message.
func (s *Session) abortSiblings(failed *call) {
	msg := failed.use.MessageID
	s.mu.Lock()
	if _, already := s.errored[msg]; !already {
		s.errored[msg] = failed.use.ID
	}
	s.mu.Unlock()
	s.q.Abort(func(id, group string) bool { return group == msg && id != failed.use.ID },
		&abortCause{reason: AbortSiblingError, by: failed.use.ID})
}

// Abort stops the calls a selects. An AbortAck naming them is emitted before
// their Results. Unknown or finished ids are ignored.
func (s *Session) Abort(a Abort) {
	if a.Reason == 0 {
		a.Reason = AbortUserInterrupted
	}
	match := func(id, group string) bool {
		return a.All || (a.ToolUseID != "" && id == a.ToolUseID) || (a.MessageID != "" && group == a.MessageID)
	}
	s.mu.Lock()
	var ids []string
	for id, c := range s.live {
		if match(id, c.use.MessageID) {
			ids = append(ids, id)
		}
	}
	s.out.push(&Event{Time: time.Now(), AbortAck: &AbortAck{Abort: a, ToolUseIDs: ids}})
	s.mu.Unlock()
	s.q.Abort(match, &abortCause{reason: a.Reason})
}

// Decide delivers a client's answer to a permission request. An answer for a
// call that is not waiting is ignored.
func (s *Session) Decide(d PermissionDecision) {
	s.mu.Lock()
	ch := s.decisions[d.ToolUseID]
	s.mu.Unlock()
	if ch == nil {
		s.log.Warn("permission decision for a call that is not waiting", "tool_use_id", d.ToolUseID)
		return
	}
	select {
	case ch <- d:
	default:
	}
}

// awaitDecision publishes a permission request and waits for the client's
// answer, the permission timeout, or the call's end.
func (s *Session) awaitDecision(ctx context.Context, req PermissionRequest) (PermissionDecision, error) {
	ch := make(chan PermissionDecision, 1)
	s.mu.Lock()
	s.decisions[req.ToolUseID] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.decisions, req.ToolUseID)
		s.mu.Unlock()
	}()
	s.out.push(&Event{Time: time.Now(), PermissionRequest: &req})
	timer := time.NewTimer(s.opts.PermissionTimeout)
	defer timer.Stop()
	select {
	case d := <-ch:
		return d, nil
	case <-timer.C:
		return PermissionDecision{}, fmt.Errorf("no permission decision within %s", s.opts.PermissionTimeout)
	case <-ctx.Done():
		return PermissionDecision{}, context.Cause(ctx)
	}
}

// Attach makes the caller the session's event reader. It returns a Hello,
// the logged events above after to replay (all of them when resumed is
// false, i.e. none for a new session), whether the replay is complete, and a
// context that ends when another reader attaches. Call Detach when done.
func (s *Session) Attach(ctx context.Context, resumed bool, after uint64) (hello *Event, replay []*Event, complete bool, readCtx context.Context, gen uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, false, nil, 0, ErrSessionClosed
	}
	if s.detach != nil {
		s.detach()
	}
	if s.expiry != nil {
		s.expiry.Stop()
		s.expiry = nil
	}
	s.attachGen++
	readCtx, s.detach = context.WithCancel(ctx)
	s.out.attach()
	complete = true
	if resumed {
		replay, complete = s.out.replay(after)
	}
	hello = s.out.numbered(&Event{Time: time.Now(), Hello: s.ex.hello(s, resumed)})
	hello.Hello.LastSequence = hello.Seq - 1
	return hello, replay, complete, readCtx, s.attachGen, nil
}

// Next returns the session's next event for the attached reader.
func (s *Session) Next(ctx context.Context) (*Event, error) { return s.out.next(ctx) }

// Detach ends reader gen's attachment. If no other reader attached since,
// the session stays alive for the retention window, then closes.
func (s *Session) Detach(gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen != s.attachGen || s.closed {
		return
	}
	s.detach()
	s.detach = nil
	s.expiry = time.AfterFunc(s.ex.cfg.Retention, func() {
		s.log.Info("session expired after disconnect", "retention", s.ex.cfg.Retention)
		s.Close(&abortCause{reason: AbortShutdown})
	})
}

// Finish ends the session once every submitted call has its Result: the
// client said it has nothing more to send. Events keep flowing until then.
func (s *Session) Finish() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			s.mu.Lock()
			var pending *call
			for _, c := range s.live {
				pending = c
				break
			}
			s.mu.Unlock()
			if pending == nil {
				break
			}
			<-pending.done
		}
		s.closeNow(&abortCause{reason: AbortShutdown}, false)
	}()
}

// Close aborts every unfinished call with cause (their interrupted Results
// are still emitted), kills the session's processes, and removes the
// session. It waits for the calls to end.
func (s *Session) Close(cause error) { s.closeNow(cause, true) }

func (s *Session) closeNow(cause error, wait bool) {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		if s.expiry != nil {
			s.expiry.Stop()
		}
		s.mu.Unlock()
		s.q.Close(cause)
		s.env.Close()
		s.out.close()
		s.ex.forget(s)
		s.log.Info("session closed")
	})
	if wait {
		s.wg.Wait()
	}
}
