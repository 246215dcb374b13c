package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
	"github.com/toolwire/toolwire/pkg/schema"
	"github.com/toolwire/toolwire/pkg/tool"
)

// turn runs the query loop for one user message: stream a response, hand
// each tool_use to the executor the moment it is complete, send every
// result back in one user message, and ask again until the model ends its
// turn, the max-turns guard trips, an error ends it or the client
// interrupts. Whatever happens, every tool_use of the transcript gets a
// tool_result.
//
// A turn taken over from a replica that is gone (takenOver) adds no user
// message: it goes on from where the transcript ends, waiting first for
// the results of calls the transcript shows without (they ran on, or run
// still, on the executor) or asking the model again.
func (s *Session) turn(ctx context.Context, text string, takenOver bool) (res *TurnResult) {
	start := time.Now()
	res = &TurnResult{}
	ctx, span := s.startTurn(ctx)
	defer func() {
		res.Duration = time.Since(start)
		endTurn(span, res)
		s.finishTurn(res)
	}()
	fail := func(kind string, err error) *TurnResult {
		s.publishError(kind, err, false)
		res.StopReason, res.Err = StopError, err
		return res
	}

	var pending *callSet // calls of a turn taken over, without results
	if takenOver {
		if uses := s.unanswered(); len(uses) > 0 {
			// Known before the link attaches, so that none of their results
			// in the executor's replay is missed.
			pending = s.waitAgain(ctx, uses)
		}
	} else {
		var first []model.Block
		if notes := s.takeNotes(); len(notes) > 0 {
			first = append(first, notesBlock(notes))
		}
		first = append(first, model.TextBlock(text))
		if err := s.addMessage(model.Message{Role: model.RoleUser, Content: first}, ""); err != nil {
			return fail("persistence", err)
		}
	}

	if takenOver && pending == nil && s.lastRole() == model.RoleAssistant {
		// The model had ended the turn; only its record was missing.
		res.StopReason = StopEndTurn
		return res
	}
	maxTurns := s.cfg.MaxTurns
	if maxTurns <= 0 {
		maxTurns = DefaultMaxTurns
	}
	for {
		if ctx.Err() != nil {
			s.interrupted(nil)
			res.StopReason = StopInterrupted
			return res
		}
		if res.Requests >= maxTurns {
			err := fmt.Errorf("reached the limit of %d model requests in one turn", maxTurns)
			s.publishError("max_turns", err, false)
			res.StopReason, res.Err = StopMaxTurns, err
			return res
		}
		l, tools, err := s.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			if errors.Is(err, ErrSandboxRequirement) {
				return fail("sandbox_requirement", err)
			}
			return fail("executor_unavailable", err)
		}

		var (
			resp      *model.Response
			cs        *callSet
			streamErr error
		)
		if pending != nil {
			cs = pending
			pending = nil
			s.resubmit(l, cs)
		} else {
			sent := time.Now()
			resp, cs, streamErr = s.request(ctx, l, tools)
			res.APIDuration += time.Since(sent)
			res.Requests++
		}
		if resp != nil {
			res.Usage = res.Usage.Add(resp.Usage)
			if msg := resp.Message(); len(msg.Content) > 0 {
				if t := msg.Text(); t != "" {
					res.Text = t
				}
				if err := s.addMessage(msg, resp.ID); err != nil {
					// The calls already run; their results must still be
					// collected before the turn can end.
					s.publishError("persistence", err, false)
				}
			}
		}
		interrupted := ctx.Err() != nil
		if streamErr != nil && !interrupted {
			kind := "api_error"
			if errors.Is(streamErr, model.ErrStreamCut) {
				kind = "stream_cut"
			}
			if cs.count() == 0 {
				return fail(kind, streamErr)
			}
			// Keep the complete tool_use blocks: they run once, their results
			// go back, and the model carries on from there.
			s.publishError(kind, streamErr, true)
		}

		var results []model.Block
		if cs.count() > 0 {
			var stopped bool
			results, stopped = s.collect(ctx, l, cs)
			interrupted = interrupted || stopped
		}
		if interrupted {
			s.interrupted(results)
			res.StopReason = StopInterrupted
			return res
		}

		stop := model.StopReason("")
		if resp != nil {
			stop = resp.StopReason
		}
		var next []model.Block
		switch {
		case len(results) > 0:
			next = results
			if stop == model.StopMaxTokens {
				next = append(next, model.TextBlock(textContinue))
			}
		case stop == model.StopMaxTokens:
			next = []model.Block{model.TextBlock(textContinue)}
		}
		notes := s.takeNotes()
		if len(notes) > 0 && (next != nil || stop == model.StopEndTurn) {
			// The model hears of finished background tasks with the next
			// request, or in a request of their own if it was done.
			next = append(next, notesBlock(notes))
		} else if len(notes) > 0 {
			s.mu.Lock()
			s.notes = append(notes, s.notes...)
			s.mu.Unlock()
		}
		if next != nil {
			if err := s.addMessage(model.Message{Role: model.RoleUser, Content: next}, ""); err != nil {
				return fail("persistence", err)
			}
			continue
		}
		if stop == model.StopPauseTurn {
			// A server tool (web search) paused a long turn: the response
			// goes back as it is, and the model carries on from there.
			continue
		}
		switch stop {
		case model.StopStopSequence:
			res.StopReason = StopStopSequence
		case model.StopRefusal:
			res.StopReason = StopRefusal
		default:
			res.StopReason = StopEndTurn
		}
		return res
	}
}

