package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// systemText returns a request's system prompt.
func systemText(r *fakeapi.Request) string {
	var b strings.Builder
	for _, s := range r.Body.System {
		b.WriteString(s.Text)
	}
	return b.String()
}

func toolNames(r *fakeapi.Request) []string {
	var out []string
	for _, t := range r.Body.Tools {
		out = append(out, t.Name)
	}
	return out
}

// resultsByID returns every tool_result block of a request's messages, by
// tool_use id, and fails the test if an id has more than one.
func resultsByID(t *testing.T, msgs []model.Message) map[string]model.Block {
	t.Helper()
	out := map[string]model.Block{}
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type != model.BlockToolResult {
				continue
			}
			if _, dup := out[b.ToolUseID]; dup {
				t.Fatalf("two tool_results for %s", b.ToolUseID)
			}
			out[b.ToolUseID] = b
		}
	}
	return out
}

func blockText(b model.Block) string {
	var s strings.Builder
	for _, c := range b.Content {
		s.WriteString(c.Text)
	}
	return s.String()
}

// streamLines returns the stream-json lines of out as generic objects.
func streamLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line is not JSON: %v: %s", err, sc.Text())
		}
		lines = append(lines, l)
	}
	return lines
}

// TestHeadlessTaskListAcrossResume: the task list tools run in the
// orchestrator (the executor has no such tools, so a call sent there would
// fail), each call gets one result, stream-json shows the list after each
// change, and the list is still there after --resume.
func TestHeadlessTaskListAcrossResume(t *testing.T) {
	root, sessions := sandboxtest.Dir(t), t.TempDir()
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(
			fakeapi.ToolUse("toolu_c1", "TaskCreate", map[string]any{"subject": "Write the parser", "description": "parse the input", "activeForm": "Writing the parser"}),
			fakeapi.ToolUse("toolu_c2", "TaskCreate", map[string]any{"subject": "Test the parser", "description": "tests pass"}),
		),
		fakeapi.ToolTurn(
			fakeapi.ToolUse("toolu_u1", "TaskUpdate", map[string]any{"taskId": "1", "status": "in_progress"}),
			fakeapi.ToolUse("toolu_u2", "TaskUpdate", map[string]any{"taskId": "2", "addBlockedBy": []string{"1"}}),
		),
		fakeapi.EndTurn(fakeapi.Text("Planned.")),
	)
	r := runCLI(t, fake, "-p", "plan the work", "--root", root, "--sessions-dir", sessions, "--output-format", "stream-json")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	init, res := parseStream(t, r.stdout)
	for _, name := range []string{"Agent", "TaskCreate", "TaskGet", "TaskList", "TaskUpdate", "Read"} {
		if !slices.Contains(init.Tools, name) {
			t.Errorf("init tools %v lack %s", init.Tools, name)
		}
	}
	if !slices.Contains(toolNames(fake.Requests()[0]), "TaskCreate") {
		t.Fatalf("TaskCreate not offered to the model: %v", toolNames(fake.Requests()[0]))
	}
	reqs := fake.Requests()
	got := resultsByID(t, reqs[2].Body.Messages)
	want := map[string]string{
		"toolu_c1": "Task #1 created successfully: Write the parser",
		"toolu_c2": "Task #2 created successfully: Test the parser",
		"toolu_u1": "Updated task #1 status",
		"toolu_u2": "Updated task #2 blockedBy",
	}
	for id, text := range want {
		if b, ok := got[id]; !ok || blockText(b) != text || b.IsError != nil {
			t.Errorf("%s: %+v, want %q", id, b, text)
		}
	}
	// The list after each change, the last one in full.
	var lists []any
	for _, l := range streamLines(t, r.stdout) {
		if l["type"] == "system" && l["subtype"] == "tasks" {
			lists = append(lists, l["tasks"])
		}
	}
	if len(lists) != 4 {
		t.Fatalf("%d task list lines, want 4:\n%s", len(lists), r.stdout)
	}
	last, _ := json.Marshal(lists[3])
	if string(last) != `[{"activeForm":"Writing the parser","blocks":["2"],"description":"parse the input","id":"1","status":"in_progress","subject":"Write the parser"},`+
		`{"blockedBy":["1"],"description":"tests pass","id":"2","status":"pending","subject":"Test the parser"}]` {
		t.Fatalf("last task list: %s", last)
	}

	n := len(fake.Requests())
	fake.Push(
		fakeapi.ToolTurn(
			fakeapi.ToolUse("toolu_l", "TaskList", map[string]any{}),
			fakeapi.ToolUse("toolu_g", "TaskGet", map[string]any{"taskId": "2"}),
			fakeapi.ToolUse("toolu_c3", "TaskCreate", map[string]any{"subject": "Ship it", "description": "released"}),
		),
		fakeapi.EndTurn(fakeapi.Text("Still planned.")),
	)
	// Rules name the orchestrator's tools like the executor's; a bare
	// disallowed name hides the tool.
	r = runCLI(t, fake, "-p", "where are we?", "--resume", res.SessionID, "--root", root, "--sessions-dir", sessions,
		"--allowedTools", "TaskList,TaskCreate", "--disallowedTools", "Agent")
	if r.code != 0 {
		t.Fatalf("resume: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if offered := toolNames(fake.Requests()[n]); slices.Contains(offered, "Agent") || !slices.Contains(offered, "TaskList") {
		t.Fatalf("offered after --disallowedTools Agent: %v", offered)
	}
	after, _ := toolResultsOf(fake.Requests()[n+1])
	want = map[string]string{
		"toolu_l":  "#1 [in_progress] Write the parser\n#2 [pending] Test the parser [blocked by #1]",
		"toolu_g":  "Task #2: Test the parser\nStatus: pending\nDescription: tests pass\nBlocked by: #1",
		"toolu_c3": "Task #3 created successfully: Ship it",
	}
	for id, text := range want {
		if after[id] != text {
			t.Errorf("after --resume, %s: %q, want %q", id, after[id], text)
		}
	}
}

