package execapi

import (
	"time"

	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/settings"
)

// OpenRequest starts a session.
type OpenRequest struct {
	// SessionID is the client's id; empty lets the executor pick one.
	SessionID string
	// Workspace is the session's working directory: relative to the
	// executor's root, absolute under it, or empty for the root.
	Workspace string
	// Options tune the session.
	Options SessionOptions
	// Settings are the session's permission rules, mode and hooks.
	Settings settings.Settings
	// ClientName and ClientVersion identify the client in logs.
	ClientName, ClientVersion string
	// ClientIdentity is who opens the session as the transport knows it
	// (a client certificate's subject, the peer's address): the executor
	// bounds the sessions of each identity (executor.Config
	// MaxSessionsPerClient). Empty counts as one identity of its own.
	ClientIdentity string
	// MCPServers are the session's own MCP servers. A client expands
	// ${VAR} in them (mcpclient.Servers.Expand) from its own environment
	// before: the executor does not.
	MCPServers mcpclient.Servers
	// Tools, when not nil, are the only tools the session runs, by name
	// (an older name stands for its tool); empty means none. Nil means
	// every tool. A call of another tool gets an unknown-tool Result.
	Tools []string
}

// ResultOrder selects the order of a message's Results.
type ResultOrder int

const (
	// OrderToolUse sends the Results of one assistant message in the order
	// of its tool_use blocks.
	OrderToolUse ResultOrder = iota
	// OrderCompletion sends each Result as soon as its call ends.
	OrderCompletion
)

// SessionOptions tune one session.
type SessionOptions struct {
	// ResultOrder selects the order of Results.
	ResultOrder ResultOrder
	// NoSiblingAbort keeps calls running when a sibling Bash call fails.
	NoSiblingAbort bool
	// MaxConcurrency caps parallel calls; zero or more than the executor's
	// maximum means the executor's maximum.
	MaxConcurrency int
	// DefaultTimeout is the Bash timeout when a call gives none.
	DefaultTimeout time.Duration
	// PermissionTimeout bounds the wait for a permission decision.
	PermissionTimeout time.Duration
	// FoldLifecycle leaves out the Accepted and Started of a call whose
	// Result comes while they are held: its timings say when they
	// happened (LIFECYCLE_FOLDED).
	FoldLifecycle bool
}

// ToolUse is one tool_use block of the model.
type ToolUse struct {
	// ID is the tool_use id; the idempotency key within a session.
	ID string
	// Name is the tool name as the model wrote it.
	Name string
	// Input is the input text exactly as the model produced it.
	Input string
	// MessageID is the assistant message the block belongs to.
	MessageID string
	// Timeout is an optional upper bound for the call.
	Timeout time.Duration
	// TraceParent and TraceState carry the caller's W3C trace context.
	TraceParent, TraceState string
}

// AbortReason classifies why calls were stopped.
type AbortReason int

const (
	// AbortUserInterrupted: the user interrupted the turn.
	AbortUserInterrupted AbortReason = iota + 1
	// AbortStreamingFallback: the model stream failed; its calls are dropped.
	AbortStreamingFallback
	// AbortSiblingError: a sibling Bash call failed.
	AbortSiblingError
	// AbortTimeout: the call ran past its timeout.
	AbortTimeout
	// AbortShutdown: the session or executor is ending.
	AbortShutdown
)

// String returns a short name, suitable as a metric label.
func (r AbortReason) String() string {
	switch r {
	case AbortUserInterrupted:
		return "user_interrupted"
	case AbortStreamingFallback:
		return "streaming_fallback"
	case AbortSiblingError:
		return "sibling_error"
	case AbortTimeout:
		return "timeout"
	case AbortShutdown:
		return "shutdown"
	}
	return "unspecified"
}

// Abort selects calls to stop.
type Abort struct {
	// ToolUseID stops one call.
	ToolUseID string
	// MessageID stops every call of one assistant message.
	MessageID string
	// All stops every unfinished call.
	All bool
	// Reason says why.
	Reason AbortReason
	// Detail is free text for logs.
	Detail string
}

// PermissionBehavior is a client's answer to a permission request.
type PermissionBehavior int

const (
	// PermissionDeny refuses the call.
	PermissionDeny PermissionBehavior = iota
	// PermissionAllowOnce runs the call.
	PermissionAllowOnce
	// PermissionAllowAlways runs the call and adds the suggested rule.
	PermissionAllowAlways
)

// PermissionDecision answers a permission request.
type PermissionDecision struct {
	// ToolUseID is the call that asked.
	ToolUseID string
	// Behavior is the answer.
	Behavior PermissionBehavior
	// Message is passed to the model on deny.
	Message string
}
