package hook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Decision is a permission decision a PreToolUse hook can make.
type Decision string

// Decisions, from weakest to strongest.
const (
	// Allow lets the call run without asking the user.
	Allow Decision = "allow"
	// Ask makes the user confirm the call.
	Ask Decision = "ask"
	// Deny refuses the call; the reason goes to the model.
	Deny Decision = "deny"
)

func (d Decision) rank() int {
	switch d {
	case Allow:
		return 1
	case Ask:
		return 2
	case Deny:
		return 3
	}
	return 0
}

// Outcome is what the hooks of one event said about one call, combined.
// The zero Outcome (no hook matched, or none had anything to say) lets the
// call go on unchanged.
type Outcome struct {
	// Block is set when a hook blocked: for PreToolUse the call must not
	// run (exit code 2, a "deny" decision, a legacy "block" decision or
	// "continue": false); for PostToolUse Reason must reach the model as
	// feedback on the call that already ran (exit code 2 or "block").
	Block bool
	// Reason is the blocking hooks' reasons (stderr of exit code 2, or the
	// reason in their JSON), joined by newlines in configuration order. It
	// is meant for the model; see BlockedText and FeedbackText.
	Reason string
	// Decision is the strongest permission decision of the PreToolUse
	// hooks (deny over ask over allow), empty when none decided. It is Deny
	// whenever a PreToolUse Outcome has Block set. PostToolUse hooks make
	// no permission decision.
	Decision Decision
	// DecisionReason is the reasons given with Decision, joined by
	// newlines; for Ask it is meant for the user who is asked.
	DecisionReason string
	// UpdatedInput replaces the call's input when set (PreToolUse only, and
	// meaningless when Block is set). When several hooks rewrite the input,
	// the last one in configuration order wins: rewrites are not merged.
	UpdatedInput json.RawMessage
	// AdditionalContext is extra text hooks want the model to see, joined
	// by newlines in configuration order; see ContextText.
	AdditionalContext string
	// Stop is set when a hook answered "continue": false: the caller should
	// end the turn after this call. StopReason is for the user, not the
	// model.
	Stop       bool
	StopReason string
	// Errors are non-blocking failures to log: exit codes other than 0 and
	// 2, hooks that could not start, timed out or were stopped, and
	// unreadable JSON. Each names its hook.
	Errors []string
	// DecidedBy names the hooks that made Block or Decision (or, failing
	// those, UpdatedInput) what it is, as "Event[matcher] command", joined
	// by "; ". Empty when no hook decided anything.
	DecidedBy string
}

// hookOutput is the JSON a hook may print on stdout when it exits with 0.
type hookOutput struct {
	Continue           *bool       `json:"continue"`
	StopReason         string      `json:"stopReason"`
	Decision           string      `json:"decision"`
	Reason             string      `json:"reason"`
	HookSpecificOutput *specificIO `json:"hookSpecificOutput"`
}

type specificIO struct {
	HookEventName            string          `json:"hookEventName"`
	PermissionDecision       string          `json:"permissionDecision"`
	PermissionDecisionReason string          `json:"permissionDecisionReason"`
	UpdatedInput             json.RawMessage `json:"updatedInput"`
	AdditionalContext        string          `json:"additionalContext"`
}

// verdict is what one hook said.
type verdict struct {
	decision     Decision // PreToolUse only
	block        bool
	reason       string // reason of decision or block
	updatedInput json.RawMessage
	context      string
	stop         bool
	stopReason   string
	err          string
}

// interpret reads one finished hook the way Claude Code does.
func interpret(ev Event, label string, r result) verdict {
	switch {
	case r.startErr != nil:
		return verdict{err: fmt.Sprintf("hook %s could not start: %v", label, r.startErr)}
	case r.canceled != nil:
		return verdict{err: fmt.Sprintf("hook %s was stopped: %v", label, r.canceled)}
	case r.timedOut:
		return verdict{err: fmt.Sprintf("hook %s timed out after %v and was killed; the call went on without it", label, r.timeout)}
	case r.code == 2:
		v := verdict{block: true, reason: r.stderr}
		if ev == PreToolUse {
			v.decision = Deny
		}
		return v
	case r.code != 0:
		msg := fmt.Sprintf("hook %s exited with status %d", label, r.code)
		if r.stderr != "" {
			msg += ": " + r.stderr
		}
		return verdict{err: msg}
	}
	out := bytes.TrimSpace(r.stdout)
	if len(out) == 0 || out[0] != '{' {
		return verdict{} // plain text on success is informational only
	}
	if r.stdoutTruncated {
		return verdict{err: fmt.Sprintf("hook %s printed more than %d bytes on stdout; its JSON was ignored", label, MaxStdout)}
	}
	var o hookOutput
	if err := json.Unmarshal(out, &o); err != nil {
		return verdict{err: fmt.Sprintf("hook %s printed invalid JSON on stdout: %v", label, err)}
	}
	return fromJSON(ev, label, o)
}

