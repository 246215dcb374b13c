package orchestrator_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/settings"
)

// subagentReply answers the conversation's requests with main and its
// subagents' (told apart by their system prompt) with sub.
func subagentReply(main, sub fakeapi.Responder) fakeapi.Responder {
	return func(r *fakeapi.Request) fakeapi.Reply {
		for _, s := range r.Body.System {
			if strings.Contains(s.Text, "agent started by another agent") {
				return sub(r)
			}
		}
		return main(r)
	}
}

// A subagent's spans are under its Agent call's: execute_tool Agent holds
// invoke_agent general-purpose, which holds the subagent's model requests
// and its execute_tool spans, whose run_tool spans the executor makes.
// Not parallel: it installs the global tracer provider.
func TestAgentTrace(t *testing.T) {
	rec := recordSpans(t)

	h := newHarness(t)
	a := h.write("a.txt", "alpha\n")
	h.fake.SetFallback(subagentReply(
		func(r *fakeapi.Request) fakeapi.Reply {
			if len(r.Body.Messages) == 1 {
				return fakeapi.ToolTurn(fakeapi.ToolUse("toolu_agent", "Agent", map[string]any{"description": "read", "prompt": "read a.txt"}))
			}
			return fakeapi.EndTurn(fakeapi.Text("done"))
		},
		func(r *fakeapi.Request) fakeapi.Reply {
			if len(r.Body.Messages) == 1 {
				return fakeapi.ToolTurn(fakeapi.ToolUse("toolu_sub", "Read", map[string]any{"file_path": a}))
			}
			return fakeapi.EndTurn(fakeapi.Text("alpha"))
		}))
	s := h.session(orchestrator.SessionConfig{})
	if res := h.run(s, "go"); res.StopReason != orchestrator.StopEndTurn {
		t.Fatalf("turn = %+v", res)
	}
	h.close()

	byName := map[string][]sdktrace.ReadOnlySpan{}
	spans := rec.Ended()
	for _, sp := range spans {
		byName[sp.Name()] = append(byName[sp.Name()], sp)
	}
	one := func(name string) sdktrace.ReadOnlySpan {
		t.Helper()
		if len(byName[name]) != 1 {
			t.Fatalf("%d %q spans; spans: %v", len(byName[name]), name, names(spans))
		}
		return byName[name][0]
	}
	call, agent, read, run := one("execute_tool Agent"), one("invoke_agent general-purpose"), one("execute_tool Read"), one("run_tool Read")
	if agent.Parent().SpanID() != call.SpanContext().SpanID() {
		t.Error("invoke_agent general-purpose is not under execute_tool Agent")
	}
	if read.Parent().SpanID() != agent.SpanContext().SpanID() || attr(read, "gen_ai.tool.call.id") != "toolu_sub" {
		t.Error("the subagent's execute_tool Read is not under its invoke_agent")
	}
	if run.Parent().SpanID() != read.SpanContext().SpanID() {
		t.Error("the executor's run_tool Read is not under the subagent's execute_tool Read")
	}
	var subChats int
	for _, c := range byName["chat claude-test"] {
		if c.Parent().SpanID() == agent.SpanContext().SpanID() {
			subChats++
		}
	}
	if subChats != 2 || attr(agent, "gen_ai.agent.name") != "general-purpose" {
		t.Errorf("%d chat spans under the subagent, want 2; attributes %v", subChats, agent.Attributes())
	}
}

