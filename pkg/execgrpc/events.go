package execgrpc

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Conversions of what a session reports, between the protobuf messages
// and pkg/execapi: to protobuf for the server, back for the client, and
// exported where the orchestrator's edge relays executor messages.

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
	"workspace_quota":   executorv1.Protection_PROTECTION_WORKSPACE_QUOTA,
}

func eventToProto(ev *execapi.Event) *executorv1.ExecuteResponse {
	r := &executorv1.ExecuteResponse{Sequence: ev.Seq, Time: timestamppb.New(ev.Time)}
	switch {
	case ev.Hello != nil:
		r.Event = &executorv1.ExecuteResponse_Hello{Hello: helloToProto(ev.Hello)}
	case ev.Accepted != nil:
		a := ev.Accepted
		r.Event = &executorv1.ExecuteResponse_Accepted{Accepted: &executorv1.Accepted{
			ToolUseId: a.ToolUseID, ConcurrencySafe: a.ConcurrencySafe, Duplicate: a.Duplicate}}
	case ev.Started != nil:
		r.Event = &executorv1.ExecuteResponse_Started{Started: &executorv1.Started{
			ToolUseId: ev.Started.ToolUseID, QueueWait: durationpb.New(ev.Started.QueueWait)}}
	case ev.Progress != nil:
		r.Event = &executorv1.ExecuteResponse_Progress{Progress: ProgressToProto(ev.Progress)}
	case ev.PermissionRequest != nil:
		r.Event = &executorv1.ExecuteResponse_PermissionRequest{PermissionRequest: PermissionRequestToProto(ev.PermissionRequest)}
	case ev.Result != nil:
		r.Event = &executorv1.ExecuteResponse_Result{Result: ResultToProto(ev.Result)}
	case ev.AbortAck != nil:
		r.Event = &executorv1.ExecuteResponse_AbortAck{AbortAck: &executorv1.AbortAck{
			Abort: abortToProto(ev.AbortAck.Abort), ToolUseIds: ev.AbortAck.ToolUseIDs}}
	case ev.CheckpointList != nil:
		r.Event = &executorv1.ExecuteResponse_CheckpointList{CheckpointList: checkpointListToProto(ev.CheckpointList)}
	case ev.RestoreResult != nil:
		r.Event = &executorv1.ExecuteResponse_RestoreResult{RestoreResult: RestoreResultToProto(ev.RestoreResult)}
	case ev.BackgroundAck != nil:
		r.Event = &executorv1.ExecuteResponse_BackgroundAck{BackgroundAck: BackgroundAckToProto(ev.BackgroundAck)}
	case ev.Task != nil:
		r.Event = &executorv1.ExecuteResponse_TaskNotification{TaskNotification: TaskNoticeToProto(ev.Task)}
	case ev.MCPToolsChanged != nil:
		r.Event = &executorv1.ExecuteResponse_McpToolsChanged{McpToolsChanged: MCPToolsChangedToProto(ev.MCPToolsChanged)}
	}
	return r
}

// eventFromProto converts an event the client received. An event of a
// kind this client does not know comes back with no kind set.
func eventFromProto(m *executorv1.ExecuteResponse) execapi.Event {
	ev := execapi.Event{Seq: m.GetSequence(), Time: timeOf(m.GetTime())}
	switch e := m.GetEvent().(type) {
	case *executorv1.ExecuteResponse_Hello:
		ev.Hello = helloFromProto(e.Hello)
	case *executorv1.ExecuteResponse_Accepted:
		ev.Accepted = &execapi.Accepted{ToolUseID: e.Accepted.GetToolUseId(),
			ConcurrencySafe: e.Accepted.GetConcurrencySafe(), Duplicate: e.Accepted.GetDuplicate()}
	case *executorv1.ExecuteResponse_Started:
		ev.Started = &execapi.Started{ToolUseID: e.Started.GetToolUseId(), QueueWait: e.Started.GetQueueWait().AsDuration()}
	case *executorv1.ExecuteResponse_Progress:
		p := e.Progress
		ev.Progress = &execapi.Progress{ToolUseID: p.GetToolUseId(), Output: p.GetOutput(), Elapsed: p.GetElapsed().AsDuration(),
			TotalLines: p.GetTotalLines(), TotalBytes: p.GetTotalBytes(), Dropped: p.GetDroppedBytes()}
	case *executorv1.ExecuteResponse_PermissionRequest:
		q := e.PermissionRequest
		ev.PermissionRequest = &execapi.PermissionRequest{ToolUseID: q.GetToolUseId(), ToolName: q.GetToolName(),
			Input: q.GetInputJson(), Reason: q.GetReason(), SuggestedRule: q.GetSuggestedRule()}
	case *executorv1.ExecuteResponse_Result:
		ev.Result = resultFromProto(e.Result)
	case *executorv1.ExecuteResponse_CheckpointList:
		ev.CheckpointList = checkpointListFromProto(e.CheckpointList)
	case *executorv1.ExecuteResponse_RestoreResult:
		ev.RestoreResult = RestoreResultFromProto(e.RestoreResult)
	case *executorv1.ExecuteResponse_BackgroundAck:
		ev.BackgroundAck = BackgroundAckFromProto(e.BackgroundAck)
	case *executorv1.ExecuteResponse_AbortAck:
		ev.AbortAck = &execapi.AbortAck{Abort: abortFromProto(e.AbortAck.GetAbort()), ToolUseIDs: e.AbortAck.GetToolUseIds()}
	case *executorv1.ExecuteResponse_TaskNotification:
		n := e.TaskNotification
		ev.Task = &tool.TaskNotice{TaskID: n.GetTaskId(), ToolUseID: n.GetToolUseId(), OutputPath: n.GetOutputPath(),
			Status: n.GetStatus(), Summary: n.GetSummary()}
		if n.ExitCode != nil {
			code := int(n.GetExitCode())
			ev.Task.ExitCode = &code
		}
	case *executorv1.ExecuteResponse_McpToolsChanged:
		ev.MCPToolsChanged = &execapi.MCPToolsChanged{Servers: mcpStatusFromProto(e.McpToolsChanged.GetServers()),
			Tools: toolSpecsFromProto(e.McpToolsChanged.GetTools())}
	}
	return ev
}