// agentReply answers the requests of a conversation and of its subagents:
// a request whose system prompt contains marker is a subagent's, answered
// by sub; the others by main.
func agentReply(marker string, main, sub fakeapi.Responder) fakeapi.Responder {
	return func(r *fakeapi.Request) fakeapi.Reply {
		if strings.Contains(systemText(r), marker) {
			return sub(r)
		}
		return main(r)
	}
}

// TestHeadlessAgentRunsARead: an Agent call runs an Explore subagent with
// its own system prompt and read-only tools; its Read runs on the
// executor; its final text comes back as the Agent call's result, with the
// trailer; stream-json shows the subagent's messages with the Agent call's
// id as parent_tool_use_id.
func TestHeadlessAgentRunsARead(t *testing.T) {
	root := sandboxtest.Dir(t)
	file := filepath.Join(root, "notes.txt")
	writeFile(t, file, "the secret is 7\n", 0o644)
	fake := fakeapi.New(t)
	fake.SetFallback(agentReply("read-only agent",
		func(r *fakeapi.Request) fakeapi.Reply {
			if len(r.Body.Messages) == 1 {
				return fakeapi.ToolTurn(fakeapi.ToolUse("toolu_agent", "Agent", map[string]any{
					"description": "find the secret", "prompt": "What is the secret in notes.txt?", "subagent_type": "Explore"}))
			}
			return fakeapi.EndTurn(fakeapi.Text("It is 7."))
		},
		func(r *fakeapi.Request) fakeapi.Reply {
			if len(r.Body.Messages) == 1 {
				return fakeapi.ToolTurn(fakeapi.ToolUse("toolu_sub_read", "Read", map[string]any{"file_path": file}))
			}
			return fakeapi.EndTurn(fakeapi.Text("The secret is 7 (notes.txt line 1)."))
		}))
	r := runCLI(t, fake, "-p", "find the secret", "--root", root, "--sessions-dir", t.TempDir(), "--output-format", "stream-json")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	reqs := fake.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	var sub []*fakeapi.Request
	for _, q := range reqs {
		if strings.Contains(systemText(q), "read-only agent") {
			sub = append(sub, q)
		}
	}
	if len(sub) != 2 {
		t.Fatalf("%d subagent requests, want 2", len(sub))
	}
	got := toolNames(sub[0])
	for _, name := range []string{"Glob", "Grep", "Read", "TaskList"} {
		if !slices.Contains(got, name) {
			t.Errorf("Explore's tools %v lack %s", got, name)
		}
	}
	for _, name := range []string{"Agent", "Bash", "Edit", "NotebookEdit", "TaskCreate", "Write"} {
		if slices.Contains(got, name) {
			t.Errorf("Explore's tools %v include %s", got, name)
		}
	}
	if p := sub[0].Body.Messages[0].Text(); p != "What is the secret in notes.txt?" {
		t.Errorf("subagent's prompt: %q", p)
	}
	read := resultsByID(t, sub[1].Body.Messages)["toolu_sub_read"]
	if !strings.Contains(blockText(read), "the secret is 7") {
		t.Errorf("subagent's Read result: %+v", read)
	}
	main := reqs[len(reqs)-1]
	agent := resultsByID(t, main.Body.Messages)["toolu_agent"]
	if agent.IsError != nil || len(agent.Content) != 2 || agent.Content[0].Text != "The secret is 7 (notes.txt line 1)." ||
		!strings.HasPrefix(agent.Content[1].Text, "agentId: a") || !strings.Contains(agent.Content[1].Text, "\ntool_uses: 1\n") {
		t.Fatalf("Agent result: %+v", agent)
	}
	// stream-json: the subagent's assistant message with the Read, and its
	// result, carry the Agent call's id; the conversation's carry null.
	var subUses, subResults, subPrompts, mainLines int
	for _, l := range streamLines(t, r.stdout) {
		if l["type"] != "assistant" && l["type"] != "user" {
			continue
		}
		raw, _ := json.Marshal(l["message"])
		switch l["parent_tool_use_id"] {
		case "toolu_agent":
			if strings.Contains(string(raw), `"toolu_sub_read"`) && l["type"] == "assistant" {
				subUses++
			}
			if strings.Contains(string(raw), "the secret is 7") && l["type"] == "user" {
				subResults++
			}
			if strings.Contains(string(raw), "What is the secret in notes.txt?") && l["type"] == "user" {
				subPrompts++
			}
		case nil:
			mainLines++
		default:
			t.Errorf("parent_tool_use_id %v", l["parent_tool_use_id"])
		}
	}
	if subUses != 1 || subResults != 1 || subPrompts != 1 || mainLines != 3 {
		t.Fatalf("stream-json: %d subagent tool_use lines, %d subagent result lines, %d subagent prompts, %d of the conversation\n%s",
			subUses, subResults, subPrompts, mainLines, r.stdout)
	}
}

