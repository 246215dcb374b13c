package orchgrpc

import (
	"fmt"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	orchestratorv1 "github.com/toolwire/toolwire/gen/toolwire/orchestrator/v1"
	"github.com/toolwire/toolwire/pkg/execgrpc"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/settings/settingspb"
)

// configFromProto converts a client's session configuration. Settings
// that do not convert (an unknown permission mode, a rule that does not
// parse) are errInvalidSettings.
func configFromProto(c *orchestratorv1.SessionConfig) (orchestrator.SessionConfig, error) {
	if c == nil {
		return orchestrator.SessionConfig{}, nil
	}
	cfg := orchestrator.SessionConfig{
		Executor:        c.GetExecutor(),
		Model:           c.GetModel(),
		SystemPrompt:    c.GetSystemPrompt(),
		MaxTokens:       int(c.GetMaxTokens()),
		MaxTurns:        int(c.GetMaxTurns()),
		AllowedTools:    c.GetAllowedTools(),
		DisallowedTools: c.GetDisallowedTools(),
		Workspace:       c.GetWorkspace(),
		ThinkingBudget:  int(c.GetThinkingBudgetTokens()),
		MCPServers:      execgrpc.MCPServersFromProto(c.GetMcpServers()),
		RequireSandbox:  c.GetRequireSandbox(),
	}
	if c.GetSettings() != nil {
		s, err := settingspb.FromProto(c.GetSettings())
		if err != nil {
			return orchestrator.SessionConfig{}, fmt.Errorf("%w: %w", errInvalidSettings, err)
		}
		cfg.Settings = &s
	}
	if c.GetOptions() != nil {
		o := execgrpc.OptionsFromProto(c.GetOptions())
		cfg.Options = &o
	}
	return cfg, nil
}

func usageToProto(u model.Usage) *orchestratorv1.Usage {
	return &orchestratorv1.Usage{
		InputTokens:              uint64(u.InputTokens),
		OutputTokens:             uint64(u.OutputTokens),
		CacheReadInputTokens:     uint64(u.CacheReadInputTokens),
		CacheCreationInputTokens: uint64(u.CacheCreationInputTokens),
	}
}

func sessionToProto(i orchestrator.Info) *orchestratorv1.Session {
	s := &orchestratorv1.Session{
		Id:           i.ID,
		Executor:     i.Executor,
		Model:        i.Model,
		CreatedAt:    timestamppb.New(i.CreatedAt),
		Turns:        uint32(i.Turns),
		Usage:        usageToProto(i.Usage),
		MessageCount: uint32(i.MessageCount),
		Busy:         i.Busy,
		McpServers:   execgrpc.MCPStatusToProto(i.MCPServers),
	}
	if i.Sandbox != nil {
		s.Sandbox = execgrpc.SandboxInfoToProto(*i.Sandbox)
	}
	return s
}

var stopReasons = map[orchestrator.StopReason]orchestratorv1.StopReason{
	orchestrator.StopEndTurn:      orchestratorv1.StopReason_STOP_REASON_END_TURN,
	orchestrator.StopMaxTurns:     orchestratorv1.StopReason_STOP_REASON_MAX_TURNS,
	orchestrator.StopInterrupted:  orchestratorv1.StopReason_STOP_REASON_INTERRUPTED,
	orchestrator.StopError:        orchestratorv1.StopReason_STOP_REASON_ERROR,
	orchestrator.StopStopSequence: orchestratorv1.StopReason_STOP_REASON_STOP_SEQUENCE,
	orchestrator.StopRefusal:      orchestratorv1.StopReason_STOP_REASON_REFUSAL,
}

// eventToProto converts a session event; events the API does not carry
// (call started, transcript messages, task notifications) give nil.
func eventToProto(ev orchestrator.Event) *orchestratorv1.ConverseResponse {
	r := &orchestratorv1.ConverseResponse{Sequence: ev.Seq, ParentToolUseId: ev.ParentToolUseID}
	switch ev.Kind {
	case orchestrator.EventText:
		r.Event = &orchestratorv1.ConverseResponse_TextDelta{TextDelta: &orchestratorv1.TextDelta{MessageId: ev.MessageID, Text: ev.Text}}
	case orchestrator.EventToolUse:
		r.Event = &orchestratorv1.ConverseResponse_ToolUse{ToolUse: &orchestratorv1.ToolUseAnnounced{
			MessageId: ev.MessageID, Id: ev.ToolUse.ID, Name: ev.ToolUse.Name, InputJson: ev.ToolUse.InputJSON,
		}}
	case orchestrator.EventProgress:
		r.Event = &orchestratorv1.ConverseResponse_ToolProgress{ToolProgress: execgrpc.ProgressToProto(ev.Progress)}
	case orchestrator.EventToolResult:
		r.Event = &orchestratorv1.ConverseResponse_ToolResult{ToolResult: execgrpc.ResultToProto(ev.Result)}
	case orchestrator.EventPermissionRequest:
		r.Event = &orchestratorv1.ConverseResponse_PermissionRequest{PermissionRequest: execgrpc.PermissionRequestToProto(ev.Permission)}
	case orchestrator.EventBackgroundAck:
		r.Event = &orchestratorv1.ConverseResponse_BackgroundAck{BackgroundAck: execgrpc.BackgroundAckToProto(ev.BackgroundAck)}
	case orchestrator.EventRetry:
		r.Event = &orchestratorv1.ConverseResponse_Retry{Retry: &orchestratorv1.Retry{
			Attempt: uint32(ev.Retry.Attempt), MaxAttempts: uint32(ev.Retry.MaxRetries),
			Delay: durationpb.New(ev.Retry.Delay), Reason: ev.Retry.Err.Error(),
		}}
	case orchestrator.EventError:
		r.Event = &orchestratorv1.ConverseResponse_Error{Error: &orchestratorv1.Error{
			Kind: ev.Error.Kind, Message: ev.Error.Message, Recoverable: ev.Error.Recoverable, Reason: eventReason(ev.Error.Err),
		}}
	case orchestrator.EventMCPToolsChanged:
		r.Event = &orchestratorv1.ConverseResponse_McpToolsChanged{McpToolsChanged: execgrpc.MCPToolsChangedToProto(ev.MCPToolsChanged)}
	case orchestrator.EventTurnComplete:
		t := ev.Turn
		r.Event = &orchestratorv1.ConverseResponse_TurnComplete{TurnComplete: &orchestratorv1.TurnComplete{
			StopReason: stopReasons[t.StopReason], Usage: usageToProto(t.Usage), Requests: uint32(t.Requests),
			Text: t.Text, Duration: durationpb.New(t.Duration),
		}}
	default:
		return nil
	}
	return r
}