// request streams one model response. Each tool_use is announced and sent
// to the executor as soon as its block is complete.
func (s *Session) request(ctx context.Context, l execapi.Link, tools []model.Tool) (*model.Response, *callSet, error) {
	cs := newCallSet(ctx)
	s.mu.Lock()
	s.calls = cs
	s.mu.Unlock()

	msgs, encoded, err := s.snapshot()
	if err != nil {
		return nil, cs, err
	}
	req := model.Request{
		Model:          s.cfg.Model,
		MaxTokens:      s.cfg.MaxTokens,
		ThinkingBudget: s.cfg.ThinkingBudget,
		System:         s.systemPrompt(),
		Tools:          tools,
		Messages:       msgs,
		Encoded:        encoded,
		WebSearch:      s.o.cfg.WebSearch,
	}
	mcpOffered := map[string]bool{}
	for _, t := range tools {
		if strings.HasPrefix(t.Name, externalToolPrefix) {
			mcpOffered[t.Name] = true
		}
	}
	var msgID string
	var completed []model.Block // with a shared store: blocks since the last call
	resp, err := s.o.cfg.Model.Stream(ctx, req, func(ev model.Event) {
		switch ev.Kind {
		case model.EventMessageStart:
			msgID = ev.MessageID
		case model.EventTextDelta:
			s.publish(Event{Kind: EventText, MessageID: msgID, Text: ev.Text})
		case model.EventRetry:
			s.publish(Event{Kind: EventRetry, Retry: ev.Retry})
		case model.EventBlockComplete:
			if ev.Block.Type != model.BlockToolUse {
				if s.shared {
					completed = append(completed, *ev.Block)
				}
				return
			}
			b := ev.Block
			use := execapi.ToolUse{ID: b.ID, Name: b.Name, Input: ev.RawInput, MessageID: msgID}
			var blocks []model.Block
			if s.shared {
				blocks, completed = append(completed, *b), nil
			}
			callCtx := startCall(ctx, cs, use, func(e Event) {
				e.blocks = blocks
				s.publish(e)
			})
			if s.runLocal(callCtx, &localCall{use: use, cs: cs, announce: s.publishResult, tools: tools, link: l}) {
				return
			}
			if strings.HasPrefix(b.Name, externalToolPrefix) && !mcpOffered[b.Name] {
				// The executor runs every MCP tool of the session; one
				// this request did not offer (a disallowed rule hides it)
				// is refused here, as the executor refuses a built-in
				// tool the session does not run.
				refuseCall(cs, use, schema.UnknownTool(use.Name), s.publishResult)
				return
			}
			if err := submitCall(callCtx, l, cs, use, s.publishResult); err != nil {
				// The stream is broken. The call stays pending: collect
				// resumes the session and sends it again (the executor
				// runs an id once, so a copy that did arrive is harmless).
				s.log.Warn("send tool_use; will resend after resuming", "tool_use_id", b.ID, "err", err)
			}
		}
	})
	return resp, cs, err
}

// startCall opens the span of a call of the model's response, adds the
// call to cs and tells clients (through publish) that it was made.
func startCall(ctx context.Context, cs *callSet, use execapi.ToolUse, publish func(Event)) context.Context {
	callCtx, span := startToolCall(ctx, use)
	cs.add(use, span)
	publish(Event{Kind: EventToolUse, MessageID: use.MessageID, ToolUse: &ToolUse{ID: use.ID, Name: use.Name, InputJSON: use.Input}})
	return callCtx
}

// refuseCall gives use a tool_use_error result for a tool this request
// does not offer.
func refuseCall(cs *callSet, use execapi.ToolUse, text string, announce func(*execapi.CallResult)) {
	cs.deliver(&execapi.CallResult{ToolUseID: use.ID, ToolName: use.Name,
		Result: tool.UseError(tool.OutcomeUnknownTool, text)}, announce)
}

// submitCall sends use to the executor on l. A use the stream cannot
// carry gets its result here, and the stream stays whole for the others;
// any other error (a broken stream) is returned, and the call stays
// pending.
func submitCall(ctx context.Context, l execapi.Link, cs *callSet, use execapi.ToolUse, announce func(*execapi.CallResult)) error {
	err := l.Submit(ctx, use)
	var unsendable *execapi.UnsendableError
	if errors.As(err, &unsendable) {
		cs.deliver(&execapi.CallResult{ToolUseID: use.ID, ToolName: use.Name,
			Result: tool.UseError(tool.OutcomeInvalidInput, unsendable.Text)}, announce)
		return nil
	}
	return err
}

