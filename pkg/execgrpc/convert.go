package execgrpc

import (
	"encoding/base64"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/tool"
)

func toolUseFromProto(m *executorv1.ToolUse) executor.ToolUse {
	return executor.ToolUse{
		ID:          m.GetId(),
		Name:        m.GetName(),
		Input:       m.GetInputJson(),
		MessageID:   m.GetAssistantMessageId(),
		Timeout:     m.GetTimeout().AsDuration(),
		TraceParent: m.GetTraceparent(),
		TraceState:  m.GetTracestate(),
	}
}

func abortFromProto(m *executorv1.Abort) executor.Abort {
	a := executor.Abort{
		ToolUseID: m.GetToolUseId(),
		MessageID: m.GetAssistantMessageId(),
		All:       m.GetAll(),
		Detail:    m.GetDetail(),
	}
	switch m.GetReason() {
	case executorv1.AbortReason_ABORT_REASON_STREAMING_FALLBACK:
		a.Reason = executor.AbortStreamingFallback
	case executorv1.AbortReason_ABORT_REASON_SIBLING_ERROR:
		a.Reason = executor.AbortSiblingError
	case executorv1.AbortReason_ABORT_REASON_TIMEOUT:
		a.Reason = executor.AbortTimeout
	case executorv1.AbortReason_ABORT_REASON_SHUTDOWN:
		a.Reason = executor.AbortShutdown
	default:
		a.Reason = executor.AbortUserInterrupted
	}
	return a
}