// timeOf is ts as a time, zero when ts is unset.
func timeOf(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

// MCPToolsChangedToProto converts a change of a session's MCP servers
// and tools, for clients of the orchestrator too.
func MCPToolsChangedToProto(c *execapi.MCPToolsChanged) *executorv1.McpToolsChanged {
	return &executorv1.McpToolsChanged{Servers: MCPStatusToProto(c.Servers), Tools: toolSpecsToProto(c.Tools)}
}

// SandboxInfoToProto converts what a Hello says of the sandbox, for
// clients of the orchestrator too.
func SandboxInfoToProto(s execapi.SandboxInfo) *executorv1.SandboxInfo {
	var enforced []executorv1.Protection
	for _, name := range s.Enforced {
		if p, ok := protectionByName[name]; ok {
			enforced = append(enforced, p)
		}
	}
	return &executorv1.SandboxInfo{
		Backend: s.Backend, Enforced: enforced,
		Network: s.Network, RunAsUser: s.RunAs,
		AllowedDomains: s.AllowedDomains,
	}
}

func helloToProto(h *execapi.Hello) *executorv1.Hello {
	return &executorv1.Hello{
		SessionId:       h.SessionID,
		ExecutorVersion: h.Version,
		Sandbox:         SandboxInfoToProto(h.Sandbox),
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
		McpServers:      MCPStatusToProto(h.MCPServers),
		McpTools:        toolSpecsToProto(h.MCPTools),
		Tools:           h.Tools,
	}
}

func helloFromProto(m *executorv1.Hello) *execapi.Hello {
	h := &execapi.Hello{
		SessionID: m.GetSessionId(),
		Version:   m.GetExecutorVersion(),
		Sandbox: execapi.SandboxInfo{
			Backend: m.GetSandbox().GetBackend(), Network: m.GetSandbox().GetNetwork(), RunAs: m.GetSandbox().GetRunAsUser(),
			AllowedDomains: m.GetSandbox().GetAllowedDomains(),
		},
		Limits: tool.Limits{
			DefaultTimeout:  m.GetLimits().GetDefaultTimeout().AsDuration(),
			MaxTimeout:      m.GetLimits().GetMaxTimeout().AsDuration(),
			MaxOutputChars:  int(m.GetLimits().GetMaxOutputChars()),
			MaxReadBytes:    int64(m.GetLimits().GetMaxReadBytes()),
			MaxOutputMemory: int(m.GetLimits().GetMaxOutputMemoryBytes()),
		},
		MaxConcurrency: int(m.GetMaxConcurrency()),
		Retention:      m.GetResumeRetention().AsDuration(),
		Resumed:        m.GetResumed(),
		LastSequence:   m.GetLastSequence(),
		Workspace:      m.GetWorkspace(),
		MCPServers:     mcpStatusFromProto(m.GetMcpServers()),
		MCPTools:       toolSpecsFromProto(m.GetMcpTools()),
		Tools:          m.GetTools(),
	}
	for _, p := range m.GetSandbox().GetEnforced() {
		for name, pp := range protectionByName {
			if pp == p {
				h.Sandbox.Enforced = append(h.Sandbox.Enforced, name)
			}
		}
	}
	return h
}

// ProgressToProto converts new output of a running call.
func ProgressToProto(p *execapi.Progress) *executorv1.Progress {
	return &executorv1.Progress{
		ToolUseId: p.ToolUseID, Output: p.Output, Elapsed: durationpb.New(p.Elapsed),
		TotalLines: p.TotalLines, TotalBytes: p.TotalBytes, DroppedBytes: p.Dropped,
	}
}

// PermissionRequestToProto converts a permission request.
func PermissionRequestToProto(q *execapi.PermissionRequest) *executorv1.PermissionRequest {
	return &executorv1.PermissionRequest{
		ToolUseId: q.ToolUseID, ToolName: q.ToolName, InputJson: q.Input,
		Reason: q.Reason, SuggestedRule: q.SuggestedRule,
	}
}

// TaskNoticeToProto converts the notice of a finished background task.
func TaskNoticeToProto(t *tool.TaskNotice) *executorv1.TaskNotification {
	n := &executorv1.TaskNotification{TaskId: t.TaskID, ToolUseId: t.ToolUseID,
		OutputPath: t.OutputPath, Status: t.Status, Summary: t.Summary}
	if t.ExitCode != nil {
		n.ExitCode = proto.Int32(int32(*t.ExitCode))
	}
	return n
}

// ResultToProto converts a call's result. is_error is present when the
// result states it (IsError or StateIsError); the timing only when the
// executor timed the call.
func ResultToProto(cr *execapi.CallResult) *executorv1.Result {
	res := cr.Result
	m := &executorv1.Result{
		ToolUseId:      cr.ToolUseID,
		ToolName:       cr.ToolName,
		Outcome:        executorv1.Outcome(res.FinalOutcome()),
		StructuredJson: string(res.Structured),
		DecidedBy:      res.DecidedBy,
	}
	if res.IsError || res.StateIsError {
		m.IsError = proto.Bool(res.IsError)
	}
	if !cr.ReceivedAt.IsZero() {
		m.Timing = &executorv1.Timing{ReceivedAt: timestamppb.New(cr.ReceivedAt), FinishedAt: timestamppb.New(cr.FinishedAt)}
		if !cr.StartedAt.IsZero() {
			m.Timing.StartedAt = timestamppb.New(cr.StartedAt)
			m.Timing.QueueWait = durationpb.New(cr.StartedAt.Sub(cr.ReceivedAt))
			m.Timing.RunTime = durationpb.New(cr.FinishedAt.Sub(cr.StartedAt))
		} else {
			m.Timing.QueueWait = durationpb.New(cr.FinishedAt.Sub(cr.ReceivedAt))
		}
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

// resultFromProto converts a Result the client received. An image whose
// data is not base64 becomes a text block that says so, rather than
// vanishing from the result.
func resultFromProto(m *executorv1.Result) *execapi.CallResult {
	res := &tool.Result{
		Outcome:   tool.Outcome(m.GetOutcome()),
		DecidedBy: m.GetDecidedBy(),
	}
	if m.IsError != nil {
		res.IsError, res.StateIsError = m.GetIsError(), true
	}
	if s := m.GetStructuredJson(); s != "" {
		res.Structured = json.RawMessage(s)
	}
	for _, c := range m.GetContent() {
		res.Content = append(res.Content, contentFromProto(c))
	}
	if t := m.GetTruncation(); t != nil {
		res.Truncation = &tool.Truncation{OriginalBytes: t.GetOriginalBytes(), OmittedBytes: t.GetOmittedBytes(), FullOutputPath: t.GetFullOutputPath()}
	}
	if m.ExitCode != nil {
		code := int(m.GetExitCode())
		res.ExitCode = &code
	}
	return &execapi.CallResult{
		ToolUseID:  m.GetToolUseId(),
		ToolName:   m.GetToolName(),
		Result:     res,
		ReceivedAt: timeOf(m.GetTiming().GetReceivedAt()),
		StartedAt:  timeOf(m.GetTiming().GetStartedAt()),
		FinishedAt: timeOf(m.GetTiming().GetFinishedAt()),
	}
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

// contentFromProto converts one block of a Result the client received. An
// image or document whose data is not base64 becomes a text block that
// says so, rather than vanishing from the result.
func contentFromProto(c *executorv1.ContentBlock) tool.Content {
	var kind, mediaType, data64 string
	switch {
	case c.GetImage() != nil:
		kind, mediaType, data64 = "an image", c.GetImage().GetMediaType(), c.GetImage().GetDataBase64()
	case c.GetDocument() != nil:
		kind, mediaType, data64 = "a document", c.GetDocument().GetMediaType(), c.GetDocument().GetDataBase64()
	default:
		return tool.Content{Text: c.GetText().GetText()}
	}
	data, err := base64.StdEncoding.DecodeString(data64)
	if err != nil {
		return tool.Content{Text: "[" + kind + " (" + mediaType + ") the executor sent could not be decoded: " + err.Error() + "]"}
	}
	return tool.Content{MediaType: mediaType, Data: data}
}
