package orchestrator_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/embedded"
	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/tool"
)

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }

// processesWith returns the pids of processes whose command line has an
// argument equal to arg.
// processesGone waits a few seconds for the processes with argument arg to
// be gone and returns those still there. A killed process can be listed for
// a moment after its call's Result, which comes as soon as the kill is sent.
func processesGone(arg string) []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := processesWith(arg)
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func processesWith(arg string) []string {
	entries, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(cmdline), "\x00") {
			if a == arg {
				pids = append(pids, e.Name())
				break
			}
		}
	}
	return pids
}

func TestParallelReads(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.write("a.txt", "alpha\n"), h.write("b.txt", "bravo\n"), h.write("c.txt", "charlie\n")
	h.fake.Push(fakeapi.ToolTurn(
		fakeapi.Text("Reading three files."),
		fakeapi.ToolUse("toolu_a", "Read", map[string]any{"file_path": a}),
		fakeapi.ToolUse("toolu_b", "Read", map[string]any{"file_path": b}),
		fakeapi.ToolUse("toolu_c", "Read", map[string]any{"file_path": c}),
	), fakeapi.EndTurn(fakeapi.Text("All three read.")))
	s := h.session(orchestrator.SessionConfig{})
	res := h.run(s, "read a, b and c")

	if res.StopReason != orchestrator.StopEndTurn || res.Requests != 2 || res.Text != "All three read." {
		t.Fatalf("turn = %+v", res)
	}
	reqs := h.fake.Requests()
	second := lastMessage(t, reqs[1])
	if second.Role != model.RoleUser {
		t.Fatalf("results sent as %s", second.Role)
	}
	results, order := toolResults(second)
	if len(order) != 3 || len(second.Content) != 3 {
		t.Fatalf("one user message with exactly three tool_results expected, got %+v", second.Content)
	}
	for id, want := range map[string]string{"toolu_a": "alpha", "toolu_b": "bravo", "toolu_c": "charlie"} {
		r, ok := results[id]
		if !ok || !strings.Contains(resultText(r), "1\t"+want) || r.IsError != nil {
			t.Fatalf("result for %s = %+v", id, r)
		}
	}
	// Every request offers the tools sorted by name, with the last one a
	// cache breakpoint, and marks the system prompt and newest block.
	tools := reqs[1].Body.Tools
	for i := 1; i < len(tools); i++ {
		if tools[i-1].Name >= tools[i].Name {
			t.Fatalf("tools not sorted: %s before %s", tools[i-1].Name, tools[i].Name)
		}
	}
	if string(tools[len(tools)-1].CacheControl) != `{"type":"ephemeral"}` || string(reqs[1].Body.System[0].CacheControl) != `{"type":"ephemeral"}` {
		t.Fatal("cache breakpoints missing on the last tool or the system prompt")
	}
	checkValid(t, s.Messages())
}

func TestReadThenEditInOneMessage(t *testing.T) {
	h := newHarness(t)
	f := h.write("main.go", "package main\n\nfunc main() { println(\"old\") }\n")
	h.fake.Push(fakeapi.ToolTurn(
		fakeapi.ToolUse("toolu_read", "Read", map[string]any{"file_path": f}),
		fakeapi.ToolUse("toolu_edit", "Edit", map[string]any{"file_path": f, "old_string": `"old"`, "new_string": `"new"`}),
	), fakeapi.EndTurn(fakeapi.Text("Changed.")))
	s := h.session(bypass)
	res := h.run(s, "change old to new")
	if res.StopReason != orchestrator.StopEndTurn {
		t.Fatalf("turn = %+v", res)
	}
	results, _ := toolResults(lastMessage(t, h.fake.Requests()[1]))
	if r := results["toolu_read"]; isError(r) || !strings.Contains(resultText(r), `println("old")`) {
		t.Fatalf("read result = %+v", r)
	}
	if r := results["toolu_edit"]; isError(r) {
		t.Fatalf("edit failed: %s", resultText(r))
	}
	got, _ := os.ReadFile(f)
	if !strings.Contains(string(got), `println("new")`) {
		t.Fatalf("file after edit: %s", got)
	}
}

