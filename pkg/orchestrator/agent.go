package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator/agents"
	"github.com/toolwire/toolwire/pkg/schema"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Subagents: an Agent call runs a sub-conversation with the model, with
// its own system prompt and a subset of the conversation's tools, and its
// final text becomes the call's result. Its calls run on the
// conversation's executor session, or, with Config.SubagentsOnPool and a
// session placed from a pool, on an executor session of its own placed on
// the pool. Its events carry the Agent call's id (ParentToolUseID) and its
// spans are children of the Agent call's. The call's context ends with an
// interrupt: the subagent then aborts its calls, and every one of its
// tool_use blocks still gets a result.

// agentRegistry is a session's running subagents.
type agentRegistry struct {
	placing sync.Mutex // serialises the placing of subagents on a pool

	mu      sync.Mutex           // guards running
	running map[string]*subagent // by the Agent call's tool_use id
}

func (r *agentRegistry) add(a *subagent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running == nil {
		r.running = map[string]*subagent{}
	}
	r.running[a.parent] = a
}

func (r *agentRegistry) remove(a *subagent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, a.parent)
}

// owner returns the running subagent that waits for call id, or nil.
func (r *agentRegistry) owner(id string) *subagent {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.running {
		if a.callSet().has(id) {
			return a
		}
	}
	return nil
}

// executors returns the executors that running subagents with sessions of
// their own run on.
func (r *agentRegistry) executors() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]bool{}
	for _, a := range r.running {
		if a.own {
			out[a.addr] = true
		}
	}
	return out
}

// subagent is one running Agent call.
type subagent struct {
	s      *Session
	id     string // the agent's id, in its result's trailer
	parent string // the Agent call's tool_use id
	def    agents.Definition
	tools  []model.Tool
	system string
	model  string

	link    execapi.Link
	own     bool   // link is the subagent's own executor session
	addr    string // its executor, when own
	release func() // frees its place on the pool, when own

	mu sync.Mutex // guards cs
	cs *callSet   // calls of the response being handled
}

func (a *subagent) callSet() *callSet {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cs
}

// publish tells clients a subagent event.
func (a *subagent) publish(ev Event) {
	ev.ParentToolUseID = a.parent
	a.s.publish(ev)
}

func (a *subagent) announce(r *execapi.CallResult) {
	a.publish(Event{Kind: EventToolResult, Result: r})
}

// route returns the calls waiting for the executor event ev and the
// Agent call they belong to ("" for the conversation's own).
func (s *Session) route(ev execapi.Event) (*callSet, string) {
	s.mu.Lock()
	cs := s.calls
	s.mu.Unlock()
	var id string
	switch {
	case ev.Result != nil:
		id = ev.Result.ToolUseID
	case ev.Started != nil:
		id = ev.Started.ToolUseID
	case ev.Progress != nil:
		id = ev.Progress.ToolUseID
	case ev.PermissionRequest != nil:
		id = ev.PermissionRequest.ToolUseID
	}
	if id == "" || cs.has(id) {
		return cs, ""
	}
	if a := s.agents.owner(id); a != nil {
		return a.callSet(), a.parent
	}
	return cs, ""
}

// linkFor returns the link that runs call id: a subagent's own, or the
// session's.
func (s *Session) linkFor(id string) execapi.Link {
	if a := s.agents.owner(id); a != nil && a.own {
		return a.link
	}
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	return s.link
}

// Texts of subagent results.
const (
	textAgentFailed   = "The agent failed: %v"
	textAgentNoAnswer = "The agent ended without a final message."
)

