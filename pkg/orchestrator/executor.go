package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/handshake"
	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
)

// A session's link to its executor: reaching it (opening, reconnecting
// between turns, moving a pooled session to another executor), and the
// events that come back. Resuming in the middle of a turn is in turn.go;
// the protocol itself (streams, retries, replay) is the Executor's.

// alive reports whether l's stream still works.
func alive(l execapi.Link) bool {
	select {
	case <-l.Broken():
		return false
	default:
		return true
	}
}

// connect returns a working link to the session's executor, with the
// tools offered to the model: the link as it is, a broken one reconnected
// (a session loaded from disk reattaches to the executor's session if it
// still exists), or a new one.
//
// A session placed from a pool whose executor cannot be reached (gone, or
// draining) moves to another member of the pool: a fresh executor session,
// which the model is told about, since files, the working directory and
// background tasks stay behind. Between turns no call is running, so
// nothing runs twice.
func (s *Session) connect(ctx context.Context) (execapi.Link, []model.Tool, error) {
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	addr := s.executorAddr()
	placer := s.o.cfg.Placer
	pooled := s.cfg.Pool != "" && placer != nil
	leaving := pooled && placer.Leaving(s.cfg.Pool, addr)
	if s.link != nil && alive(s.link) {
		if !leaving {
			return s.link, s.offered(s.builtins), nil
		}
		// No call runs between model requests: end the executor's session
		// cleanly and move before it goes away under the next calls.
		s.log.Warn("executor is draining; ending the session there", "executor", addr)
		s.link.Close()
		s.link = nil
	}
	var err error
	if leaving {
		err = fmt.Errorf("%w: %s is draining or unreachable", ErrExecutorUnavailable, addr)
	} else {
		err = s.reach(ctx, addr, pooled)
		switch {
		case err == nil:
			return s.link, s.offered(s.builtins), nil
		case !pooled || ctx.Err() != nil || errors.Is(err, ErrSandboxRequirement):
			return nil, nil, err
		}
		if isDraining(err) {
			placer.Draining(s.cfg.Pool, addr)
		}
	}
	if err := s.move(ctx, addr, err); err != nil {
		return nil, nil, err
	}
	return s.link, s.offered(s.builtins), nil
}

// reach links the session to the executor at addr: a broken link
// reconnects, waiting up to the resume window for an executor that cannot
// be reached unless the session can move within its pool instead; a
// session without a link opens one. linkMu is held.
func (s *Session) reach(ctx context.Context, addr string, pooled bool) error {
	if s.link == nil {
		return s.open(ctx, addr)
	}
	window := s.o.cfg.ResumeWindow
	if pooled {
		window = 0
	}
	// What the link reported before is no measure for what comes after:
	// the executor may have a new session for it, numbered afresh.
	s.mu.Lock()
	s.mcpLink = nil
	s.mu.Unlock()
	if err := s.link.Reconnect(ctx, window); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrExecutorUnavailable, addr, err)
	}
	if err := s.linked(); err != nil {
		// An executor that came back (restarted, or replaced) without
		// what is required gets no call.
		s.link.Close()
		s.link = nil
		return err
	}
	return nil
}

// open opens the session on the executor at addr. The tools offered to
// the model are chosen from the executor's at the first connection, and
// the executor runs no call of any other. linkMu is held.
func (s *Session) open(ctx context.Context, addr string) error {
	ex := s.o.cfg.Executor
	if s.builtins == nil {
		defs, err := ex.ListTools(ctx, addr)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrExecutorUnavailable, err)
		}
		// The orchestrator's own tools (task list, Agent) go with the
		// built-ins.
		s.builtins = toolPool(append(builtinTools(defs), localTools(s.o.agents)...), s.cfg.AllowedTools,
			slices.Concat(s.cfg.DisallowedTools, s.deniedLocal()))
	}
	req := execapi.OpenRequest{
		SessionID:     s.id,
		Workspace:     s.cfg.Workspace,
		ClientName:    s.o.cfg.ClientName,
		ClientVersion: s.o.cfg.ClientVersion,
		Tools:         make([]string, 0, len(s.builtins)),
		MCPServers:    mcpclient.Merge(s.cfg.MCPServers, s.o.cfg.MCPServers),
	}
	for _, t := range s.builtins {
		if !isLocal(t.Name) { // the orchestrator runs those
			req.Tools = append(req.Tools, t.Name)
		}
	}
	if s.cfg.Settings != nil {
		req.Settings = *s.cfg.Settings
	}
	if s.cfg.Options != nil {
		req.Options = *s.cfg.Options
	}
	// Only a call that runs a while needs its Started here (print's status
	// line); a short call's Result says when it started.
	req.Options.FoldLifecycle = true
	var l execapi.Link
	var err error
	if s.shared {
		l, err = s.attach(ctx, addr, req)
	} else {
		l, err = ex.Open(ctx, addr, req, s.handleExec)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrExecutorUnavailable, err)
	}
	s.link = l
	if err := s.linked(); err != nil {
		// Nothing was sent yet: ending the executor's session now stops
		// its MCP servers and runs no call there.
		l.Close()
		s.link = nil
		return err
	}
	return nil
}

