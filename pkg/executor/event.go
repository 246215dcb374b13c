package executor

import "github.com/toolwire/toolwire/pkg/execapi"

// The vocabulary of a session lives in pkg/execapi, shared with the
// executor's clients and the gRPC edge; these names keep the pipeline's
// code as it reads.
type (
	ToolUse            = execapi.ToolUse
	AbortReason        = execapi.AbortReason
	Abort              = execapi.Abort
	PermissionBehavior = execapi.PermissionBehavior
	PermissionDecision = execapi.PermissionDecision
	Event              = execapi.Event
	Hello              = execapi.Hello
	MCPToolsChanged    = execapi.MCPToolsChanged
	SandboxInfo        = execapi.SandboxInfo
	Accepted           = execapi.Accepted
	Started            = execapi.Started
	Progress           = execapi.Progress
	PermissionRequest  = execapi.PermissionRequest
	CallResult         = execapi.CallResult
	AbortAck           = execapi.AbortAck
	Background         = execapi.Background
	BackgroundAck      = execapi.BackgroundAck
	OpenRequest        = execapi.OpenRequest
	SessionOptions     = execapi.SessionOptions
	ResultOrder        = execapi.ResultOrder
)

const (
	AbortUserInterrupted   = execapi.AbortUserInterrupted
	AbortStreamingFallback = execapi.AbortStreamingFallback
	AbortSiblingError      = execapi.AbortSiblingError
	AbortTimeout           = execapi.AbortTimeout
	AbortShutdown          = execapi.AbortShutdown

	PermissionDeny        = execapi.PermissionDeny
	PermissionAllowOnce   = execapi.PermissionAllowOnce
	PermissionAllowAlways = execapi.PermissionAllowAlways

	OrderToolUse    = execapi.OrderToolUse
	OrderCompletion = execapi.OrderCompletion
)
