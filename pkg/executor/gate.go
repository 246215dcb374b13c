package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/toolwire/toolwire/pkg/hook"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/schema"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/tool"
)

// ErrInvalidSettings: a session's permission rules or hooks do not compile,
// or ask for what the operator forbids.
var ErrInvalidSettings = errors.New("invalid session settings")

// gate is the permission and hook step of the pipeline. It runs after a
// call's validation, around the tool: permission rules (deny, ask, allow,
// then the mode), the client's answer when asked, PreToolUse hooks before
// the tool and PostToolUse hooks after it.
type gate struct {
	hooks *hook.Set

	mu     sync.Mutex // guards policy
	policy *permission.Policy
}

// newGate compiles the operator's and the session's settings. Operator
// rules and hooks always apply; the session's come on top and cannot
// loosen the operator's.
func newGate(operator, session settings.Settings) (*gate, error) {
	policy, err := permission.Compile(operator.Permissions.Rules(), session.Permissions.Rules())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSettings, err)
	}
	var ms []hook.Matcher
	for _, s := range []settings.Settings{operator, session} {
		for _, ev := range settings.Events {
			he, err := hook.ParseEvent(string(ev))
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalidSettings, err)
			}
			for _, m := range s.Hooks[ev] {
				hm := hook.Matcher{Event: he, Matcher: m.Matcher}
				for _, c := range m.Hooks {
					hm.Commands = append(hm.Commands, hook.Command{Command: c.Command, Timeout: c.Timeout})
				}
				ms = append(ms, hm)
			}
		}
	}
	hooks, err := hook.Compile(ms)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSettings, err)
	}
	return &gate{policy: policy, hooks: hooks}, nil
}

func (g *gate) currentPolicy() *permission.Policy {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.policy
}

// allowAlways adds rule to the session's allow rules.
func (g *gate) allowAlways(rule string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, err := g.policy.WithAllow(rule)
	if err != nil {
		return err
	}
	g.policy = p
	return nil
}

// permissionVerdict is what the permission step decided about a call.
type permissionVerdict struct {
	// behavior is "allow", "deny" or "ask" (the client was asked); empty
	// when the call was stopped before anything decided.
	behavior string
	// rule is the permission rule that decided, as written; empty when
	// the mode, a hook or nothing decided.
	rule string
	// by classes the decider for metrics: "operator", "session", "mode",
	// "hook" or "client".
	by string
	// decidedBy names what decided in full (Result.DecidedBy).
	decidedBy string
	// granted is the client's answer when behavior is "ask".
	granted bool
}

// ruleVerdict is the verdict of a decision of the rules or the mode.
func ruleVerdict(d permission.Decision) permissionVerdict {
	v := permissionVerdict{behavior: d.Behavior.String(), by: d.Origin.String(), decidedBy: decider(d)}
	if d.Origin != permission.OriginMode {
		v.rule = d.Rule
	}
	return v
}

// hookVerdict is the verdict of PreToolUse hooks.
func hookVerdict(behavior permission.Behavior, decidedBy string) permissionVerdict {
	return permissionVerdict{behavior: behavior.String(), by: "hook", decidedBy: decidedBy}
}