// fromJSON reads a hook's JSON output.
func fromJSON(ev Event, label string, o hookOutput) verdict {
	var v verdict
	var errs []string
	if o.Continue != nil && !*o.Continue {
		v.stop, v.stopReason = true, o.StopReason
	}
	switch o.Decision {
	case "":
	case "block":
		v.block, v.reason = true, o.Reason
		if ev == PreToolUse {
			v.decision = Deny
		}
	case "approve":
		if ev == PreToolUse {
			v.decision, v.reason = Allow, o.Reason
		}
	default:
		errs = append(errs, fmt.Sprintf("unknown decision %q", o.Decision))
	}
	if h := o.HookSpecificOutput; h != nil {
		if h.HookEventName != "" && h.HookEventName != ev.String() {
			errs = append(errs, fmt.Sprintf("hookSpecificOutput is for %q, not %s; it was ignored", h.HookEventName, ev))
			h = nil
		}
		if h != nil && ev == PreToolUse {
			switch d := Decision(h.PermissionDecision); d {
			case "":
			case Allow, Ask, Deny:
				// The permission decision supersedes the legacy field.
				v.decision, v.reason, v.block = d, h.PermissionDecisionReason, d == Deny
			default:
				errs = append(errs, fmt.Sprintf("unknown permissionDecision %q", h.PermissionDecision))
			}
			if len(h.UpdatedInput) > 0 && !bytes.Equal(h.UpdatedInput, []byte("null")) {
				if bytes.HasPrefix(bytes.TrimSpace(h.UpdatedInput), []byte("{")) {
					v.updatedInput = h.UpdatedInput
				} else {
					errs = append(errs, "updatedInput is not a JSON object; it was ignored")
				}
			}
		}
		if h != nil {
			v.context = strings.TrimSpace(h.AdditionalContext)
		}
	}
	if len(errs) > 0 {
		v.err = fmt.Sprintf("hook %s: %s", label, strings.Join(errs, "; "))
	}
	return v
}

// combine merges the verdicts of parallel hooks, given in configuration
// order.
func combine(ev Event, entries []entry, vs []verdict) Outcome {
	var o Outcome
	var reasons, decisionReasons, contexts, stopReasons, blockers, deciders []string
	updatedBy := ""
	for i, v := range vs {
		label := entries[i].label
		if v.err != "" {
			o.Errors = append(o.Errors, v.err)
		}
		if v.block {
			o.Block = true
			blockers = append(blockers, label)
			if v.reason != "" {
				reasons = append(reasons, v.reason)
			}
		}
		if v.decision.rank() > o.Decision.rank() {
			o.Decision, decisionReasons, deciders = v.decision, nil, nil
		}
		if v.decision != "" && v.decision == o.Decision {
			deciders = append(deciders, label)
			if v.reason != "" {
				decisionReasons = append(decisionReasons, v.reason)
			}
		}
		if v.updatedInput != nil {
			o.UpdatedInput, updatedBy = v.updatedInput, label
		}
		if v.context != "" {
			contexts = append(contexts, v.context)
		}
		if v.stop {
			o.Stop = true
			blockers = append(blockers, label)
			if v.stopReason != "" {
				stopReasons = append(stopReasons, v.stopReason)
			}
		}
	}
	if o.Stop && ev == PreToolUse {
		// A session that is told to stop must not run the call either.
		o.Block, o.Decision = true, Deny
		if len(reasons) == 0 {
			reasons = append(reasons, stopReasons...)
		}
	}
	o.Reason = strings.Join(reasons, "\n")
	o.DecisionReason = strings.Join(decisionReasons, "\n")
	o.AdditionalContext = strings.Join(contexts, "\n")
	o.StopReason = strings.Join(stopReasons, "\n")
	switch {
	case o.Block:
		o.DecidedBy = strings.Join(uniq(blockers), "; ")
	case o.Decision != "":
		o.DecidedBy = strings.Join(deciders, "; ")
	case updatedBy != "":
		o.DecidedBy = updatedBy
	}
	return o
}

func uniq(s []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