func TestInvalidToolInput(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(fakeapi.ToolTurn(
		fakeapi.ToolUse("toolu_type", "Read", map[string]any{"file_path": 42}),
		fakeapi.ToolUse("toolu_json", "Read", `{"file_path": "x.txt"`),
		fakeapi.ToolUse("toolu_tool", "Teleport", map[string]any{}),
	), fakeapi.EndTurn(fakeapi.Text("I see the errors.")))
	s := h.session(orchestrator.SessionConfig{})
	res := h.run(s, "go")
	if res.StopReason != orchestrator.StopEndTurn || res.Requests != 2 {
		t.Fatalf("turn = %+v", res)
	}
	second := h.fake.Requests()[1]
	results, order := toolResults(lastMessage(t, second))
	if len(order) != 3 {
		t.Fatalf("results = %v", order)
	}
	for _, id := range order {
		r := results[id]
		if !isError(r) || !strings.HasPrefix(resultText(r), "<tool_use_error>") {
			t.Fatalf("%s: want an is_error <tool_use_error> result, got %+v", id, r)
		}
	}
	// The unparsable input is kept as {} in the transcript sent back.
	asst := second.Body.Messages[1]
	if got := string(asst.Content[1].Input); got != "{}" {
		t.Fatalf("unparsable input sent back as %s", got)
	}
	checkValid(t, s.Messages())
}

// TestToolStartsBeforeMessageEnds holds the model's message open after its
// first tool_use block until that call has started on the executor: the
// call cannot have waited for the end of the message.
func TestToolStartsBeforeMessageEnds(t *testing.T) {
	h := newHarness(t)
	gate := make(chan struct{})
	second := fakeapi.ToolUse("toolu_2", "Bash", map[string]any{"command": "echo second"})
	second.Wait = gate
	h.fake.Push(fakeapi.ToolTurn(
		fakeapi.ToolUse("toolu_1", "Bash", map[string]any{"command": "echo first > first.txt"}),
		second,
	), fakeapi.EndTurn(fakeapi.Text("done")))
	s := h.session(bypass)

	done := make(chan *orchestrator.TurnResult, 1)
	go func() {
		res, _ := s.Run(context.Background(), "go")
		done <- res
	}()
	waitEvent(t, s, func(ev orchestrator.Event) bool {
		return ev.Kind == orchestrator.EventToolResult && ev.Result.ToolUseID == "toolu_1"
	})
	// toolu_1 ran to completion while the message was still streaming.
	if b, err := os.ReadFile(filepath.Join(h.root, "first.txt")); err != nil || string(b) != "first\n" {
		t.Fatalf("first call's effect: %q %v", b, err)
	}
	close(gate)
	if res := <-done; res.StopReason != orchestrator.StopEndTurn {
		t.Fatalf("turn = %+v", res)
	}
	// The orchestrator folds a short call's Started into its Result, so
	// either call may have one or not; any there is names one of them, in
	// order.
	var ids []string
	for _, ev := range ofKind(events(s), orchestrator.EventToolStarted) {
		ids = append(ids, ev.Started.ToolUseID)
	}
	allowed := [][]string{nil, {"toolu_1"}, {"toolu_2"}, {"toolu_1", "toolu_2"}}
	if !slices.ContainsFunc(allowed, func(a []string) bool { return slices.Equal(a, ids) }) {
		t.Fatalf("started events for %v", ids)
	}
}

// The orchestrator opens its executor sessions with LIFECYCLE_FOLDED: a
// call that ends while its Started is held gets no EventToolStarted (its
// Result says when it started); one still running when the hold ends gets
// it. The hold is two seconds here, far longer than a Read takes.
func TestShortCallsHaveNoStartedEvent(t *testing.T) {
	h := newHarnessWith(t, embedded.Config{Limits: tool.Limits{ProgressInterval: 2 * time.Second}})
	a := h.write("a.txt", "alpha\n")
	h.fake.Push(fakeapi.ToolTurn(
		fakeapi.ToolUse("toolu_read", "Read", map[string]any{"file_path": a}),
		fakeapi.ToolUse("toolu_sleep", "Bash", map[string]any{"command": "sleep 3"}),
	), fakeapi.EndTurn(fakeapi.Text("done")))
	s := h.session(bypass)
	if res := h.run(s, "go"); res.StopReason != orchestrator.StopEndTurn {
		t.Fatalf("turn = %+v", res)
	}
	evs := events(s)
	var started []string
	for _, ev := range ofKind(evs, orchestrator.EventToolStarted) {
		started = append(started, ev.Started.ToolUseID)
	}
	if !slices.Equal(started, []string{"toolu_sleep"}) {
		t.Fatalf("started events for %v, want only toolu_sleep's", started)
	}
	if n := len(ofKind(evs, orchestrator.EventToolResult)); n != 2 {
		t.Fatalf("%d results, want 2", n)
	}
}