// before decides whether c may run. It returns the input to run with (a
// PreToolUse hook may rewrite it), what decided, and a Result when the call
// must not run.
//
// Deny rules are checked first. PreToolUse hooks run next, before the
// client is asked anything: a hook may block the call, rewrite its input
// (which the rules then judge again), ask, or allow — and a hook's allow
// answers a question only the mode would have asked, never an ask rule.
func (g *gate) before(ctx context.Context, s *Session, c *call) (json.RawMessage, permissionVerdict, *tool.Result) {
	spec := c.tool.spec
	policy := g.currentPolicy()
	d := policy.Decide(g.request(s, spec, c.input))
	if d.Behavior == permission.Deny {
		return g.refuse(ctx, s, c, ruleVerdict(d), tool.UseError(tool.OutcomeDenied, d.Reason))
	}
	input, v := c.input, ruleVerdict(d)
	var hookSays hook.Decision
	var hookReason string
	if g.hooks.Has(hook.PreToolUse) {
		out := g.runHooks(ctx, s, hook.PreToolUse, hook.Input{
			SessionID: s.id, Cwd: s.env.Cwd(), ToolName: spec.Name, ToolUseID: c.use.ID,
			ToolInput: input, PermissionMode: string(policy.Mode()),
		})
		for _, e := range out.Errors {
			s.log.WarnContext(ctx, "PreToolUse hook error", "tool_use_id", c.use.ID, "error", e)
		}
		if ctx.Err() != nil {
			return nil, permissionVerdict{decidedBy: v.decidedBy}, interruptedResult(context.Cause(ctx))
		}
		if out.Block || out.Decision == hook.Deny {
			reason := out.Reason
			if reason == "" {
				reason = out.DecisionReason
			}
			return g.refuse(ctx, s, c, hookVerdict(permission.Deny, out.DecidedBy), tool.UseError(tool.OutcomeDenied, hook.BlockedText(spec.Name, reason)))
		}
		if out.UpdatedInput != nil {
			updated, err := schema.Validate(spec.Name, spec.CheckedSchema(), string(out.UpdatedInput))
			if err != nil {
				return g.refuse(ctx, s, c, hookVerdict(permission.Deny, out.DecidedBy), tool.UseError(tool.OutcomeInvalidInput,
					"A PreToolUse hook rewrote the input into one that is not valid: "+err.Error()))
			}
			// The rules judge what will really run: a rewrite cannot reach
			// what they deny, nor skip what they ask about.
			d = g.currentPolicy().Decide(g.request(s, spec, updated))
			if d.Behavior == permission.Deny {
				return g.refuse(ctx, s, c, ruleVerdict(d), tool.UseError(tool.OutcomeDenied, d.Reason))
			}
			if err := c.tool.Validate(ctx, s.env, updated); err != nil {
				return g.refuse(ctx, s, c, hookVerdict(permission.Deny, out.DecidedBy), tool.ValidationResult(err))
			}
			input, v = updated, ruleVerdict(d)
			v.decidedBy += "; " + out.DecidedBy
		}
		hookSays, hookReason = out.Decision, out.DecisionReason
		if hookSays == hook.Allow && d.Behavior == permission.Ask && d.Origin == permission.OriginMode {
			d.Behavior, v = permission.Allow, hookVerdict(permission.Allow, out.DecidedBy)
		}
	}
	asked := false
	switch {
	case d.Behavior == permission.Ask:
		asked = true
		if res := g.ask(ctx, s, c, input, d.Reason, d.Suggestion); res != nil {
			return g.refuse(ctx, s, c, clientVerdict(v.rule, false), res)
		}
	case hookSays == hook.Ask:
		asked = true
		if res := g.ask(ctx, s, c, input, hookReason, ""); res != nil {
			return g.refuse(ctx, s, c, clientVerdict("", false), res)
		}
	}
	if asked {
		v = clientVerdict(v.rule, true)
	}
	s.log.InfoContext(ctx, "call allowed", "tool_use_id", c.use.ID, "tool", spec.Name, "decided_by", v.decidedBy)
	return input, v, nil
}

// clientVerdict is the verdict of a call the client was asked about; rule
// is the ask rule that made the executor ask, if any.
func clientVerdict(rule string, granted bool) permissionVerdict {
	return permissionVerdict{behavior: permission.Ask.String(), rule: rule, by: "client", decidedBy: "client", granted: granted}
}

// refuse logs a refused call and returns what before returns for it.
func (g *gate) refuse(ctx context.Context, s *Session, c *call, v permissionVerdict, res *tool.Result) (json.RawMessage, permissionVerdict, *tool.Result) {
	s.log.InfoContext(ctx, "call refused", "tool_use_id", c.use.ID, "tool", c.tool.spec.Name, "decided_by", v.decidedBy, "outcome", res.FinalOutcome().String())
	return nil, v, res
}

// runHooks runs the hooks of ev that match the call under a "hook <event>"
// span, a child of the call's run_tool span. The span names neither the
// commands nor what they printed.
func (g *gate) runHooks(ctx context.Context, s *Session, ev hook.Event, in hook.Input) hook.Outcome {
	n := len(g.hooks.Matching(ev, in.ToolName))
	if n == 0 {
		return hook.Outcome{}
	}
	hctx, span := s.ex.tel.tracer.Start(ctx, spanHookPrefix+ev.String())
	defer span.End()
	out := g.hooks.Run(hctx, s.env.Procs, ev, in)
	if span.IsRecording() {
		span.SetAttributes(keyHookEvent.String(ev.String()), keyHookCommands.Int(n), keyHookBlocked.Bool(out.Block))
		if out.Decision != "" {
			span.SetAttributes(keyHookDecision.String(string(out.Decision)))
		}
		if len(out.Errors) > 0 {
			fail(span, errHook, fmt.Sprintf("%d hook(s) failed, timed out or printed unreadable output", len(out.Errors)))
		}
	}
	return out
}