// collect waits for the result of every call in cs and returns the
// tool_result blocks in the order the results arrived. When the stream to
// the executor breaks, it resumes the executor's session (which kept
// running the calls), receives the events it missed and sends again the
// calls without a result; calls whose session cannot be resumed get an
// interrupted result. When ctx ends (interrupt) it aborts every call and
// waits a grace period for the executor's results; calls that still have
// none get a result written here. stopped reports an interrupt.
func (s *Session) collect(ctx context.Context, l execapi.Link, cs *callSet) (blocks []model.Block, stopped bool) {
	defer func() {
		s.mu.Lock()
		if s.calls == cs {
			s.calls = nil
		}
		s.mu.Unlock()
	}()
	err := cs.waitResuming(ctx, l, s.o.cfg.ResumeWindow)
	text := ""
	switch {
	case err == nil:
	case errors.Is(err, errLinkLost):
		text = fmt.Sprintf(textLostExecutor, err)
		s.publishError("executor_unavailable", fmt.Errorf("%w: %w", ErrExecutorUnavailable, err), true)
	default:
		stopped = true
		text = textInterrupted
		if alive(l) && !s.fenced.Load() {
			if abortErr := l.Abort(execapi.Abort{All: true, Reason: execapi.AbortUserInterrupted, Detail: err.Error()}); abortErr == nil {
				grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.cfg.AbortGrace)
				_ = cs.waitAll(grace, l.Broken())
				cancel()
			}
		}
	}
	for _, r := range cs.arrived() {
		blocks = append(blocks, ToolResultBlock(r))
	}
	if text != "" {
		for _, c := range cs.unfinished() {
			r := syntheticResult(c.use.ID, c.use.Name, text)
			if cs.deliver(r, s.publishResult) {
				blocks = append(blocks, ToolResultBlock(r))
			}
		}
	}
	return blocks, stopped
}

// interrupted records the end of an interrupted turn: the results of its
// calls and a note for the model that the user stopped it.
func (s *Session) interrupted(results []model.Block) {
	content := append(results, model.TextBlock(textRequestInterrupted))
	if err := s.addMessage(model.Message{Role: model.RoleUser, Content: content}, ""); err != nil {
		s.publishError("persistence", err, false)
	}
}

// finishTurn records a finished turn and tells clients.
func (s *Session) finishTurn(res *TurnResult) {
	fenced := s.fenced.Load()
	s.mu.Lock()
	s.busy = false
	if s.stopTurn != nil {
		s.stopTurn(nil)
		s.stopTurn = nil
	}
	s.calls = nil
	s.nturns++
	s.usage = s.usage.Add(res.Usage)
	s.mu.Unlock()
	if st := s.o.cfg.Store; st != nil && !fenced {
		rec := transcript.Record{Kind: transcript.KindTurn, Time: time.Now(),
			Turn: &transcript.Turn{StopReason: string(res.StopReason), Usage: res.Usage, Requests: res.Requests}}
		if err := st.Append(context.WithoutCancel(s.ctx), s.id, rec); err != nil {
			s.publishError("persistence", err, false)
		}
	}
	s.publish(Event{Kind: EventTurnComplete, Turn: res})
	if s.shared {
		s.releaseLease()
	}
}

// unanswered returns the tool_use blocks of a trailing assistant message,
// which have no results yet; nil when the transcript does not end so.
func (s *Session) unanswered() []model.Block {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.messages); n > 0 && s.messages[n-1].Role == model.RoleAssistant {
		return s.messages[n-1].ToolUses()
	}
	return nil
}

func (s *Session) lastRole() model.Role {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.messages); n > 0 {
		return s.messages[n-1].Role
	}
	return ""
}

// waitAgain makes the calls of a turn taken over the ones the session
// waits for. Those whose results clients were told of already have them.
func (s *Session) waitAgain(ctx context.Context, uses []model.Block) *callSet {
	cs := newCallSet(ctx)
	for _, b := range uses {
		use := execapi.ToolUse{ID: b.ID, Name: b.Name, Input: string(b.Input)}
		_, span := startToolCall(ctx, use)
		cs.add(use, span)
	}
	announced := s.takeAnnounced()
	for _, b := range uses {
		if r := announced[b.ID]; r != nil {
			cs.deliver(r, func(*execapi.CallResult) {}) // told already
		}
	}
	s.mu.Lock()
	s.calls = cs
	s.mu.Unlock()
	return cs
}

// resubmit sends again the calls of cs still without a result: the
// executor runs an id once, so a call that ran, or runs still, is not run
// again (its result comes in the replay), and one that never arrived runs
// now. A call the orchestrator ran itself ran on the replica that stopped,
// and its work stopped with it: it gets an interrupted result.
func (s *Session) resubmit(l execapi.Link, cs *callSet) {
	for _, c := range cs.unfinished() {
		if isLocal(c.use.Name) {
			cs.deliver(syntheticResult(c.use.ID, c.use.Name, textRestarted), s.publishResult)
		}
	}
	for _, c := range cs.unfinished() {
		if err := l.Submit(c.ctx(), c.use); err != nil {
			s.log.Warn("send again a call of the turn taken over; will resend after resuming", "tool_use_id", c.use.ID, "err", err)
			break
		}
	}
}