// runAgent runs the subagent of an Agent call and returns the call's
// result, and what to do once the result is delivered (close the
// subagent's own executor session).
func (s *Session) runAgent(ctx context.Context, c *localCall) (res *tool.Result, cleanup func()) {
	cleanup = func() {}
	start := time.Now()
	raw, err := schema.Validate(c.use.Name, []byte(agents.InputSchema), c.use.Input)
	if err != nil {
		return tool.ValidationResult(err), cleanup
	}
	in, err := agents.ParseInput(raw)
	if err != nil {
		return tool.UseError(tool.OutcomeInvalidInput, err.Error()), cleanup
	}
	def, ok := s.o.agents.Lookup(in.SubagentType)
	if !ok {
		return tool.UseError(tool.OutcomeInvalidInput, fmt.Sprintf("Agent type '%s' not found. Available agents: %s",
			in.SubagentType, strings.Join(s.o.agents.Names(), ", "))), cleanup
	}
	a := &subagent{s: s, id: newAgentID(), parent: c.use.ID, def: def, link: c.link, model: s.model()}
	names := make([]string, 0, len(c.tools))
	for _, t := range c.tools {
		names = append(names, t.Name)
	}
	allowed := agents.ToolsFor(def, names)
	for _, t := range c.tools {
		if slices.Contains(allowed, t.Name) {
			a.tools = append(a.tools, t)
		}
	}
	switch def.Model {
	case "", "sonnet", "opus", "haiku":
		// Aliases name a model family, not a model: the conversation's
		// model answers.
	default:
		a.model = def.Model
	}

	ctx, span := tracer().Start(ctx, "invoke_agent "+def.Name, trace.WithAttributes(
		attrOperation.String("invoke_agent"),
		attrAgentName.String(def.Name),
		attrConversationID.String(s.id),
	))
	defer span.End()

	if s.o.cfg.SubagentsOnPool && s.cfg.Pool != "" && s.o.cfg.Placer != nil {
		if err := s.openAgentSession(ctx, a); err != nil {
			span.SetStatus(codes.Error, err.Error())
			return tool.Error(fmt.Sprintf(textAgentFailed, err)), cleanup
		}
		cleanup = func() {
			a.link.Close()
			a.release()
		}
	} else {
		s.agents.add(a)
	}
	defer s.agents.remove(a)
	a.system = a.systemPrompt()

	s.log.Info("subagent started", "agent", def.Name, "agent_id", a.id, "tool_use_id", a.parent, "own_session", a.own, "executor", a.addr)
	text, usage, uses, err := a.run(ctx, in.Prompt)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		if ctx.Err() != nil {
			return syntheticResult(c.use.ID, c.use.Name, textInterrupted).Result, cleanup
		}
		return tool.Error(fmt.Sprintf(textAgentFailed, err)), cleanup
	}
	res = &tool.Result{}
	for _, t := range text {
		res.Content = append(res.Content, tool.Content{Text: t})
	}
	if len(res.Content) == 0 {
		res.Content = append(res.Content, tool.Content{Text: textAgentNoAnswer})
	}
	res.Content = append(res.Content, tool.Content{Text: agents.Trailer(a.id, agents.Usage{
		TotalTokens: usage.InputTokens + usage.OutputTokens + usage.CacheReadInputTokens + usage.CacheCreationInputTokens,
		ToolUses:    uses,
		DurationMS:  time.Since(start).Milliseconds(),
	})})
	return res, cleanup
}

func newAgentID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "a" + hex.EncodeToString(b[:])
}

// systemPrompt is the agent's prompt with the working directory its
// executor session gave.
func (a *subagent) systemPrompt() string {
	p := a.def.Prompt
	if p == "" {
		p = model.SystemPrompt
	}
	if ws := a.link.Hello().Workspace; ws != "" {
		p += "\n\nWorking directory: " + ws
	}
	return p
}