// Two Agent calls of one message run at once on the conversation's
// executor session; an interrupt stops both subagents and their commands,
// and every tool_use, the subagents' included, gets exactly one result.
func TestAgentInterruptStopsSubagents(t *testing.T) {
	h := newHarness(t)
	const tag = "777.3141"
	h.fake.SetFallback(subagentReply(
		func(r *fakeapi.Request) fakeapi.Reply {
			return fakeapi.ToolTurn(
				fakeapi.ToolUse("toolu_a1", "Agent", map[string]any{"description": "one", "prompt": "one"}),
				fakeapi.ToolUse("toolu_a2", "Agent", map[string]any{"description": "two", "prompt": "two"}),
				fakeapi.ToolUse("toolu_list", "TaskList", map[string]any{}),
			)
		},
		func(r *fakeapi.Request) fakeapi.Reply {
			return fakeapi.ToolTurn(fakeapi.ToolUse("toolu_sleep_"+r.Body.Messages[0].Text(), "Bash",
				map[string]any{"command": "sleep " + tag, "timeout": 600000}))
		}))
	s := h.session(bypass)
	done := make(chan *orchestrator.TurnResult, 1)
	go func() {
		res, err := s.Run(context.Background(), "go")
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	started := map[string]string{}
	sub := s.Subscribe(0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for len(started) < 2 {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for both subagents' commands: %v (started %v)", err, started)
		}
		if ev.Kind == orchestrator.EventToolStarted && ev.ParentToolUseID != "" {
			started[ev.Started.ToolUseID] = ev.ParentToolUseID
		}
	}
	if started["toolu_sleep_one"] != "toolu_a1" || started["toolu_sleep_two"] != "toolu_a2" {
		t.Fatalf("started calls and their Agent calls: %v", started)
	}
	s.Interrupt("test")
	res := <-done
	if res.StopReason != orchestrator.StopInterrupted {
		t.Fatalf("turn = %+v", res)
	}
	for deadline := time.Now().Add(10 * time.Second); len(processesWith(tag)) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the subagents' commands outlived the interrupt: %v", processesWith(tag))
		}
	}
	msgs := s.Messages()
	checkValid(t, msgs)
	results, _ := toolResults(msgs[len(msgs)-1])
	for _, id := range []string{"toolu_a1", "toolu_a2"} {
		if b := results[id]; !isError(b) || !strings.Contains(resultText(b), "Interrupted") {
			t.Errorf("%s: %+v", id, b)
		}
	}
	if b := results["toolu_list"]; isError(b) || resultText(b) != "No tasks found" {
		t.Errorf("TaskList: %+v", b)
	}
	// The subagents' calls: one result each, published under their parent.
	h.close()
	count := map[string]int{}
	for _, ev := range ofKind(events(s), orchestrator.EventToolResult) {
		if ev.ParentToolUseID != "" {
			count[ev.Result.ToolUseID]++
			if !ev.Result.IsError {
				t.Errorf("an interrupted subagent call succeeded: %+v", ev.Result)
			}
		}
	}
	if count["toolu_sleep_one"] != 1 || count["toolu_sleep_two"] != 1 || len(count) != 2 {
		t.Fatalf("subagent results: %v", count)
	}
}

// The local tools follow the session's tool lists like the executor's: a
// disallowed one is not offered, and a call of it gets a not-enabled error
// without running. Task, Agent's older name, starts a subagent.
func TestLocalToolsFollowToolLists(t *testing.T) {
	h := newHarness(t)
	h.fake.SetFallback(subagentReply(
		func(r *fakeapi.Request) fakeapi.Reply {
			if len(r.Body.Messages) == 1 {
				return fakeapi.ToolTurn(
					fakeapi.ToolUse("toolu_create", "TaskCreate", map[string]any{"subject": "s", "description": "d"}),
					fakeapi.ToolUse("toolu_task", "Task", map[string]any{"description": "x", "prompt": "say hi", "subagent_type": "general-purpose"}),
					fakeapi.ToolUse("toolu_nope", "Agent", map[string]any{"description": "x", "prompt": "x", "subagent_type": "no-such-agent"}),
				)
			}
			return fakeapi.EndTurn(fakeapi.Text("done"))
		},
		func(r *fakeapi.Request) fakeapi.Reply { return fakeapi.EndTurn(fakeapi.Text("hi")) }))
	s := h.session(orchestrator.SessionConfig{DisallowedTools: []string{"TaskCreate"},
		Settings: &settings.Settings{Permissions: settings.Permissions{Deny: []string{"TaskUpdate", "TaskGet(1)"}}}})
	if res := h.run(s, "go"); res.StopReason != orchestrator.StopEndTurn {
		t.Fatalf("turn = %+v", res)
	}
	var offered []string
	for _, tl := range h.fake.Requests()[0].Body.Tools {
		offered = append(offered, tl.Name)
	}
	if slices.Contains(offered, "TaskCreate") || slices.Contains(offered, "TaskUpdate") ||
		!slices.Contains(offered, "TaskList") || !slices.Contains(offered, "TaskGet") {
		t.Fatalf("offered %v: want neither TaskCreate (disallowed) nor TaskUpdate (denied whole), but TaskList and TaskGet", offered)
	}
	msgs := s.Messages()
	checkValid(t, msgs)
	results, _ := toolResults(msgs[2])
	if b := results["toolu_create"]; !isError(b) || !strings.Contains(resultText(b), "TaskCreate exists but is not enabled") {
		t.Errorf("TaskCreate: %+v", b)
	}
	if b := results["toolu_task"]; isError(b) || len(b.Content) != 2 || b.Content[0].Text != "hi" {
		t.Errorf("Task: %+v", b)
	}
	if b := results["toolu_nope"]; !isError(b) || !strings.Contains(resultText(b), "Agent type 'no-such-agent' not found. Available agents: general-purpose, Explore") {
		t.Errorf("unknown agent type: %+v", b)
	}
	if len(s.Tasks()) != 0 {
		t.Errorf("a refused TaskCreate made a task: %+v", s.Tasks())
	}
}
