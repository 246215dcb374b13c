package hook

import "fmt"

// BlockedText is the tool result the model gets when PreToolUse hooks
// blocked a call to tool.
func BlockedText(tool, reason string) string {
	return fmt.Sprintf("%s hook blocked this %s call: %s", PreToolUse, tool, orNoReason(reason))
}

// FeedbackText is what the model gets, after the result of a call to tool,
// when PostToolUse hooks blocked (exit code 2 or "block"): the call has
// run, and the hook has something to say about it.
func FeedbackText(tool, reason string) string {
	return fmt.Sprintf("%s hook feedback on this %s call: %s", PostToolUse, tool, orNoReason(reason))
}

// ContextText wraps a hook's additionalContext for the model, the way
// Claude Code passes side information: in a system-reminder.
func ContextText(ev Event, tool, context string) string {
	return fmt.Sprintf("<system-reminder>%s hook context for %s: %s</system-reminder>", ev, tool, context)
}

func orNoReason(s string) string {
	if s == "" {
		return "(the hook gave no reason)"
	}
	return s
}
