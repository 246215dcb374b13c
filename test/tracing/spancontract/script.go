// Package spancontract holds the span contract of a conversation's trace,
// as docs/observability.md describes it, and a scripted conversation that
// exercises every part of it.
//
// Script is what a fake Messages API (pkg/model/fakeapi) answers: three
// model requests, the first with a Write and a Bash (calls that run one
// after the other), the second with two Reads and a Glob (calls that run in
// parallel, one of them failing), the third ending the turn. Check then
// verifies the trace Jaeger holds for that turn: the orchestrator's
// invoke_agent span, a chat span per model request and an execute_tool span
// per tool call under it, and under each execute_tool the run_tool span that
// toolsvc made for the same call, with its stages and, for Bash, the
// process.
//
// The end-to-end tests of test/tracing (processes on loopback) and
// test/compose (the compose deployment) share it, so both hold the
// deployment to the same contract.
package spancontract

import (
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
)

// Model is the model the conversation asks for.
const Model = "claude-trace-contract"

// Prompt is the user message that starts the turn.
const Prompt = "Write two lines to notes.txt, count them, then read everything back."

// FinalText is the assistant's last message, the turn's result.
const FinalText = "notes.txt has two lines."

// NotesContent is what the Write call writes; the Bash call counts its
// lines.
const NotesContent = "one\ntwo\n"

// Call is one tool call of the conversation.
type Call struct {
	// ID is the tool_use id.
	ID string
	// Name is the tool.
	Name string
	// IsError says that the call's result is an error (the Read of a file
	// that does not exist).
	IsError bool
}

// Request is one model request of the conversation and the reply it gets.
type Request struct {
	// Calls are the tool calls of the reply, in order.
	Calls []Call
	// StopReason is the reply's stop reason.
	StopReason string
}

// Requests lists the conversation's model requests in order.
var Requests = []Request{
	{
		Calls:      []Call{{ID: "toolu_trace_write", Name: "Write"}, {ID: "toolu_trace_bash", Name: "Bash"}},
		StopReason: "tool_use",
	},
	{
		Calls: []Call{
			{ID: "toolu_trace_read", Name: "Read"},
			{ID: "toolu_trace_glob", Name: "Glob"},
			{ID: "toolu_trace_missing", Name: "Read", IsError: true},
		},
		StopReason: "tool_use",
	},
	{StopReason: "end_turn"},
}

// Calls returns every tool call of the conversation in order.
func Calls() []Call {
	var out []Call
	for _, r := range Requests {
		out = append(out, r.Calls...)
	}
	return out
}

// Script returns the fake API's replies, one per entry of Requests. File
// paths are relative, so the conversation runs in whatever workspace the
// executor gives the session.
func Script() []fakeapi.Reply {
	return []fakeapi.Reply{
		fakeapi.ToolTurn(
			fakeapi.Text("Writing the notes, then counting their lines."),
			fakeapi.ToolUse("toolu_trace_write", "Write", map[string]any{"file_path": "notes.txt", "content": NotesContent}),
			fakeapi.ToolUse("toolu_trace_bash", "Bash", map[string]any{"command": "wc -l < notes.txt", "description": "Count the lines"}),
		),
		fakeapi.ToolTurn(
			fakeapi.ToolUse("toolu_trace_read", "Read", map[string]any{"file_path": "notes.txt"}),
			fakeapi.ToolUse("toolu_trace_glob", "Glob", map[string]any{"pattern": "*.txt"}),
			fakeapi.ToolUse("toolu_trace_missing", "Read", map[string]any{"file_path": "missing.txt"}),
		),
		fakeapi.EndTurn(fakeapi.Text(FinalText)),
	}
}