// decider names what made a permission decision: "mode:<mode>", or the
// rule prefixed by who set it ("operator:Bash(rm:*)", "session:Read").
func decider(d permission.Decision) string {
	if d.Origin == permission.OriginMode {
		return d.Rule
	}
	return d.Origin.String() + ":" + d.Rule
}

func (g *gate) request(s *Session, spec tool.Spec, input json.RawMessage) permission.Request {
	return permission.Request{Tool: spec.Name, Input: input, Cwd: s.env.Cwd(), Workspace: s.env.Files.Dir(), AddDirs: s.env.AddDirs,
		ReadOnly: spec.ReadOnly, Home: s.env.Files.Home()}
}

// ask sends a permission request and waits for the answer. It returns nil
// when the call may run, else the Result that refuses it.
func (g *gate) ask(ctx context.Context, s *Session, c *call, input json.RawMessage, reason, suggestion string) *tool.Result {
	name := c.tool.spec.Name
	d, err := s.awaitDecision(ctx, PermissionRequest{
		ToolUseID: c.use.ID, ToolName: name, Input: string(input), Reason: reason, SuggestedRule: suggestion,
	})
	switch {
	case ctx.Err() != nil:
		return interruptedResult(context.Cause(ctx))
	case err != nil:
		return tool.UseError(tool.OutcomeDenied, fmt.Sprintf("Permission to use %s was not granted: %v, so the call was denied.", name, err))
	case d.Behavior == PermissionDeny:
		msg := fmt.Sprintf("The user denied permission to use %s.", name)
		if d.Message != "" {
			msg += " Their message: " + d.Message
		}
		return tool.UseError(tool.OutcomeDenied, msg)
	case d.Behavior == PermissionAllowAlways && suggestion != "":
		if err := g.allowAlways(suggestion); err != nil {
			s.log.WarnContext(ctx, "could not add an allow-always rule", "rule", suggestion, "error", err)
		}
	}
	return nil
}

// after runs PostToolUse hooks on a finished call: a blocking hook's reason
// and any added context reach the model appended to the result.
func (g *gate) after(ctx context.Context, s *Session, c *call, input json.RawMessage, res *tool.Result) *tool.Result {
	if !g.hooks.Has(hook.PostToolUse) {
		return res
	}
	spec := c.tool.spec
	out := g.runHooks(ctx, s, hook.PostToolUse, hook.Input{
		SessionID: s.id, Cwd: s.env.Cwd(), ToolName: spec.Name, ToolUseID: c.use.ID,
		ToolInput: input, ToolResponse: toolResponse(res), PermissionMode: string(g.currentPolicy().Mode()),
	})
	for _, e := range out.Errors {
		s.log.WarnContext(ctx, "PostToolUse hook error", "tool_use_id", c.use.ID, "error", e)
	}
	var notes []string
	if out.Block && out.Reason != "" {
		notes = append(notes, hook.FeedbackText(spec.Name, out.Reason))
	}
	if out.AdditionalContext != "" {
		notes = append(notes, hook.ContextText(hook.PostToolUse, spec.Name, out.AdditionalContext))
	}
	for _, n := range notes {
		appendText(res, n)
	}
	if len(notes) > 0 {
		res.DecidedBy += "; " + out.DecidedBy
	}
	return res
}

// toolResponse is what PostToolUse hooks see of a result: the tool's
// structured data when it has some, else its text and error flag.
func toolResponse(res *tool.Result) json.RawMessage {
	if len(res.Structured) > 0 {
		return res.Structured
	}
	b, _ := json.Marshal(struct {
		Output  string `json:"output"`
		IsError bool   `json:"is_error"`
	}{res.TextContent(), res.IsError})
	return b
}

// appendText adds a paragraph to the last text block of res.
func appendText(res *tool.Result, s string) {
	for i := len(res.Content) - 1; i >= 0; i-- {
		if res.Content[i].IsText() {
			res.Content[i].Text += "\n\n" + s
			return
		}
	}
	res.Content = append(res.Content, tool.Content{Text: s})
}