// TestHeadlessUserDefinedAgent: an agent of the project's .claude/agents
// is offered in the Agent tool's description and runs with its own system
// prompt and only its tools; a tool it lacks is refused without running.
func TestHeadlessUserDefinedAgent(t *testing.T) {
	root := sandboxtest.Dir(t)
	writeFile(t, filepath.Join(root, ".claude", "agents", "counter.md"),
		"---\nname: line-counter\ndescription: Counts the lines of files\ntools: Bash\nmodel: inherit\n---\nYou count lines and say how many.\n", 0o644)
	writeFile(t, filepath.Join(root, "three.txt"), "a\nb\nc\n", 0o644)
	fake := fakeapi.New(t)
	fake.SetFallback(agentReply("You count lines",
		func(r *fakeapi.Request) fakeapi.Reply {
			if len(r.Body.Messages) == 1 {
				return fakeapi.ToolTurn(fakeapi.ToolUse("toolu_agent", "Agent", map[string]any{
					"description": "count", "prompt": "How many lines has three.txt?", "subagent_type": "line-counter"}))
			}
			return fakeapi.EndTurn(fakeapi.Text("Three."))
		},
		func(r *fakeapi.Request) fakeapi.Reply {
			if len(r.Body.Messages) == 1 {
				return fakeapi.ToolTurn(
					fakeapi.ToolUse("toolu_wc", "Bash", map[string]any{"command": "wc -l < three.txt"}),
					fakeapi.ToolUse("toolu_write", "Write", map[string]any{"file_path": filepath.Join(root, "x.txt"), "content": "x"}),
				)
			}
			return fakeapi.EndTurn(fakeapi.Text("three.txt has 3 lines."))
		}))
	r := runCLI(t, fake, "-p", "count", "--root", root, "--sessions-dir", t.TempDir(), "--permission-mode", "bypassPermissions", "--verbose")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "Three." {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	// --verbose shows the subagent's calls under the Agent call.
	if !strings.Contains(r.stderr, "⏺ Agent(count)\n") || !strings.Contains(r.stderr, "\n    ⏺ Bash(wc -l < three.txt)\n") ||
		!strings.Contains(r.stderr, "\n      │ 3\n") {
		t.Errorf("--verbose:\n%s", r.stderr)
	}
	reqs := fake.Requests()
	var desc string
	for _, tl := range reqs[0].Body.Tools {
		if tl.Name == "Agent" {
			desc = tl.Description
		}
	}
	if !strings.Contains(desc, "- line-counter: Counts the lines of files (Tools: Bash)") {
		t.Fatalf("Agent description does not offer the agent:\n%s", desc)
	}
	var sub []*fakeapi.Request
	for _, q := range reqs {
		if strings.Contains(systemText(q), "You count lines and say how many.") {
			sub = append(sub, q)
		}
	}
	if len(sub) != 2 || !slices.Equal(toolNames(sub[0]), []string{"Bash"}) {
		t.Fatalf("%d subagent requests; tools %v", len(sub), toolNames(sub[0]))
	}
	results := resultsByID(t, sub[1].Body.Messages)
	if got := blockText(results["toolu_wc"]); got != "3" {
		t.Errorf("Bash in the subagent: %q", got)
	}
	w := results["toolu_write"]
	if w.IsError == nil || !*w.IsError || !strings.Contains(blockText(w), "Write exists but is not enabled") {
		t.Errorf("Write, not among the agent's tools: %+v", w)
	}
	if _, err := os.Stat(filepath.Join(root, "x.txt")); err == nil {
		t.Error("the subagent wrote a file with a tool it does not have")
	}
	agent := resultsByID(t, reqs[len(reqs)-1].Body.Messages)["toolu_agent"]
	if agent.IsError != nil || agent.Content[0].Text != "three.txt has 3 lines." {
		t.Fatalf("Agent result: %+v", agent)
	}
}

// TestHeadlessSubagentsOnTwoExecutors is the pool case: with
// --subagents-on-pool, two Agent calls of one message run at the same
// time, each on an executor session of its own on a different toolsvc of
// the pool (each writes a file into its executor's root, and both of their
// commands are running at once); an interrupt stops both, kills their
// commands on both executors, and both Agent calls get is_error results.
func TestHeadlessSubagentsOnTwoExecutors(t *testing.T) {
	roots := []string{sandboxtest.Dir(t), sandboxtest.Dir(t)}
	addrs := []string{startToolsvc(t, roots[0]), startToolsvc(t, roots[1])}
	sessions := t.TempDir()
	const tag = "1000.4242"
	fake := fakeapi.New(t)
	fake.SetFallback(agentReply("agent started by another agent",
		func(r *fakeapi.Request) fakeapi.Reply {
			return fakeapi.ToolTurn(
				fakeapi.ToolUse("toolu_one", "Agent", map[string]any{"description": "one", "prompt": "you are agent-one"}),
				fakeapi.ToolUse("toolu_two", "Agent", map[string]any{"description": "two", "prompt": "you are agent-two"}),
			)
		},
		func(r *fakeapi.Request) fakeapi.Reply {
			name := r.Body.Messages[0].Text()[len("you are "):]
			return fakeapi.ToolTurn(fakeapi.ToolUse("toolu_"+name, "Bash", map[string]any{
				"command": "echo " + name + " > ran-" + name + " && sleep " + tag, "timeout": 600000}))
		}))
	cmd := cli{}.command(t, fake, "-p", "split the work", "--executor", strings.Join(addrs, ","), "--executor-insecure",
		"--subagents-on-pool", "--sessions-dir", sessions, "--permission-mode", "bypassPermissions", "--output-format", "stream-json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }) }
	defer stop()
	// Both subagents' commands run at the same time.
	for deadline := time.Now().Add(60 * time.Second); len(pidsWith(tag)) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("two commands did not run at once: pids %v\nstderr: %s", pidsWith(tag), stderr.String())
		}
	}
	// Each ran on its own executor: each file is in one root, not the
	// same one.
	where := map[string]int{}
	for _, name := range []string{"agent-one", "agent-two"} {
		for i, root := range roots {
			if b, err := os.ReadFile(filepath.Join(root, "ran-"+name)); err == nil && string(b) == name+"\n" {
				where[name] = i + 1
			}
		}
	}
	if where["agent-one"] == 0 || where["agent-two"] == 0 || where["agent-one"] == where["agent-two"] {
		t.Fatalf("the subagents' files are in roots %v (1 and 2 are the two executors'); want one in each", where)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	once.Do(func() {})
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130\nstderr: %s", err, stderr.String())
	}
	for deadline := time.Now().Add(10 * time.Second); len(pidsWith(tag)) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("commands outlived the interrupt: pids %v", pidsWith(tag))
		}
	}
	msgs := savedMessages(t, sessions)
	results := resultsByID(t, msgs)
	if len(results) != 2 {
		t.Fatalf("transcript results: %v", results)
	}
	for _, id := range []string{"toolu_one", "toolu_two"} {
		b := results[id]
		if b.IsError == nil || !*b.IsError || !strings.Contains(blockText(b), "Interrupted") {
			t.Errorf("%s: %+v", id, b)
		}
	}
	// stream-json shows each subagent's Bash under its Agent call.
	parents := map[string]string{}
	for _, l := range streamLines(t, stdout.String()) {
		if l["type"] == "assistant" && l["parent_tool_use_id"] != nil {
			raw, _ := json.Marshal(l["message"])
			for _, name := range []string{"agent-one", "agent-two"} {
				if strings.Contains(string(raw), `"toolu_`+name+`"`) {
					parents[name], _ = l["parent_tool_use_id"].(string)
				}
			}
		}
	}
	if parents["agent-one"] != "toolu_one" || parents["agent-two"] != "toolu_two" {
		t.Fatalf("parents in stream-json: %v\n%s", parents, stdout.String())
	}
	_, _ = io.Copy(io.Discard, &stderr)
}