// move places the session on another executor of its pool after the one
// at addr failed with err, and opens it there. linkMu is held.
func (s *Session) move(ctx context.Context, addr string, err error) error {
	next, release, perr := s.o.cfg.Placer.Place(ctx, s.cfg.Pool)
	if perr != nil {
		return fmt.Errorf("%w (and no other executor of %s: %w)", err, s.cfg.Pool, perr)
	}
	if next == addr {
		release()
		return err
	}
	s.log.Warn("executor unavailable; moving the session to another executor of its pool",
		"from", addr, "to", next, "pool", s.cfg.Pool, "err", err)
	if st := s.o.cfg.Store; st != nil {
		if perr := st.Append(ctx, s.id, transcript.Record{Kind: transcript.KindPlaced, Time: time.Now(), Executor: next}); perr != nil {
			release()
			return fmt.Errorf("persist the move to executor %s: %w", next, perr)
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
	return s.open(ctx, next)
}

// isDraining reports whether err is an executor's refusal because it is
// draining.
func isDraining(err error) bool { return errors.Is(err, execapi.ErrDraining) }

// linked takes in what the executor said when the link (re)attached: its
// sandbox, checked against what the orchestrator and the session require;
// its MCP servers and tools; and its working directory, which the system
// prompt names. linkMu is held.
func (s *Session) linked() error {
	hello := s.link.Hello()
	required := append(handshake.Requirements{}, s.o.cfg.RequireSandbox...)
	for _, w := range s.cfg.RequireSandbox { // validated at creation
		if !slices.Contains(required, w) {
			required = append(required, w)
		}
	}
	info := handshake.Info{Backend: hello.Sandbox.Backend, Enforced: hello.Sandbox.Enforced, Network: hello.Sandbox.Network}
	if err := required.Check(info); err != nil {
		s.log.Warn("executor refused: its sandbox lacks what is required", "executor", s.executorAddr(), "err", err)
		return fmt.Errorf("%w: %s: %w", ErrSandboxRequirement, s.executorAddr(), err)
	}
	s.mu.Lock()
	sb := hello.Sandbox
	s.sandbox = &sb
	// A change reported on this link since it (re)attached, after this
	// Hello, is newer than the Hello; otherwise the Hello is newest.
	if s.mcpLink != s.link || hello.LastSequence >= s.mcpSeq {
		s.mcpTools, s.mcpServers = hello.MCPTools, hello.MCPServers
		s.mcpLink, s.mcpSeq = s.link, hello.LastSequence
	}
	s.mu.Unlock()
	s.system = s.cfg.SystemPrompt
	if s.system == "" {
		s.system = model.SystemPrompt
	}
	if ws := hello.Workspace; ws != "" && s.cfg.SystemPrompt == "" {
		s.system += "\n\nWorking directory: " + ws
	}
	if s.cfg.AppendSystemPrompt != "" {
		s.system += "\n\n" + s.cfg.AppendSystemPrompt
	}
	return nil
}

func (s *Session) systemPrompt() string {
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	return s.system
}

// handleExec handles an executor event; it runs on the link's goroutine.
// Events of calls the current turn does not wait for (replays, calls of a
// turn that ended) are not relayed.
func (s *Session) handleExec(l execapi.Link, ev execapi.Event) {
	cs, parent := s.route(ev)
	s.dispatch(l, ev, cs, parent, ev.Seq)
}

// dispatch handles an executor event for the calls cs, which belong to
// the subagent of Agent call parent, or to the conversation (""). seq is
// the event's number on the conversation's executor session, recorded in
// a shared store; 0 for events of a subagent's own session.
func (s *Session) dispatch(l execapi.Link, ev execapi.Event, cs *callSet, parent string, seq uint64) {
	published := false
	publish := func(e Event) {
		e.execSeq, published = seq, true
		e.ParentToolUseID = parent
		s.publish(e)
	}
	defer func() {
		if !published {
			s.seen(seq)
		}
	}()
	switch {
	case ev.Result != nil:
		if cs != nil {
			// The result's event records seq when it is published, which
			// for a WebFetch page is later, on another goroutine, once its
			// prompt is answered: so not through publish, whose flag this
			// goroutine reads.
			published = true
			s.deliverResult(cs, ev.Result, func(r *execapi.CallResult) {
				s.publish(Event{Kind: EventToolResult, Result: r, ParentToolUseID: parent, execSeq: seq})
			})
		}
	case ev.Started != nil:
		if cs.has(ev.Started.ToolUseID) {
			publish(Event{Kind: EventToolStarted, Started: ev.Started})
		}
	case ev.Progress != nil:
		if cs.has(ev.Progress.ToolUseID) {
			publish(Event{Kind: EventProgress, Progress: ev.Progress})
		}
	case ev.PermissionRequest != nil:
		s.permission(l, cs, ev.PermissionRequest, publish)
	case ev.MCPToolsChanged != nil:
		s.mu.Lock()
		if l != s.mcpLink || ev.Seq > s.mcpSeq {
			s.mcpTools, s.mcpServers = ev.MCPToolsChanged.Tools, ev.MCPToolsChanged.Servers
			s.mcpLink, s.mcpSeq = l, ev.Seq
		}
		s.mu.Unlock()
		s.log.Info("mcp tools changed", "tools", len(ev.MCPToolsChanged.Tools), "servers", len(ev.MCPToolsChanged.Servers))
		publish(Event{Kind: EventMCPToolsChanged, MCPToolsChanged: ev.MCPToolsChanged})
	case ev.CheckpointList != nil:
		s.answer(ev.CheckpointList.RequestID, ev)
	case ev.RestoreResult != nil:
		s.answer(ev.RestoreResult.RequestID, ev)
	case ev.BackgroundAck != nil:
		publish(Event{Kind: EventBackgroundAck, BackgroundAck: ev.BackgroundAck})
	case ev.Task != nil:
		// A task the model stopped itself (TaskStop) is not news to it:
		// like Claude Code, only completed and failed tasks are told.
		if ev.Task.Status != "killed" {
			s.mu.Lock()
			s.notes = append(s.notes, notificationText(ev.Task))
			s.mu.Unlock()
		}
		publish(Event{Kind: EventTaskNotification, Notification: ev.Task})
	}
}

// publishResult tells clients a call's result.
func (s *Session) publishResult(r *execapi.CallResult) {
	s.publish(Event{Kind: EventToolResult, Result: r})
}

func (s *Session) permission(l execapi.Link, cs *callSet, req *execapi.PermissionRequest, publish func(Event)) {
	if !cs.has(req.ToolUseID) {
		// Nobody waits for this call any more (a replay after a restart).
		_ = l.Decide(execapi.PermissionDecision{ToolUseID: req.ToolUseID, Behavior: execapi.PermissionDeny,
			Message: "The turn that made this call has ended."})
		return
	}
	if f := s.o.cfg.Permissions; f != nil {
		if d := f(s.id, *req); d != nil {
			if d.ToolUseID == "" {
				d.ToolUseID = req.ToolUseID
			}
			if err := l.Decide(*d); err != nil {
				s.log.Warn("send permission decision", "tool_use_id", req.ToolUseID, "err", err)
			}
			return
		}
	}
	publish(Event{Kind: EventPermissionRequest, Permission: req})
}

// attach links a session of a shared store to the executor at addr: it
// resumes the executor session after the newest executor event stored when
// the session is bound there (its calls run on, later events are
// replayed), and opens it otherwise; the store then records the binding.
// linkMu is held.
func (s *Session) attach(ctx context.Context, addr string, req execapi.OpenRequest) (execapi.Link, error) {
	st := s.o.cfg.Store
	b, err := st.Binding(ctx, s.id)
	if err != nil {
		return nil, err
	}
	var l execapi.Link
	resumable := b.SessionID == req.SessionID && b.Executor == addr
	if resumable {
		l, err = s.o.cfg.Executor.Attach(ctx, addr, req, b.Seq, s.handleExec)
	} else {
		l, err = s.o.cfg.Executor.Open(ctx, addr, req, s.handleExec)
	}
	if err != nil {
		return nil, err
	}
	if resumable && l.Hello().Resumed {
		return l, nil
	}
	// A new executor session numbers its events from 1.
	if err := st.Bind(ctx, s.id, Binding{Executor: addr, SessionID: req.SessionID}); err != nil {
		l.Detach()
		return nil, fmt.Errorf("record the executor session: %w", err)
	}
	return l, nil
}

// builtinTools drops MCP tools from an executor's list: without a session
// ListTools has none, and a session's come from its Hello.
func builtinTools(defs []execapi.ToolInfo) []execapi.ToolInfo {
	return slices.DeleteFunc(slices.Clone(defs), func(d execapi.ToolInfo) bool {
		return strings.HasPrefix(d.Name, externalToolPrefix)
	})
}
