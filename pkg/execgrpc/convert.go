package execgrpc

import (
	"google.golang.org/protobuf/types/known/durationpb"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/settings/settingspb"
)

// Conversions of what a client sends, between the protobuf messages and
// pkg/execapi. Each pair is the inverse of the other for every value the
// wire can carry.

func toolUseFromProto(m *executorv1.ToolUse) execapi.ToolUse {
	return execapi.ToolUse{
		ID:          m.GetId(),
		Name:        m.GetName(),
		Input:       m.GetInputJson(),
		MessageID:   m.GetAssistantMessageId(),
		Timeout:     m.GetTimeout().AsDuration(),
		TraceParent: m.GetTraceparent(),
		TraceState:  m.GetTracestate(),
	}
}

func toolUseToProto(u execapi.ToolUse) *executorv1.ToolUse {
	m := &executorv1.ToolUse{
		Id: u.ID, Name: u.Name, InputJson: u.Input, AssistantMessageId: u.MessageID,
		Traceparent: u.TraceParent, Tracestate: u.TraceState,
	}
	if u.Timeout > 0 {
		m.Timeout = durationpb.New(u.Timeout)
	}
	return m
}

var abortReasons = map[executorv1.AbortReason]execapi.AbortReason{
	executorv1.AbortReason_ABORT_REASON_USER_INTERRUPTED:   execapi.AbortUserInterrupted,
	executorv1.AbortReason_ABORT_REASON_STREAMING_FALLBACK: execapi.AbortStreamingFallback,
	executorv1.AbortReason_ABORT_REASON_SIBLING_ERROR:      execapi.AbortSiblingError,
	executorv1.AbortReason_ABORT_REASON_TIMEOUT:            execapi.AbortTimeout,
	executorv1.AbortReason_ABORT_REASON_SHUTDOWN:           execapi.AbortShutdown,
}

func abortFromProto(m *executorv1.Abort) execapi.Abort {
	a := execapi.Abort{
		ToolUseID: m.GetToolUseId(),
		MessageID: m.GetAssistantMessageId(),
		All:       m.GetAll(),
		Detail:    m.GetDetail(),
		Reason:    abortReasons[m.GetReason()],
	}
	if a.Reason == 0 {
		a.Reason = execapi.AbortUserInterrupted
	}
	return a
}

func abortToProto(a execapi.Abort) *executorv1.Abort {
	m := &executorv1.Abort{Detail: a.Detail}
	for pr, r := range abortReasons {
		if r == a.Reason {
			m.Reason = pr
		}
	}
	switch {
	case a.All:
		m.Target = &executorv1.Abort_All{All: true}
	case a.ToolUseID != "":
		m.Target = &executorv1.Abort_ToolUseId{ToolUseId: a.ToolUseID}
	case a.MessageID != "":
		m.Target = &executorv1.Abort_AssistantMessageId{AssistantMessageId: a.MessageID}
	}
	return m
}

var behaviors = map[executorv1.PermissionBehavior]execapi.PermissionBehavior{
	executorv1.PermissionBehavior_PERMISSION_BEHAVIOR_DENY:         execapi.PermissionDeny,
	executorv1.PermissionBehavior_PERMISSION_BEHAVIOR_ALLOW_ONCE:   execapi.PermissionAllowOnce,
	executorv1.PermissionBehavior_PERMISSION_BEHAVIOR_ALLOW_ALWAYS: execapi.PermissionAllowAlways,
}

// DecisionFromProto converts a permission decision; an unknown behaviour
// denies.
func DecisionFromProto(m *executorv1.PermissionDecision) execapi.PermissionDecision {
	return execapi.PermissionDecision{ToolUseID: m.GetToolUseId(), Behavior: behaviors[m.GetBehavior()], Message: m.GetMessage()}
}

func decisionToProto(d execapi.PermissionDecision) *executorv1.PermissionDecision {
	m := &executorv1.PermissionDecision{ToolUseId: d.ToolUseID, Message: d.Message}
	for pb, b := range behaviors {
		if b == d.Behavior {
			m.Behavior = pb
		}
	}
	return m
}

// toolSetFromProto returns the names of a ToolSet: nil when it is unset
// (every tool), never nil when it is set (an empty set offers none).
func toolSetFromProto(m *executorv1.ToolSet) []string {
	if m == nil {
		return nil
	}
	return append([]string{}, m.GetNames()...)
}

func toolSetToProto(names []string) *executorv1.ToolSet {
	if names == nil {
		return nil
	}
	return &executorv1.ToolSet{Names: append([]string{}, names...)}
}

// OptionsFromProto converts a session's scheduling options.
func OptionsFromProto(m *executorv1.SessionOptions) execapi.SessionOptions {
	o := execapi.SessionOptions{
		MaxConcurrency:    int(m.GetMaxConcurrency()),
		DefaultTimeout:    m.GetDefaultTimeout().AsDuration(),
		PermissionTimeout: m.GetPermissionTimeout().AsDuration(),
		NoSiblingAbort:    m.GetSiblingAbort() == executorv1.SiblingAbort_SIBLING_ABORT_DISABLED,
		FoldLifecycle:     m.GetLifecycle() == executorv1.Lifecycle_LIFECYCLE_FOLDED,
	}
	if m.GetResultOrder() == executorv1.ResultOrder_RESULT_ORDER_COMPLETION {
		o.ResultOrder = execapi.OrderCompletion
	}
	return o
}

// optionsToProto converts options for Open; the zero options give nil,
// which the executor reads the same way.
func optionsToProto(o execapi.SessionOptions) *executorv1.SessionOptions {
	if o == (execapi.SessionOptions{}) {
		return nil
	}
	m := &executorv1.SessionOptions{MaxConcurrency: uint32(max(o.MaxConcurrency, 0))}
	if o.ResultOrder == execapi.OrderCompletion {
		m.ResultOrder = executorv1.ResultOrder_RESULT_ORDER_COMPLETION
	}
	if o.NoSiblingAbort {
		m.SiblingAbort = executorv1.SiblingAbort_SIBLING_ABORT_DISABLED
	}
	if o.DefaultTimeout > 0 {
		m.DefaultTimeout = durationpb.New(o.DefaultTimeout)
	}
	if o.PermissionTimeout > 0 {
		m.PermissionTimeout = durationpb.New(o.PermissionTimeout)
	}
	if o.FoldLifecycle {
		m.Lifecycle = executorv1.Lifecycle_LIFECYCLE_FOLDED
	}
	return m
}

func openToProto(r execapi.OpenRequest) *executorv1.Open {
	return &executorv1.Open{
		SessionId:     r.SessionID,
		Workspace:     r.Workspace,
		Options:       optionsToProto(r.Options),
		Settings:      settingspb.ToProto(r.Settings),
		ClientName:    r.ClientName,
		ClientVersion: r.ClientVersion,
		McpServers:    MCPServersToProto(r.MCPServers),
		Tools:         toolSetToProto(r.Tools),
	}
}