// openAgentSession opens an executor session of a's own on the session's
// pool, on a member no other running subagent of the session uses when
// the pool has one.
func (s *Session) openAgentSession(ctx context.Context, a *subagent) error {
	s.agents.placing.Lock()
	defer s.agents.placing.Unlock()
	busy := s.agents.executors()
	type place struct {
		addr    string
		release func()
	}
	var tried []place
	chosen := -1
	// Each Place counts a session on the member it returns, so asking
	// again moves on to the next least-loaded member.
	for range 4 {
		addr, release, err := s.o.cfg.Placer.Place(ctx, s.cfg.Pool)
		if err != nil {
			break
		}
		tried = append(tried, place{addr, release})
		if !busy[addr] {
			chosen = len(tried) - 1
			break
		}
	}
	if len(tried) == 0 {
		return fmt.Errorf("%w: no executor of %s for the subagent", ErrExecutorUnavailable, s.cfg.Pool)
	}
	if chosen < 0 {
		chosen = 0
	}
	for i, p := range tried {
		if i != chosen {
			p.release()
		}
	}
	a.addr, a.release = tried[chosen].addr, tried[chosen].release
	req := execapi.OpenRequest{
		SessionID:     s.id + "-" + a.id,
		Workspace:     s.cfg.Workspace,
		ClientName:    s.o.cfg.ClientName,
		ClientVersion: s.o.cfg.ClientVersion,
		Tools:         []string{},
		MCPServers:    mcpclient.Merge(s.cfg.MCPServers, s.o.cfg.MCPServers),
	}
	for _, t := range a.tools {
		if !isLocal(t.Name) {
			req.Tools = append(req.Tools, t.Name)
		}
	}
	if s.cfg.Settings != nil {
		req.Settings = *s.cfg.Settings
	}
	if s.cfg.Options != nil {
		req.Options = *s.cfg.Options
	}
	l, err := s.o.cfg.Executor.Open(ctx, a.addr, req, func(l execapi.Link, ev execapi.Event) {
		if ev.MCPToolsChanged != nil {
			return // the conversation's MCP tools are its own session's
		}
		s.dispatch(l, ev, a.callSet(), a.parent, 0)
	})
	if err != nil {
		a.release()
		return fmt.Errorf("%w: %s: %w", ErrExecutorUnavailable, a.addr, err)
	}
	a.link, a.own = l, true
	s.agents.add(a) // while placing is held: the next subagent sees this one's executor
	return nil
}

// run is the subagent's query loop: like a turn, without a transcript of
// its own. It returns the text blocks of the final message, the tokens
// used and the number of tool calls made.
func (a *subagent) run(ctx context.Context, prompt string) (text []string, usage model.Usage, uses int, err error) {
	s := a.s
	first := model.Message{Role: model.RoleUser, Content: []model.Block{model.TextBlock(prompt)}}
	msgs := []model.Message{first}
	a.publish(Event{Kind: EventMessage, Message: &first})
	maxTurns := s.cfg.MaxTurns
	if maxTurns <= 0 {
		maxTurns = DefaultMaxTurns
	}
	for requests := 0; ; requests++ {
		if ctx.Err() != nil {
			return nil, usage, uses, context.Cause(ctx)
		}
		if requests >= maxTurns {
			return nil, usage, uses, fmt.Errorf("reached the limit of %d model requests", maxTurns)
		}
		resp, cs, streamErr := a.request(ctx, msgs)
		var msg model.Message
		if resp != nil {
			usage = usage.Add(resp.Usage)
			if msg = resp.Message(); len(msg.Content) > 0 {
				msgs = append(msgs, msg)
				a.publish(Event{Kind: EventMessage, Message: &msg, MessageID: resp.ID})
			}
		}
		if streamErr != nil && ctx.Err() == nil && cs.count() == 0 {
			return nil, usage, uses, streamErr
		}
		var results []model.Block
		if cs.count() > 0 {
			uses += cs.count()
			results = a.collect(ctx, cs)
		}
		if ctx.Err() != nil {
			return nil, usage, uses, context.Cause(ctx)
		}
		switch {
		case len(results) > 0:
		case resp != nil && resp.StopReason == model.StopMaxTokens:
			results = []model.Block{model.TextBlock(textContinue)}
		default:
			for _, b := range msg.Content {
				if b.Type == model.BlockText && strings.TrimSpace(b.Text) != "" {
					text = append(text, b.Text)
				}
			}
			return text, usage, uses, nil
		}
		next := model.Message{Role: model.RoleUser, Content: results}
		msgs = append(msgs, next)
		a.publish(Event{Kind: EventMessage, Message: &next})
	}
}

