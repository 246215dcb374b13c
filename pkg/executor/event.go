package executor

import (
	"time"

	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/tool"
)

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

// Event is one thing a session reports. Exactly one of the pointer fields
// is set.
type Event struct {
	// Seq is the per-session sequence number, assigned when the event leaves
	// the outbox.
	Seq uint64
	// Time is when the event was produced.
	Time time.Time

	Hello             *Hello
	Accepted          *Accepted
	Started           *Started
	Progress          *Progress
	PermissionRequest *PermissionRequest
	Result            *CallResult
	AbortAck          *AbortAck
	Task              *tool.TaskNotice
	MCPToolsChanged   *MCPToolsChanged
}

// Hello describes the session and what the executor enforces.
type Hello struct {
	SessionID      string
	Version        string
	Sandbox        SandboxInfo
	Limits         tool.Limits
	MaxConcurrency int
	Retention      time.Duration
	Resumed        bool
	LastSequence   uint64
	Workspace      string
	// MCPServers are the session's MCP servers with their state.
	MCPServers []mcpclient.ServerStatus
	// MCPTools are the session's MCP tools, sorted by name.
	MCPTools []tool.Spec
	// Tools are the canonical names of the built-in tools the session
	// runs, sorted.
	Tools []string
}

// MCPToolsChanged gives the session's MCP servers and its complete list of
// MCP tools after they changed.
type MCPToolsChanged struct {
	Servers []mcpclient.ServerStatus
	Tools   []tool.Spec
}

// SandboxInfo says how calls are confined.
type SandboxInfo struct {
	// Backend is "landlock" or "none".
	Backend string
	// Enforced lists the protections in force (see sandbox.Runner.Enforced).
	Enforced []string
	// Network is "none", "allowlist" or "host".
	Network string
	// RunAs is the user tool processes run as.
	RunAs string
	// AllowedDomains are, with network "allowlist", the hosts and ports
	// the session's processes may reach through the egress proxy.
	AllowedDomains []string
}

// Accepted acknowledges a ToolUse.
type Accepted struct {
	ToolUseID       string
	ConcurrencySafe bool
	Duplicate       bool
}

// Started says a call began to run.
type Started struct {
	ToolUseID string
	QueueWait time.Duration
}

// Progress is new output of a running call. While it waits in the outbox,
// later progress of the same call is merged into it.
type Progress struct {
	ToolUseID  string
	Output     []byte
	Elapsed    time.Duration
	TotalLines uint64
	TotalBytes uint64
	// Dropped counts output bytes not carried by progress events because
	// the client fell behind.
	Dropped uint64
}

// PermissionRequest asks the client whether a call may run.
type PermissionRequest struct {
	ToolUseID     string
	ToolName      string
	Input         string
	Reason        string
	SuggestedRule string
}

// CallResult is the one result of a call.
type CallResult struct {
	ToolUseID string
	// ToolName is the canonical tool name ("" for an unknown tool: then the
	// name the model used).
	ToolName string
	*tool.Result
	ReceivedAt time.Time
	StartedAt  time.Time
	FinishedAt time.Time
}

// AbortAck confirms an Abort.
type AbortAck struct {
	Abort      Abort
	ToolUseIDs []string
}