func abortToProto(a executor.Abort) *executorv1.Abort {
	m := &executorv1.Abort{Reason: executorv1.AbortReason(a.Reason), Detail: a.Detail}
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

func decisionFromProto(m *executorv1.PermissionDecision) executor.PermissionDecision {
	d := executor.PermissionDecision{ToolUseID: m.GetToolUseId(), Message: m.GetMessage()}
	switch m.GetBehavior() {
	case executorv1.PermissionBehavior_PERMISSION_BEHAVIOR_ALLOW_ONCE:
		d.Behavior = executor.PermissionAllowOnce
	case executorv1.PermissionBehavior_PERMISSION_BEHAVIOR_ALLOW_ALWAYS:
		d.Behavior = executor.PermissionAllowAlways
	default:
		d.Behavior = executor.PermissionDeny
	}
	return d
}

// toolSetFromProto returns the names of a ToolSet: nil when it is unset
// (every tool), never nil when it is set (an empty set offers none).
func toolSetFromProto(m *executorv1.ToolSet) []string {
	if m == nil {
		return nil
	}
	return append([]string{}, m.GetNames()...)
}

func optionsFromProto(m *executorv1.SessionOptions) executor.SessionOptions {
	o := executor.SessionOptions{
		MaxConcurrency:    int(m.GetMaxConcurrency()),
		DefaultTimeout:    m.GetDefaultTimeout().AsDuration(),
		PermissionTimeout: m.GetPermissionTimeout().AsDuration(),
		NoSiblingAbort:    m.GetSiblingAbort() == executorv1.SiblingAbort_SIBLING_ABORT_DISABLED,
	}
	if m.GetResultOrder() == executorv1.ResultOrder_RESULT_ORDER_COMPLETION {
		o.ResultOrder = executor.OrderCompletion
	}
	return o
}

var protectionByName = map[string]executorv1.Protection{
	"file_roots":        executorv1.Protection_PROTECTION_FILE_ROOTS,
	"landlock_fs":       executorv1.Protection_PROTECTION_LANDLOCK_FS,
	"network_isolation": executorv1.Protection_PROTECTION_NETWORK_ISOLATION,
	"process_tree":      executorv1.Protection_PROTECTION_PROCESS_TREE,
	"resource_limits":   executorv1.Protection_PROTECTION_RESOURCE_LIMITS,
	"unprivileged_user": executorv1.Protection_PROTECTION_UNPRIVILEGED_USER,
	"clean_environment": executorv1.Protection_PROTECTION_CLEAN_ENVIRONMENT,
	"pid_isolation":     executorv1.Protection_PROTECTION_PID_ISOLATION,
	"no_new_privs":      executorv1.Protection_PROTECTION_NO_NEW_PRIVS,
	"landlock_scope":    executorv1.Protection_PROTECTION_LANDLOCK_SCOPE,
	"process_group":     executorv1.Protection_PROTECTION_PROCESS_GROUP,
	"egress_allowlist":  executorv1.Protection_PROTECTION_EGRESS_ALLOWLIST,
}

func eventToProto(ev *executor.Event) *executorv1.ExecuteResponse {
	r := &executorv1.ExecuteResponse{Sequence: ev.Seq, Time: timestamppb.New(ev.Time)}
	switch {
	case ev.Hello != nil:
		h := ev.Hello
		var enforced []executorv1.Protection
		for _, name := range h.Sandbox.Enforced {
			if p, ok := protectionByName[name]; ok {
				enforced = append(enforced, p)
			}
		}
		r.Event = &executorv1.ExecuteResponse_Hello{Hello: &executorv1.Hello{
			SessionId:       h.SessionID,
			ExecutorVersion: h.Version,
			Sandbox: &executorv1.SandboxInfo{
				Backend: h.Sandbox.Backend, Enforced: enforced,
				Network: h.Sandbox.Network, RunAsUser: h.Sandbox.RunAs,
				AllowedDomains: h.Sandbox.AllowedDomains,
			},
			Limits: &executorv1.Limits{
				DefaultTimeout:       durationpb.New(h.Limits.DefaultTimeout),
				MaxTimeout:           durationpb.New(h.Limits.MaxTimeout),
				MaxOutputChars:       uint64(h.Limits.MaxOutputChars),
				MaxReadBytes:         uint64(h.Limits.MaxReadBytes),
				MaxOutputMemoryBytes: uint64(h.Limits.MaxOutputMemory),
			},
			MaxConcurrency:  uint32(h.MaxConcurrency),
			ResumeRetention: durationpb.New(h.Retention),
			Resumed:         h.Resumed,
			LastSequence:    h.LastSequence,
			Workspace:       h.Workspace,
			McpServers:      mcpStatusToProto(h.MCPServers),
			McpTools:        toolSpecsToProto(h.MCPTools),
			Tools:           h.Tools,
		}}
	case ev.Accepted != nil:
		a := ev.Accepted
		r.Event = &executorv1.ExecuteResponse_Accepted{Accepted: &executorv1.Accepted{
			ToolUseId: a.ToolUseID, ConcurrencySafe: a.ConcurrencySafe, Duplicate: a.Duplicate}}
	case ev.Started != nil:
		r.Event = &executorv1.ExecuteResponse_Started{Started: &executorv1.Started{
			ToolUseId: ev.Started.ToolUseID, QueueWait: durationpb.New(ev.Started.QueueWait)}}
	case ev.Progress != nil:
		p := ev.Progress
		r.Event = &executorv1.ExecuteResponse_Progress{Progress: &executorv1.Progress{
			ToolUseId: p.ToolUseID, Output: p.Output, Elapsed: durationpb.New(p.Elapsed),
			TotalLines: p.TotalLines, TotalBytes: p.TotalBytes, DroppedBytes: p.Dropped}}
	case ev.PermissionRequest != nil:
		q := ev.PermissionRequest
		r.Event = &executorv1.ExecuteResponse_PermissionRequest{PermissionRequest: &executorv1.PermissionRequest{
			ToolUseId: q.ToolUseID, ToolName: q.ToolName, InputJson: q.Input,
			Reason: q.Reason, SuggestedRule: q.SuggestedRule}}
	case ev.Result != nil:
		r.Event = &executorv1.ExecuteResponse_Result{Result: resultToProto(ev.Result)}
	case ev.AbortAck != nil:
		r.Event = &executorv1.ExecuteResponse_AbortAck{AbortAck: &executorv1.AbortAck{
			Abort: abortToProto(ev.AbortAck.Abort), ToolUseIds: ev.AbortAck.ToolUseIDs}}
	case ev.Task != nil:
		t := ev.Task
		n := &executorv1.TaskNotification{TaskId: t.TaskID, ToolUseId: t.ToolUseID,
			OutputPath: t.OutputPath, Status: t.Status, Summary: t.Summary}
		if t.ExitCode != nil {
			n.ExitCode = proto.Int32(int32(*t.ExitCode))
		}
		r.Event = &executorv1.ExecuteResponse_TaskNotification{TaskNotification: n}
	case ev.MCPToolsChanged != nil:
		r.Event = &executorv1.ExecuteResponse_McpToolsChanged{McpToolsChanged: &executorv1.McpToolsChanged{
			Servers: mcpStatusToProto(ev.MCPToolsChanged.Servers), Tools: toolSpecsToProto(ev.MCPToolsChanged.Tools)}}
	}
	return r
}

func resultToProto(cr *executor.CallResult) *executorv1.Result {
	res := cr.Result
	m := &executorv1.Result{
		ToolUseId:      cr.ToolUseID,
		ToolName:       cr.ToolName,
		Outcome:        executorv1.Outcome(res.FinalOutcome()),
		StructuredJson: string(res.Structured),
		DecidedBy:      res.DecidedBy,
		Timing: &executorv1.Timing{
			ReceivedAt: timestamppb.New(cr.ReceivedAt),
			FinishedAt: timestamppb.New(cr.FinishedAt),
		},
	}
	if res.IsError || res.StateIsError {
		m.IsError = proto.Bool(res.IsError)
	}
	if !cr.StartedAt.IsZero() {
		m.Timing.StartedAt = timestamppb.New(cr.StartedAt)
		m.Timing.QueueWait = durationpb.New(cr.StartedAt.Sub(cr.ReceivedAt))
		m.Timing.RunTime = durationpb.New(cr.FinishedAt.Sub(cr.StartedAt))
	} else {
		m.Timing.QueueWait = durationpb.New(cr.FinishedAt.Sub(cr.ReceivedAt))
	}
	for _, c := range res.Content {
		m.Content = append(m.Content, contentToProto(c))
	}
	if t := res.Truncation; t != nil {
		m.Truncation = &executorv1.Truncation{OriginalBytes: t.OriginalBytes, OmittedBytes: t.OmittedBytes, FullOutputPath: t.FullOutputPath}
	}
	if res.ExitCode != nil {
		m.ExitCode = proto.Int32(int32(*res.ExitCode))
	}
	return m
}

// contentToProto converts one block of a tool's result.
func contentToProto(c tool.Content) *executorv1.ContentBlock {
	switch {
	case c.IsDocument():
		return &executorv1.ContentBlock{Block: &executorv1.ContentBlock_Document{
			Document: &executorv1.DocumentBlock{MediaType: c.MediaType, DataBase64: base64.StdEncoding.EncodeToString(c.Data)}}}
	case c.IsImage():
		return &executorv1.ContentBlock{Block: &executorv1.ContentBlock_Image{
			Image: &executorv1.ImageBlock{MediaType: c.MediaType, DataBase64: base64.StdEncoding.EncodeToString(c.Data)}}}
	default:
		return &executorv1.ContentBlock{Block: &executorv1.ContentBlock_Text{
			Text: &executorv1.TextBlock{Text: strings.ToValidUTF8(c.Text, "\uFFFD")}}}
	}
}

// ToolSpecToProto converts a tool spec to its ListTools form.
func toolSpecToProto(s tool.Spec) *executorv1.ToolDefinition {
	c := executorv1.Concurrency_CONCURRENCY_NEVER
	switch s.Concurrency {
	case tool.ConcurrencyAlways:
		c = executorv1.Concurrency_CONCURRENCY_ALWAYS
	case tool.ConcurrencyDependsOnInput:
		c = executorv1.Concurrency_CONCURRENCY_DEPENDS_ON_INPUT
	}
	return &executorv1.ToolDefinition{
		Name: s.Name, Description: s.Description, InputSchemaJson: string(s.InputSchema),
		ReadOnly: s.ReadOnly, Concurrency: c,
	}
}