// request streams one response of the subagent's model and starts each
// call as soon as its block is complete.
func (a *subagent) request(ctx context.Context, msgs []model.Message) (*model.Response, *callSet, error) {
	s := a.s
	cs := newCallSet(ctx)
	a.mu.Lock()
	a.cs = cs
	a.mu.Unlock()
	req := model.Request{
		Model:          a.model,
		MaxTokens:      s.cfg.MaxTokens,
		ThinkingBudget: s.cfg.ThinkingBudget,
		System:         a.system,
		Tools:          a.tools,
		Messages:       msgs,
	}
	var msgID string
	resp, err := s.o.cfg.Model.Stream(ctx, req, func(ev model.Event) {
		switch ev.Kind {
		case model.EventMessageStart:
			msgID = ev.MessageID
		case model.EventRetry:
			a.publish(Event{Kind: EventRetry, Retry: ev.Retry})
		case model.EventBlockComplete:
			if ev.Block.Type != model.BlockToolUse {
				return
			}
			b := ev.Block
			use := execapi.ToolUse{ID: b.ID, Name: b.Name, Input: ev.RawInput, MessageID: msgID}
			callCtx := startCall(ctx, cs, use, a.publish)
			if s.runLocal(callCtx, &localCall{use: use, cs: cs, announce: a.announce, tools: a.tools, link: a.link, parent: a.parent}) {
				return
			}
			if !offers(a.tools, b.Name) {
				// The conversation may offer it; this agent does not.
				text := schema.UnknownTool(b.Name)
				if offers(s.Tools(), b.Name) {
					text = schema.ToolNotEnabled(b.Name)
				}
				refuseCall(cs, use, text, a.announce)
				return
			}
			// A broken stream is resumed by collect, which sends the
			// pending calls again.
			_ = submitCall(callCtx, a.link, cs, use, a.announce)
		}
	})
	return resp, cs, err
}

// collect waits for the results of cs, resuming a broken link like a
// turn does. When ctx ends it aborts the subagent's calls (all of its own
// session's, or its calls one by one on the conversation's), waits a
// grace period, and writes interrupted results for calls still without
// one.
func (a *subagent) collect(ctx context.Context, cs *callSet) []model.Block {
	s := a.s
	err := cs.waitResuming(ctx, a.link, s.o.cfg.ResumeWindow)
	text := ""
	switch {
	case err == nil:
	case errors.Is(err, errLinkLost):
		text = fmt.Sprintf(textLostExecutor, err)
	default:
		text = textInterrupted
		if alive(a.link) {
			a.abort(cs, err)
			grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.cfg.AbortGrace)
			_ = cs.waitAll(grace, a.link.Broken())
			cancel()
		}
	}
	if text != "" {
		for _, c := range cs.unfinished() {
			cs.deliver(syntheticResult(c.use.ID, c.use.Name, text), a.announce)
		}
	}
	var blocks []model.Block
	for _, r := range cs.arrived() {
		blocks = append(blocks, ToolResultBlock(r))
	}
	return blocks
}

// abort stops the subagent's unfinished calls on its executor.
func (a *subagent) abort(cs *callSet, cause error) {
	if a.own {
		_ = a.link.Abort(execapi.Abort{All: true, Reason: execapi.AbortUserInterrupted, Detail: cause.Error()})
		return
	}
	for _, c := range cs.unfinished() {
		if !isLocal(c.use.Name) {
			_ = a.link.Abort(execapi.Abort{ToolUseID: c.use.ID, Reason: execapi.AbortUserInterrupted, Detail: cause.Error()})
		}
	}
}
