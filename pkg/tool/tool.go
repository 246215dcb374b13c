package tool

import (
	"context"
	"encoding/json"
	"time"
)

// Concurrency is a tool's concurrency class.
type Concurrency int

const (
	// ConcurrencyNever means every call runs alone, as a barrier.
	ConcurrencyNever Concurrency = iota
	// ConcurrencyAlways means every call may run beside other safe calls.
	ConcurrencyAlways
	// ConcurrencyDependsOnInput means Tool.ConcurrencySafe decides per call.
	ConcurrencyDependsOnInput
)

// Spec describes a tool to the model and to the scheduler.
type Spec struct {
	// Name is what the model calls the tool.
	Name string
	// Description tells the model what the tool does and how to use it well.
	Description string
	// InputSchema is the JSON Schema of the input object, as sent to the
	// Messages API.
	InputSchema json.RawMessage
	// ReadOnly is true when the tool never changes files or state.
	ReadOnly bool
	// Concurrency is the tool's concurrency class.
	Concurrency Concurrency
	// Hidden tools are callable but not offered to the model; older names
	// such as BashOutput are registered this way.
	Hidden bool
	// AliasOf is set on an older name registered as a hidden tool: the
	// tool it stands for (TaskOutput for BashOutput). A session that
	// offers that tool also runs calls by its older names.
	AliasOf string
	// ValidationSchema, when set, is the schema a call's input is checked
	// against instead of InputSchema. Claude Code accepts some input that
	// the schema it shows the model rules out (Read's offset -1 and limit
	// 0, read as if absent); such a tool shows InputSchema and checks this
	// looser one.
	ValidationSchema json.RawMessage
}

// CheckedSchema returns the schema a call's input is checked against:
// ValidationSchema when set, else InputSchema.
func (s Spec) CheckedSchema() json.RawMessage {
	if len(s.ValidationSchema) > 0 {
		return s.ValidationSchema
	}
	return s.InputSchema
}

// Tool is one executable tool.
//
// The executor calls the methods in this order: the input is parsed and
// checked against Spec.CheckedSchema first; ConcurrencySafe is asked when the
// call is queued; Validate and Run happen when the call leaves the queue, so
// that Validate sees the effects of the calls before it (a Read before an
// Edit of the same message).
type Tool interface {
	// Spec returns the tool's description. It must not change.
	Spec() Spec
	// ConcurrencySafe reports whether a call with this schema-valid input may
	// run in parallel with other safe calls.
	ConcurrencySafe(input json.RawMessage) bool
	// Validate runs the tool's own checks on a schema-valid input (read before
	// write, file exists, ...). A non-nil error is reported to the model as an
	// invalid-input result; return an *InputError to choose its text.
	Validate(ctx context.Context, env *Env, input json.RawMessage) error
	// Run executes the call. The tool's own failures belong in the Result
	// (IsError), never in a panic; ctx is cancelled on abort and timeout.
	Run(ctx context.Context, env *Env, call *Call) *Result
}

// Preparer is implemented by a tool whose Validate works out what Run
// needs again, such as the decoded input or a resolved path. The executor
// then calls Prepare where it would call Validate, and hands what it
// returns to Run as Call.Prepared, unless a hook rewrote the input in
// between (Validate checks a rewritten input, and Run gets no Prepared).
type Preparer interface {
	// Prepare runs Validate's checks and returns what it worked out.
	Prepare(ctx context.Context, env *Env, input json.RawMessage) (any, error)
}

// Call is one tool call handed to Tool.Run.
type Call struct {
	// ID is the tool_use id.
	ID string
	// Name is the tool's canonical name.
	Name string
	// Input is the schema-valid input object.
	Input json.RawMessage
	// Prepared is what the tool's Prepare returned for Input; nil when the
	// tool is no Preparer or the input was rewritten after Prepare.
	Prepared any
	// Timeout is an upper bound from the client, zero for none. Tools with
	// their own timeout (Bash) use the smaller of the two.
	Timeout time.Duration
	// Progress reports output as it appears. Never nil; safe to call from
	// any goroutine, but not after Run returns.
	Progress func(Progress)
	// Background is closed when the client asks to move the running call
	// to the background (nil: never). A tool that can (a foreground Bash
	// command) returns at once with a Result that names the background
	// task the command goes on as; others ignore it.
	Background <-chan struct{}
}

// Progress is incremental output of a running call.
type Progress struct {
	// Output is new output since the last Progress (may be empty: a
	// heartbeat that only moves Elapsed). It passes to the executor with
	// the report, which may write into its spare capacity and, when it
	// came from ProgressBuffer, reuse it: the tool must not touch it
	// afterwards.
	Output []byte
	// Elapsed is the time since the call started.
	Elapsed time.Duration
	// TotalLines counts output lines so far.
	TotalLines uint64
	// TotalBytes counts output bytes so far.
	TotalBytes uint64
	// Dropped counts output bytes since the last Progress that it does not
	// carry because progress fell behind (the result and the output file
	// still hold them).
	Dropped uint64
}

// InputError is a failed tool-specific check. The executor reports Msg to the
// model wrapped in <tool_use_error> tags.
type InputError struct {
	Msg string
}

// Error returns the message.
func (e *InputError) Error() string { return e.Msg }

// Invalid returns an *InputError with a formatted message.
func Invalid(msg string) error { return &InputError{Msg: msg} }

// DeniedError is an action the sandbox refused (a path outside the allowed
// roots, a denied file pattern, ...). The executor reports Msg to the model
// wrapped in <tool_use_error> tags with the sandbox-denied outcome, so the
// model learns what was refused and why.
type DeniedError struct {
	Msg string
}

// Error returns the message.
func (e *DeniedError) Error() string { return e.Msg }
