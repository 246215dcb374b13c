package execapi

import (
	"time"

	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Event is one thing a session reports. Exactly one of the pointer fields
// is set.
type Event struct {
	// Seq is the per-session sequence number, assigned when the event leaves
	// the executor's outbox.
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
	BackgroundAck     *BackgroundAck
	CheckpointList    *CheckpointList
	RestoreResult     *RestoreResult
}

// Hello describes the session and what the executor enforces.
type Hello struct {
	SessionID      string
	Version        string
	Sandbox        SandboxInfo
	Limits         tool.Limits
	MaxConcurrency int
	// Retention is how long the executor keeps the session after its
	// stream broke, for a Resume.
	Retention time.Duration
	// Resumed is true when the stream reattached to a session the executor
	// already had.
	Resumed bool
	// LastSequence is the highest sequence number produced before this
	// Hello.
	LastSequence uint64
	Workspace    string
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
	// ReceivedAt, StartedAt and FinishedAt time the call on the executor;
	// StartedAt is zero for a call that never ran, and all three are zero
	// for a result the client wrote itself.
	ReceivedAt time.Time
	StartedAt  time.Time
	FinishedAt time.Time
}

// AbortAck confirms an Abort.
type AbortAck struct {
	Abort      Abort
	ToolUseIDs []string
}

// ToolInfo is a tool as an executor lists it: its spec and the older names
// it also answers to.
type ToolInfo struct {
	tool.Spec
	// Aliases are the tool's older names (BashOutput for TaskOutput),
	// sorted.
	Aliases []string
}
