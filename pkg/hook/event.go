package hook

import "fmt"

// Event is the point of a tool call at which hooks run.
type Event int

const (
	// PreToolUse hooks run after the call's input is validated and before
	// the tool runs. They can block the call, decide its permission or
	// rewrite its input.
	PreToolUse Event = iota + 1
	// PostToolUse hooks run after the tool has finished successfully. They
	// can send feedback or extra context to the model.
	PostToolUse
)

// String returns the event's name as written in settings files.
func (e Event) String() string {
	switch e {
	case PreToolUse:
		return "PreToolUse"
	case PostToolUse:
		return "PostToolUse"
	}
	return fmt.Sprintf("Event(%d)", int(e))
}

// ParseEvent returns the event named s, as written in settings files.
func ParseEvent(s string) (Event, error) {
	switch s {
	case "PreToolUse":
		return PreToolUse, nil
	case "PostToolUse":
		return PostToolUse, nil
	}
	return 0, fmt.Errorf("hook: unknown event %q (want PreToolUse or PostToolUse)", s)
}

func (e Event) valid() bool { return e == PreToolUse || e == PostToolUse }
