package execgrpc

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/settings/settingspb"
	"github.com/toolwire/toolwire/pkg/tool"
)

// What the server sends, the client reads back unchanged: every field the
// wire carries, for every kind of event.
func TestEventsRoundTrip(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1700000000+int64(s), 5000).UTC() }
	code := 3
	events := []execapi.Event{
		{Seq: 1, Time: at(0), Hello: &execapi.Hello{
			SessionID: "s1", Version: "1.2", MaxConcurrency: 4, Retention: time.Minute, Resumed: true, LastSequence: 9,
			Workspace: "/w", Tools: []string{"Bash", "Read"},
			Sandbox: execapi.SandboxInfo{Backend: "landlock", Enforced: []string{"landlock_fs", "pid_isolation"}, Network: "none", RunAs: "nobody"},
			Limits:  tool.Limits{DefaultTimeout: time.Minute, MaxTimeout: time.Hour, MaxOutputChars: 10, MaxReadBytes: 20, MaxOutputMemory: 30},
			MCPServers: []mcpclient.ServerStatus{{Name: "m", Transport: "stdio", Operator: true, State: mcpclient.StateFailed,
				Error: "gone", ServerName: "srv", ServerVersion: "0.1", Tools: 2}},
			MCPTools: []tool.Spec{{Name: "mcp__m__x", Description: "x", InputSchema: json.RawMessage(`{"type":"object"}`),
				ReadOnly: true, Concurrency: tool.ConcurrencyAlways}},
		}},
		{Seq: 2, Time: at(1), Accepted: &execapi.Accepted{ToolUseID: "a", ConcurrencySafe: true, Duplicate: true}},
		{Seq: 3, Time: at(2), Started: &execapi.Started{ToolUseID: "a", QueueWait: time.Second}},
		{Seq: 4, Time: at(3), Progress: &execapi.Progress{ToolUseID: "a", Output: []byte("out"), Elapsed: 2 * time.Second,
			TotalLines: 5, TotalBytes: 6, Dropped: 7}},
		{Seq: 5, Time: at(4), PermissionRequest: &execapi.PermissionRequest{ToolUseID: "a", ToolName: "Bash", Input: `{"command":"ls"}`,
			Reason: "ask", SuggestedRule: "Bash(ls:*)"}},
		{Seq: 6, Time: at(5), Result: &execapi.CallResult{ToolUseID: "a", ToolName: "Bash", Result: &tool.Result{
			Content: []tool.Content{{Text: "Exit code 3"}, {MediaType: "image/png", Data: []byte{1, 2, 3}}},
			// is_error on the wire says only that the result states it.
			IsError: true, StateIsError: true,
			Outcome:    tool.OutcomeToolError,
			Structured: json.RawMessage(`{"k":1}`), Truncation: &tool.Truncation{OriginalBytes: 9, OmittedBytes: 8, FullOutputPath: "/o"},
			ExitCode: &code, DecidedBy: "allow rule",
		}, ReceivedAt: at(1), StartedAt: at(2), FinishedAt: at(5)}},
		{Seq: 7, Time: at(6), Result: &execapi.CallResult{ToolUseID: "b", Result: &tool.Result{
			Content: []tool.Content{{Text: "ok"}}, StateIsError: true, Outcome: tool.OutcomeSuccess,
		}, ReceivedAt: at(1), FinishedAt: at(2)}},
		{Seq: 8, Time: at(7), AbortAck: &execapi.AbortAck{Abort: execapi.Abort{MessageID: "msg_1", Reason: execapi.AbortSiblingError, Detail: "d"},
			ToolUseIDs: []string{"a", "b"}}},
		{Seq: 9, Time: at(8), Task: &tool.TaskNotice{TaskID: "t", ToolUseID: "a", OutputPath: "/t", Status: "failed", ExitCode: &code, Summary: "s"}},
		{Seq: 10, Time: at(9), MCPToolsChanged: &execapi.MCPToolsChanged{
			Servers: []mcpclient.ServerStatus{{Name: "m", Transport: "http", State: mcpclient.StateConnected}},
			Tools:   []tool.Spec{{Name: "mcp__m__y", Concurrency: tool.ConcurrencyNever}}}},
	}
	for _, want := range events {
		got := eventFromProto(eventToProto(&want))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("event %d:\n got  %s\n want %s", want.Seq, show(got), show(want))
		}
	}
}

// A result the client writes itself (no timing) goes out without timing.
func TestResultWithoutTiming(t *testing.T) {
	m := ResultToProto(&execapi.CallResult{ToolUseID: "a", Result: tool.UseError(tool.OutcomeInterrupted, "stopped")})
	if m.Timing != nil || !m.GetIsError() || m.GetOutcome().String() != "OUTCOME_INTERRUPTED" {
		t.Fatalf("result = %v", m)
	}
}

// What the client sends, the server reads back unchanged.
func TestRequestsRoundTrip(t *testing.T) {
	use := execapi.ToolUse{ID: "a", Name: "Bash", Input: `{}`, MessageID: "m", Timeout: time.Minute, TraceParent: "tp", TraceState: "ts"}
	if got := toolUseFromProto(toolUseToProto(use)); got != use {
		t.Errorf("tool use: %+v", got)
	}
	for _, a := range []execapi.Abort{
		{All: true, Reason: execapi.AbortShutdown, Detail: "d"},
		{ToolUseID: "a", Reason: execapi.AbortTimeout},
		{MessageID: "m", Reason: execapi.AbortUserInterrupted},
	} {
		if got := abortFromProto(abortToProto(a)); got != a {
			t.Errorf("abort: %+v, want %+v", got, a)
		}
	}
	for _, d := range []execapi.PermissionDecision{
		{ToolUseID: "a", Behavior: execapi.PermissionDeny, Message: "no"},
		{ToolUseID: "a", Behavior: execapi.PermissionAllowOnce},
		{ToolUseID: "a", Behavior: execapi.PermissionAllowAlways},
	} {
		if got := DecisionFromProto(decisionToProto(d)); got != d {
			t.Errorf("decision: %+v, want %+v", got, d)
		}
	}
	req := execapi.OpenRequest{
		SessionID: "s", Workspace: "w", ClientName: "c", ClientVersion: "v", Tools: []string{},
		Options: execapi.SessionOptions{ResultOrder: execapi.OrderCompletion, NoSiblingAbort: true, MaxConcurrency: 2,
			DefaultTimeout: time.Minute, PermissionTimeout: time.Hour, FoldLifecycle: true},
		Settings:   settings.Settings{Permissions: settings.Permissions{Allow: []string{"Read"}, DefaultMode: permission.ModePlan}},
		MCPServers: mcpclient.Servers{"m": {Command: "srv", Args: []string{"-x"}}},
	}
	m := openToProto(req)
	set, err := settingspb.FromProto(m.GetSettings())
	if err != nil {
		t.Fatal(err)
	}
	got := execapi.OpenRequest{
		SessionID: m.GetSessionId(), Workspace: m.GetWorkspace(), ClientName: m.GetClientName(), ClientVersion: m.GetClientVersion(),
		Tools: toolSetFromProto(m.GetTools()), Options: OptionsFromProto(m.GetOptions()), Settings: set,
		MCPServers: MCPServersFromProto(m.GetMcpServers()),
	}
	if !reflect.DeepEqual(got, req) {
		t.Errorf("open:\n got  %+v\n want %+v", got, req)
	}
	if m := openToProto(execapi.OpenRequest{}); m.GetOptions() != nil || m.GetTools() != nil {
		t.Errorf("empty open: options %v, tools %v; want both unset", m.GetOptions(), m.GetTools())
	}
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