func TestPermissionAskRelayedAndAnswered(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(fakeapi.ToolTurn(
		fakeapi.ToolUse("toolu_yes", "Bash", map[string]any{"command": "touch allowed.txt"}),
		fakeapi.ToolUse("toolu_no", "Bash", map[string]any{"command": "touch denied.txt"}),
	), fakeapi.EndTurn(fakeapi.Text("ok")))
	s := h.session(orchestrator.SessionConfig{Settings: &settings.Settings{Permissions: settings.Permissions{
		Ask: []string{"Bash"}, DefaultMode: permission.ModeDefault,
	}}})
	// A client follows the session and answers what it is asked.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	asked := make(chan string, 2)
	go func() {
		sub := s.Subscribe(0)
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				return
			}
			if ev.Kind != orchestrator.EventPermissionRequest {
				continue
			}
			id := ev.Permission.ToolUseID
			asked <- id
			d := execapi.PermissionDecision{ToolUseID: id, Behavior: execapi.PermissionAllowOnce}
			if id == "toolu_no" {
				d.Behavior, d.Message = execapi.PermissionDeny, "not this one"
			}
			if err := s.Decide(d); err != nil {
				t.Errorf("decide: %v", err)
			}
		}
	}()
	res := h.run(s, "touch two files")
	if res.StopReason != orchestrator.StopEndTurn {
		t.Fatalf("turn = %+v", res)
	}
	if len(asked) == 0 {
		failWithoutPermissions(t, h)
	}
	if len(asked) != 2 {
		t.Fatalf("asked for %d calls, want 2", len(asked))
	}
	results, _ := toolResults(lastMessage(t, h.fake.Requests()[1]))
	if r := results["toolu_yes"]; isError(r) {
		t.Fatalf("allowed call failed: %s", resultText(r))
	}
	if r := results["toolu_no"]; !isError(r) || !strings.Contains(resultText(r), "not this one") {
		t.Fatalf("denied call: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(h.root, "allowed.txt")); err != nil {
		t.Fatalf("allowed call did not run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.root, "denied.txt")); err == nil {
		t.Fatal("denied call ran")
	}
}

func TestPlanMode(t *testing.T) {
	h := newHarness(t)
	f := h.write("notes.txt", "plan\n")
	h.fake.Push(fakeapi.ToolTurn(
		fakeapi.ToolUse("toolu_read", "Read", map[string]any{"file_path": f}),
		fakeapi.ToolUse("toolu_write", "Write", map[string]any{"file_path": filepath.Join(h.root, "new.txt"), "content": "x"}),
	), fakeapi.EndTurn(fakeapi.Text("Here is the plan.")))
	s := h.session(orchestrator.SessionConfig{Settings: &settings.Settings{Permissions: settings.Permissions{DefaultMode: permission.ModePlan}}})
	res := h.run(s, "plan it")
	if res.StopReason != orchestrator.StopEndTurn {
		t.Fatalf("turn = %+v", res)
	}
	results, _ := toolResults(lastMessage(t, h.fake.Requests()[1]))
	if r := results["toolu_read"]; isError(r) || !strings.Contains(resultText(r), "plan") {
		t.Fatalf("read in plan mode: %+v", r)
	}
	if r := results["toolu_write"]; !isError(r) {
		if _, err := os.Stat(filepath.Join(h.root, "new.txt")); err == nil {
			failWithoutPermissions(t, h)
		}
		t.Fatalf("write in plan mode: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(h.root, "new.txt")); err == nil {
		t.Fatal("write ran in plan mode")
	}
}

// failWithoutPermissions fails a permission test whose call ran although
// the session's permission settings should have stopped it.
func failWithoutPermissions(t *testing.T, h *harness) {
	t.Helper()
	t.Fatal("the executor ran the call without applying the session's permission settings")
}

func TestInterruptDuringRunningTool(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(fakeapi.ToolTurn(
		fakeapi.ToolUse("toolu_sleep", "Bash", map[string]any{"command": "echo begin; sleep 29.7531; echo never"}),
	))
	s := h.session(bypass)
	done := make(chan *orchestrator.TurnResult, 1)
	go func() {
		res, _ := s.Run(context.Background(), "wait a while")
		done <- res
	}()
	waitEvent(t, s, func(ev orchestrator.Event) bool { return ev.Kind == orchestrator.EventToolStarted })
	s.Interrupt("user pressed Esc")
	var res *orchestrator.TurnResult
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the turn did not end after the interrupt")
	}
	if res.StopReason != orchestrator.StopInterrupted || res.Requests != 1 {
		t.Fatalf("turn = %+v", res)
	}
	msgs := s.Messages()
	checkValid(t, msgs)
	last := msgs[len(msgs)-1]
	results, _ := toolResults(last)
	r, ok := results["toolu_sleep"]
	if !ok || !isError(r) || strings.Contains(resultText(r), "never") {
		t.Fatalf("interrupted call's result = %+v", r)
	}
	if last.Content[len(last.Content)-1].Text != "[Request interrupted by user]" {
		t.Fatalf("no interruption note: %+v", last.Content)
	}
	if pids := processesGone("29.7531"); len(pids) > 0 {
		t.Fatalf("the interrupted command still runs: pids %v", pids)
	}

	// The conversation goes on from a valid transcript.
	h.fake.Push(fakeapi.EndTurn(fakeapi.Text("Stopped, as asked.")))
	if res := h.run(s, "never mind"); res.StopReason != orchestrator.StopEndTurn {
		t.Fatalf("next turn = %+v", res)
	}
	reqs := h.fake.Requests()
	next := reqs[len(reqs)-1].Body.Messages
	checkValid(t, next)
	if got := next[len(next)-1].Content; got[len(got)-1].Text != "never mind" {
		t.Fatalf("next request's last message = %+v", got)
	}
}

func TestStreamCutKeepsCompleteToolUses(t *testing.T) {
	h := newHarness(t)
	f := h.write("x.txt", "x\n")
	h.fake.Push(fakeapi.Cut(2,
		fakeapi.ToolUse("toolu_bash", "Bash", map[string]any{"command": "echo ran >> runs.log"}),
		fakeapi.ToolUse("toolu_read", "Read", map[string]any{"file_path": f}),
		fakeapi.ToolUse("toolu_lost", "Bash", map[string]any{"command": "echo lost >> runs.log"}),
	), fakeapi.EndTurn(fakeapi.Text("Carrying on.")))
	s := h.session(bypass)
	res := h.run(s, "go")
	if res.StopReason != orchestrator.StopEndTurn || res.Requests != 2 {
		t.Fatalf("turn = %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(h.root, "runs.log")); string(b) != "ran\n" {
		t.Fatalf("runs.log = %q: the kept call must run exactly once and the cut one never", b)
	}
	second := h.fake.Requests()[1]
	asst := second.Body.Messages[1]
	if uses := asst.ToolUses(); len(uses) != 2 || uses[0].ID != "toolu_bash" || uses[1].ID != "toolu_read" {
		t.Fatalf("assistant message sent back = %+v", asst)
	}
	results, order := toolResults(lastMessage(t, second))
	if len(order) != 2 || isError(results["toolu_bash"]) || isError(results["toolu_read"]) {
		t.Fatalf("results = %+v", results)
	}
	errs := ofKind(events(s), orchestrator.EventError)
	if len(errs) != 1 || errs[0].Error.Kind != "stream_cut" || !errs[0].Error.Recoverable ||
		!strings.HasPrefix(errs[0].Error.Message, "API Error: Connection closed mid-response") {
		t.Fatalf("error events = %+v", errs)
	}
	checkValid(t, s.Messages())
}

func TestOverloadedThenSuccess(t *testing.T) {
	h := newHarness(t, fakeapi.Overloaded(), fakeapi.EndTurn(fakeapi.Text("Hello.")))
	s := h.session(orchestrator.SessionConfig{})
	res := h.run(s, "hi")
	if res.StopReason != orchestrator.StopEndTurn || res.Text != "Hello." || res.Requests != 1 {
		t.Fatalf("turn = %+v", res)
	}
	retries := ofKind(events(s), orchestrator.EventRetry)
	var ae *model.APIError
	if len(retries) != 1 || retries[0].Retry.Attempt != 1 || !errors.As(retries[0].Retry.Err, &ae) || ae.StatusCode != 529 {
		t.Fatalf("retry events = %+v", retries)
	}
	reqs := h.fake.Requests()
	if len(reqs) != 2 || !reflect.DeepEqual(reqs[0].JSON, reqs[1].JSON) {
		t.Fatalf("the retry must carry the identical request (%d requests)", len(reqs))
	}
}

func TestOverloadedPersists(t *testing.T) {
	h := newHarness(t, fakeapi.Overloaded(), fakeapi.Overloaded(), fakeapi.Overloaded())
	s := h.session(orchestrator.SessionConfig{})
	res := h.run(s, "hi")
	if res.StopReason != orchestrator.StopError || res.Err == nil || !strings.Contains(res.Err.Error(), "overloaded_error") {
		t.Fatalf("turn = %+v", res)
	}
	evs := events(s)
	if n := len(ofKind(evs, orchestrator.EventRetry)); n != 2 {
		t.Fatalf("%d retries reported, want 2", n)
	}
	if errs := ofKind(evs, orchestrator.EventError); len(errs) != 1 || errs[0].Error.Kind != "api_error" || errs[0].Error.Recoverable {
		t.Fatalf("errors = %+v", errs)
	}
	// The user's message stays; the next turn sends both.
	h.fake.Push(fakeapi.EndTurn(fakeapi.Text("Back.")))
	h.run(s, "again")
	reqs := h.fake.Requests()
	msgs := reqs[len(reqs)-1].Body.Messages
	if len(msgs) != 1 || msgs[0].Text() != "hiagain" {
		t.Fatalf("messages after a failed turn = %+v", msgs)
	}
}

func TestMaxTokensContinuation(t *testing.T) {
	h := newHarness(t)
	f := h.write("a.txt", "alpha\n")
	h.fake.Push(
		fakeapi.MaxTokens(fakeapi.Text("Part one, ")),
		fakeapi.MaxTokens(fakeapi.ToolUse("toolu_r", "Read", map[string]any{"file_path": f})),
		fakeapi.EndTurn(fakeapi.Text("part two.")),
	)
	s := h.session(orchestrator.SessionConfig{})
	res := h.run(s, "write a lot")
	if res.StopReason != orchestrator.StopEndTurn || res.Requests != 3 || res.Text != "part two." {
		t.Fatalf("turn = %+v", res)
	}
	reqs := h.fake.Requests()
	// After plain text: the partial answer, then a user message asking to go on.
	m := reqs[1].Body.Messages
	if len(m) != 3 || m[1].Text() != "Part one, " || m[2].Role != model.RoleUser || !strings.Contains(m[2].Text(), "Continue") {
		t.Fatalf("second request = %+v", m)
	}
	// After a complete tool_use: its result first, then the request to go on.
	last := lastMessage(t, reqs[2])
	if len(last.Content) != 2 || last.Content[0].Type != model.BlockToolResult || !strings.Contains(last.Content[1].Text, "Continue") {
		t.Fatalf("third request's last message = %+v", last.Content)
	}
	checkValid(t, s.Messages())
}

func TestMaxTurns(t *testing.T) {
	h := newHarness(t)
	f := h.write("a.txt", "alpha\n")
	n := 0
	h.fake.SetFallback(func(*fakeapi.Request) fakeapi.Reply {
		n++
		return fakeapi.ToolTurn(fakeapi.ToolUse("toolu_"+string(rune('a'+n)), "Read", map[string]any{"file_path": f}))
	})
	s := h.session(orchestrator.SessionConfig{MaxTurns: 3})
	res := h.run(s, "loop forever")
	if res.StopReason != orchestrator.StopMaxTurns || res.Requests != 3 || res.Err == nil {
		t.Fatalf("turn = %+v", res)
	}
	if got := len(h.fake.Requests()); got != 3 {
		t.Fatalf("%d requests, want 3", got)
	}
	errs := ofKind(events(s), orchestrator.EventError)
	if len(errs) != 1 || errs[0].Error.Kind != "max_turns" {
		t.Fatalf("errors = %+v", errs)
	}
	// The last call's result is in the transcript, so it stays valid.
	checkValid(t, s.Messages())
}

func TestResumeAfterRestart(t *testing.T) {
	h := newHarness(t)
	f := h.write("a.txt", "alpha\n")
	h.fake.Push(
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_1", "Read", map[string]any{"file_path": f})),
		fakeapi.EndTurn(fakeapi.Text("It says alpha.")),
	)
	s := h.session(orchestrator.SessionConfig{Model: "claude-resume", MaxTurns: 9})
	id := s.ID()
	h.run(s, "what does a.txt say?")
	before := s.Messages()

	h.restart()
	s2, err := h.orch.Session(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := s2.Messages(); !reflect.DeepEqual(mustJSON(got), mustJSON(before)) {
		t.Fatalf("transcript after restart:\n%s\nwant\n%s", mustJSON(got), mustJSON(before))
	}
	if info := s2.Info(); info.Turns != 1 || info.Model != "claude-resume" || info.MessageCount != 4 {
		t.Fatalf("info after restart = %+v", info)
	}
	h.fake.Push(fakeapi.EndTurn(fakeapi.Text("Still alpha.")))
	if res := h.run(s2, "and now?"); res.StopReason != orchestrator.StopEndTurn {
		t.Fatalf("turn after restart = %+v", res)
	}
	reqs := h.fake.Requests()
	last := reqs[len(reqs)-1]
	if last.Body.Model != "claude-resume" || len(last.Body.Messages) != 5 {
		t.Fatalf("request after restart: model %s, %d messages", last.Body.Model, len(last.Body.Messages))
	}
	checkValid(t, last.Body.Messages)
}

func TestResumeRepairsUnansweredToolUses(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(fakeapi.EndTurn(fakeapi.Text("hi")))
	s := h.session(orchestrator.SessionConfig{})
	id := s.ID()
	h.run(s, "hello")
	h.close()
	// A crash after the assistant message was written but before its
	// results: append that message as the orchestrator would have.
	line := `{"type":"message","time":"2026-01-01T00:00:00Z","message":{"role":"user","content":[{"type":"text","text":"run it"}]}}` + "\n" +
		`{"type":"message","time":"2026-01-01T00:00:01Z","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_x","name":"Bash","input":{"command":"sleep 1"}}]}}` + "\n"
	fh, err := os.OpenFile(filepath.Join(h.storeDir, id+".jsonl"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteString(line)
	fh.Close()

	h.open()
	s2, err := h.orch.Session(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	msgs := s2.Messages()
	checkValid(t, msgs)
	results, _ := toolResults(msgs[len(msgs)-1])
	if r, ok := results["toolu_x"]; !ok || !isError(r) || !strings.Contains(resultText(r), "restarted") {
		t.Fatalf("repaired result = %+v", r)
	}
	h.fake.Push(fakeapi.EndTurn(fakeapi.Text("ok")))
	h.run(s2, "status?")
	reqs := h.fake.Requests()
	checkValid(t, reqs[len(reqs)-1].Body.Messages)
}

func TestBackgroundTaskNotification(t *testing.T) {
	h := newHarness(t)
	notified := make(chan struct{})
	var s *orchestrator.Session
	h.fake.Push(fakeapi.ToolTurn(fakeapi.ToolUse("toolu_bg", "Bash", map[string]any{
		"command": "sleep 0.2; echo finished", "run_in_background": true, "description": "short job",
	})))
	h.fake.PushFunc(func(r *fakeapi.Request) fakeapi.Reply {
		// Answer only after the executor reported the task's end, so the
		// notification is pending when the model ends its turn.
		select {
		case <-notified:
		case <-r.Context().Done():
		}
		return fakeapi.EndTurn(fakeapi.Text("Started it."))
	}, fakeapi.Static(fakeapi.EndTurn(fakeapi.Text("It finished."))))
	s = h.session(bypass)
	go func() {
		waitEvent(t, s, func(ev orchestrator.Event) bool { return ev.Kind == orchestrator.EventTaskNotification })
		close(notified)
	}()
	res := h.run(s, "run it in the background")
	if res.StopReason != orchestrator.StopEndTurn || res.Requests != 3 || res.Text != "It finished." {
		t.Fatalf("turn = %+v", res)
	}
	last := lastMessage(t, h.fake.Requests()[2])
	text := last.Text()
	if last.Role != model.RoleUser || !strings.Contains(text, "<task-notification>") ||
		!strings.Contains(text, "<tool-use-id>toolu_bg</tool-use-id>") || !strings.Contains(text, "<status>completed</status>") {
		t.Fatalf("notification message = %q", text)
	}
	checkValid(t, s.Messages())
}

func TestDisallowedToolsNotOffered(t *testing.T) {
	h := newHarness(t, fakeapi.EndTurn(fakeapi.Text("ok")))
	s := h.session(orchestrator.SessionConfig{DisallowedTools: []string{"Bash", "Write"}})
	h.run(s, "hi")
	for _, tl := range h.fake.Requests()[0].Body.Tools {
		if tl.Name == "Bash" || tl.Name == "Write" {
			t.Fatalf("disallowed tool %s offered", tl.Name)
		}
	}
	if len(h.fake.Requests()[0].Body.Tools) == 0 {
		t.Fatal("no tools offered at all")
	}
}

func TestSessionsListGetDelete(t *testing.T) {
	h := newHarness(t, fakeapi.EndTurn(fakeapi.Text("ok")))
	ctx := context.Background()
	s := h.session(orchestrator.SessionConfig{})
	h.run(s, "hi")
	if _, err := h.orch.Create(ctx, s.ID(), orchestrator.SessionConfig{}); !errors.Is(err, orchestrator.ErrExists) {
		t.Fatalf("create with a used id: %v", err)
	}
	if _, err := h.orch.Create(ctx, "../escape", orchestrator.SessionConfig{}); !errors.Is(err, orchestrator.ErrInvalid) {
		t.Fatalf("create with a bad id: %v", err)
	}
	infos, err := h.orch.List(ctx)
	if err != nil || len(infos) != 1 || infos[0].ID != s.ID() || infos[0].Turns != 1 || infos[0].MessageCount != 2 {
		t.Fatalf("list = %+v, %v", infos, err)
	}
	if err := h.orch.Delete(ctx, s.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.orch.Session(ctx, s.ID()); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := h.orch.Delete(ctx, s.ID()); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestBusySession(t *testing.T) {
	gate := make(chan struct{})
	b := fakeapi.Text("slow")
	b.Wait = gate
	h := newHarness(t, fakeapi.EndTurn(b))
	s := h.session(orchestrator.SessionConfig{})
	if err := s.Start("first"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background(), "second"); !errors.Is(err, orchestrator.ErrBusy) {
		t.Fatalf("second turn while busy: %v", err)
	}
	close(gate)
	waitEvent(t, s, func(ev orchestrator.Event) bool { return ev.Kind == orchestrator.EventTurnComplete })
}

// TestInterruptDuringStream interrupts while the model is still streaming:
// the stream stops, the call its complete tool_use started is aborted, and
// the transcript keeps both the block and its result.
func TestInterruptDuringStream(t *testing.T) {
	h := newHarness(t)
	never := make(chan struct{})
	defer close(never)
	rest := fakeapi.Text("this never arrives")
	rest.Wait = never
	h.fake.Push(fakeapi.ToolTurn(
		fakeapi.ToolUse("toolu_run", "Bash", map[string]any{"command": "sleep 27.9135"}),
		rest,
	))
	s := h.session(bypass)
	done := make(chan *orchestrator.TurnResult, 1)
	go func() {
		res, _ := s.Run(context.Background(), "go")
		done <- res
	}()
	waitEvent(t, s, func(ev orchestrator.Event) bool { return ev.Kind == orchestrator.EventToolStarted })
	s.Interrupt("stop")
	var res *orchestrator.TurnResult
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the turn did not end after the interrupt")
	}
	if res.StopReason != orchestrator.StopInterrupted {
		t.Fatalf("turn = %+v", res)
	}
	msgs := s.Messages()
	checkValid(t, msgs)
	if uses := msgs[1].ToolUses(); len(uses) != 1 || uses[0].ID != "toolu_run" {
		t.Fatalf("assistant message kept = %+v", msgs[1])
	}
	results, _ := toolResults(msgs[2])
	if r := results["toolu_run"]; !isError(r) {
		t.Fatalf("result = %+v", r)
	}
	if pids := processesGone("27.9135"); len(pids) > 0 {
		t.Fatalf("the aborted command still runs: pids %v", pids)
	}
}

// TestReconfigureResumedSession changes the model, turn limit, offered
// tools and system prompt of a session loaded from the store; the next
// request uses them and a later load keeps them.
func TestReconfigureResumedSession(t *testing.T) {
	h := newHarness(t, fakeapi.EndTurn(fakeapi.Text("one")))
	s := h.session(orchestrator.SessionConfig{Model: "claude-old", Workspace: "", Directory: "/client/dir"})
	id := s.ID()
	h.run(s, "first")
	if err := s.Reconfigure(orchestrator.SessionConfig{Model: "x"}); err == nil {
		t.Fatal("Reconfigure of a connected session succeeded")
	}

	h.restart()
	s2, err := h.orch.Session(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Reconfigure(orchestrator.SessionConfig{
		Model: "claude-new", AllowedTools: []string{"Read"}, AppendSystemPrompt: "Answer in French.", Directory: "/elsewhere",
	}); err != nil {
		t.Fatal(err)
	}
	if err := s2.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if tools := s2.Tools(); len(tools) != 1 || tools[0].Name != "Read" {
		t.Fatalf("tools after Reconfigure = %v", tools)
	}
	h.fake.Push(fakeapi.EndTurn(fakeapi.Text("two")))
	h.run(s2, "second")
	req := h.fake.Requests()[1]
	if req.Body.Model != "claude-new" || len(req.Body.Tools) != 1 || !strings.HasSuffix(req.Body.System[0].Text, "\n\nAnswer in French.") {
		t.Fatalf("request after Reconfigure: model %s, %d tools, system %q", req.Body.Model, len(req.Body.Tools), req.Body.System[0].Text)
	}

	h.restart()
	s3, err := h.orch.Session(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := s3.Config(); cfg.Model != "claude-new" || cfg.AppendSystemPrompt != "Answer in French." || cfg.Directory != "/client/dir" {
		t.Fatalf("stored configuration after a restart = %+v", cfg)
	}
}

// TestInterruptKeepsPartialOutput interrupts a Bash command after it
// printed something: the interrupted result carries that output.
func TestInterruptKeepsPartialOutput(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(fakeapi.ToolTurn(
		fakeapi.ToolUse("toolu_sleep", "Bash", map[string]any{"command": "echo begin-31; sleep 31.4159; echo never"}),
	))
	s := h.session(bypass)
	done := make(chan *orchestrator.TurnResult, 1)
	go func() {
		res, _ := s.Run(context.Background(), "wait a while")
		done <- res
	}()
	waitEvent(t, s, func(ev orchestrator.Event) bool {
		return ev.Kind == orchestrator.EventProgress && strings.Contains(string(ev.Progress.Output), "begin-31")
	})
	s.Interrupt("user pressed Ctrl-C")
	if res := <-done; res.StopReason != orchestrator.StopInterrupted {
		t.Fatalf("turn = %+v", res)
	}
	msgs := s.Messages()
	results, _ := toolResults(msgs[len(msgs)-1])
	r := results["toolu_sleep"]
	if txt := resultText(r); !isError(r) || !strings.HasPrefix(txt, "<tool_use_error>Interrupted by the user") ||
		!strings.HasSuffix(txt, "</tool_use_error>\nbegin-31") {
		t.Fatalf("interrupted call's result = %q", txt)
	}
	if pids := processesGone("31.4159"); len(pids) > 0 {
		t.Fatalf("the interrupted command still runs: pids %v", pids)
	}
}
