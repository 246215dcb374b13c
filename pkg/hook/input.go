package hook

import (
	"encoding/json"
	"fmt"
)

// Input is what a hook learns about the call. It reaches the hook's stdin
// as Claude Code's hook JSON:
//
//	{"session_id":"…","transcript_path":"","cwd":"…","hook_event_name":"PreToolUse",
//	 "tool_name":"Edit","tool_input":{…},"tool_response":{…},"tool_use_id":"…",
//	 "permission_mode":"default"}
//
// tool_response is present for PostToolUse only. transcript_path is always
// empty: toolwire keeps no transcript file a hook could read.
type Input struct {
	// SessionID identifies the session.
	SessionID string
	// Cwd is the session's current directory; the hook runs there. Empty
	// means the workspace.
	Cwd string
	// ToolName is the tool called, e.g. "Bash".
	ToolName string
	// ToolUseID is the id of the tool_use block.
	ToolUseID string
	// ToolInput is the call's input object; nil is sent as {}.
	ToolInput json.RawMessage
	// ToolResponse is what the tool returned (PostToolUse only); nil is
	// sent as null.
	ToolResponse json.RawMessage
	// PermissionMode is the session's permission mode; empty is sent as
	// "default".
	PermissionMode string
}

// wireInput is the JSON shape of Input, fields in Claude Code's order.
type wireInput struct {
	SessionID      string           `json:"session_id"`
	TranscriptPath string           `json:"transcript_path"`
	Cwd            string           `json:"cwd"`
	HookEventName  string           `json:"hook_event_name"`
	ToolName       string           `json:"tool_name"`
	ToolInput      json.RawMessage  `json:"tool_input"`
	ToolResponse   *json.RawMessage `json:"tool_response,omitempty"`
	ToolUseID      string           `json:"tool_use_id"`
	PermissionMode string           `json:"permission_mode"`
}

// Marshal returns the JSON a hook for ev gets on stdin; cwd replaces an
// empty in.Cwd.
func (in Input) Marshal(ev Event, cwd string) ([]byte, error) {
	w := wireInput{
		SessionID:      in.SessionID,
		Cwd:            in.Cwd,
		HookEventName:  ev.String(),
		ToolName:       in.ToolName,
		ToolInput:      in.ToolInput,
		ToolUseID:      in.ToolUseID,
		PermissionMode: in.PermissionMode,
	}
	if w.Cwd == "" {
		w.Cwd = cwd
	}
	if len(w.ToolInput) == 0 {
		w.ToolInput = json.RawMessage("{}")
	}
	if ev == PostToolUse {
		resp := in.ToolResponse
		if len(resp) == 0 {
			resp = json.RawMessage("null")
		}
		w.ToolResponse = &resp
	}
	if w.PermissionMode == "" {
		w.PermissionMode = "default"
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("hook: encode %s input for %s: %w", ev, in.ToolName, err)
	}
	return b, nil
}
