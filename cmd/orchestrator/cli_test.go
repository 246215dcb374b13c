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
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// cli describes one run of the orchestrator binary.
type cli struct {
	dir   string    // working directory; empty: a fresh one
	home  string    // HOME; empty: a fresh one
	env   []string  // more environment
	stdin io.Reader // nil: /dev/null
}

// run runs the binary with the fake API's address and waits for it.
func (c cli) run(t *testing.T, fake *fakeapi.Server, args ...string) result {
	t.Helper()
	cmd := c.command(t, fake, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if fake != nil {
		if errs := fake.Errors(); len(errs) > 0 {
			t.Fatalf("fake API errors: %v\nstderr: %s", errs, r.stderr)
		}
	}
	return r
}

func (c cli) command(t *testing.T, fake *fakeapi.Server, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(orchestratorBin, args...)
	cmd.Dir = c.dir
	if cmd.Dir == "" {
		cmd.Dir = t.TempDir()
	}
	home := c.home
	if home == "" {
		home = t.TempDir()
	}
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}, c.env...)
	if fake != nil {
		cmd.Env = append(cmd.Env, "ANTHROPIC_API_KEY=test-key", "ANTHROPIC_BASE_URL="+fake.URL)
	}
	cmd.Stdin = c.stdin
	return cmd
}

// streamLine is one line of stream-json output, as far as tests read it.
type streamLine struct {
	Type           string          `json:"type"`
	Subtype        string          `json:"subtype"`
	SessionID      string          `json:"session_id"`
	Model          string          `json:"model"`
	Tools          []string        `json:"tools"`
	Cwd            string          `json:"cwd"`
	PermissionMode string          `json:"permissionMode"`
	DurationAPIMs  *int64          `json:"duration_api_ms"`
	Denials        []denial        `json:"permission_denials"`
	Message        json.RawMessage `json:"message"`
}

type denial struct {
	ToolName  string         `json:"tool_name"`
	ToolUseID string         `json:"tool_use_id"`
	ToolInput map[string]any `json:"tool_input"`
}

func parseStream(t *testing.T, out string) (init, res streamLine) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l streamLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line is not JSON: %v: %s", err, sc.Text())
		}
		switch {
		case l.Type == "system" && l.Subtype == "init":
			init = l
		case l.Type == "result":
			res = l
		}
	}
	if init.Type == "" || res.Type == "" {
		t.Fatalf("no init or no result line in:\n%s", out)
	}
	return init, res
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-v"}, {"-p", "--version"}, {"version"}} {
		r := cli{}.run(t, nil, args...)
		if r.code != 0 || !strings.HasSuffix(r.stdout, "(toolwire orchestrator)\n") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}

// TestDefaultModel: without --model the request names the current default,
// ANTHROPIC_MODEL replaces it, and --model beats both.
func TestDefaultModel(t *testing.T) {
	fake := fakeapi.New(t)
	fake.SetFallback(fakeapi.Static(fakeapi.EndTurn(fakeapi.Text("ok"))))
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, nil, "claude-sonnet-5-5"},
		{[]string{"ANTHROPIC_MODEL=claude-from-env"}, nil, "claude-from-env"},
		{[]string{"ANTHROPIC_MODEL=claude-from-env"}, []string{"--model", "claude-from-flag"}, "claude-from-flag"},
	} {
		before := len(fake.Requests())
		r := cli{env: tc.env}.run(t, fake, append([]string{"-p", "hi", "--sessions-dir", t.TempDir()}, tc.args...)...)
		reqs := fake.Requests()
		if r.code != 0 || len(reqs) != before+1 || reqs[before].Body.Model != tc.want {
			t.Fatalf("env %q args %q: exit %d, model %q, want %q\n%s", tc.env, tc.args, r.code, reqs[len(reqs)-1].Body.Model, tc.want, r.stderr)
		}
	}
	if model.DefaultModel != "claude-sonnet-5-5" {
		t.Fatalf("DefaultModel = %s", model.DefaultModel)
	}
}

// TestResumeAppliesFlags: a resumed conversation runs with the model, mode,
// tools and turn limit given on the new run; the init event says so; a
// later --continue keeps the model and drops the per-run tool choice.
func TestResumeAppliesFlags(t *testing.T) {
	dir, sessions := t.TempDir(), t.TempDir()
	fake := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Text("first")))
	c := cli{dir: dir}
	r := c.run(t, fake, "-p", "one", "--sessions-dir", sessions, "--model", "claude-a", "--output-format", "json")
	var first resultJSON
	if err := json.Unmarshal([]byte(r.stdout), &first); r.code != 0 || err != nil {
		t.Fatalf("first run: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}

	fake.Push(
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_r", "Read", map[string]any{"file_path": filepath.Join(dir, "none.txt")})),
		fakeapi.EndTurn(fakeapi.Text("never reached")),
	)
	r = c.run(t, fake, "-p", "two", "--resume", first.SessionID, "--sessions-dir", sessions, "--model", "claude-b",
		"--permission-mode", "plan", "--tools", "Read,Glob", "--max-turns", "1", "--output-format", "stream-json")
	init, res := parseStream(t, r.stdout)
	if init.SessionID != first.SessionID || init.Model != "claude-b" || init.PermissionMode != "plan" ||
		strings.Join(init.Tools, ",") != "Glob,Read" || init.Cwd != dir {
		t.Fatalf("init of the resumed run = %+v", init)
	}
	if r.code != 1 || res.Subtype != "error_max_turns" {
		t.Fatalf("resumed run with --max-turns 1: exit %d, result %+v\n%s", r.code, res, r.stderr)
	}
	req := fake.Requests()[1]
	var names []string
	for _, tl := range req.Body.Tools {
		names = append(names, tl.Name)
	}
	if req.Body.Model != "claude-b" || strings.Join(names, ",") != "Glob,Read" || len(req.Body.Messages) != 3 {
		t.Fatalf("resumed request: model %s, tools %v, %d messages", req.Body.Model, names, len(req.Body.Messages))
	}

	// --continue with no flags: the model stays, the tool choice was that
	// run's only.
	fake.Push(fakeapi.EndTurn(fakeapi.Text("third")))
	r = c.run(t, fake, "-c", "-p", "three", "--sessions-dir", sessions, "--output-format", "stream-json")
	init, _ = parseStream(t, r.stdout)
	reqs := fake.Requests()
	last := reqs[len(reqs)-1]
	if r.code != 0 || init.SessionID != first.SessionID || last.Body.Model != "claude-b" || len(last.Body.Tools) <= 2 ||
		init.PermissionMode != "default" {
		t.Fatalf("continued run: exit %d, init %+v, model %s, %d tools\n%s", r.code, init, last.Body.Model, len(last.Body.Tools), r.stderr)
	}
}

// TestContinueFindsThisDirectorysConversation runs conversations in two
// directories; -c in each goes on with its own.
func TestContinueFindsThisDirectorysConversation(t *testing.T) {
	sessions := t.TempDir()
	a, b, empty := cli{dir: t.TempDir()}, cli{dir: t.TempDir()}, cli{dir: t.TempDir()}
	fake := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Text("A1")), fakeapi.EndTurn(fakeapi.Text("B1")),
		fakeapi.EndTurn(fakeapi.Text("A2")), fakeapi.EndTurn(fakeapi.Text("B2")))
	for _, step := range []struct {
		c    cli
		args []string
		want string
	}{
		{a, []string{"-p", "alpha"}, "A1"},
		{b, []string{"-p", "beta"}, "B1"},
		{a, []string{"-p", "alpha again", "-c"}, "A2"},
		{b, []string{"--continue", "-p", "beta again"}, "B2"},
	} {
		r := step.c.run(t, fake, append(step.args, "--sessions-dir", sessions)...)
		if r.code != 0 || strings.TrimSpace(r.stdout) != step.want {
			t.Fatalf("%q: exit %d, stdout %q\n%s", step.args, r.code, r.stdout, r.stderr)
		}
	}
	reqs := fake.Requests()
	if m := reqs[2].Body.Messages; len(m) != 3 || m[0].Text() != "alpha" || m[2].Text() != "alpha again" {
		t.Fatalf("A's continued request: %+v", m)
	}
	if m := reqs[3].Body.Messages; len(m) != 3 || m[0].Text() != "beta" || m[2].Text() != "beta again" {
		t.Fatalf("B's continued request: %+v", m)
	}
	r := empty.run(t, fake, "-c", "-p", "anyone?", "--sessions-dir", sessions)
	if r.code != 1 || !strings.Contains(r.stderr, "no conversation to continue") || len(fake.Requests()) != 4 {
		t.Fatalf("-c where there is none: exit %d, stderr %s", r.code, r.stderr)
	}

	// sessions list shows this directory's conversation; rm removes it.
	r = a.run(t, nil, "sessions", "list", "--sessions-dir", sessions)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.Contains(lines[1], "alpha") {
		t.Fatalf("sessions list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	id := strings.Fields(lines[1])[0]
	r = a.run(t, nil, "sessions", "list", "--all", "--json", "--sessions-dir", sessions)
	if n := strings.Count(r.stdout, `"session_id"`); r.code != 0 || n != 2 {
		t.Fatalf("sessions list --all --json: %d sessions\n%s", n, r.stdout)
	}
	if r = a.run(t, nil, "sessions", "rm", id, "--sessions-dir", sessions); r.code != 0 {
		t.Fatalf("sessions rm: exit %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(sessions, id+".jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("transcript still there after rm: %v", err)
	}
	if r = a.run(t, nil, "sessions", "rm", id, "--sessions-dir", sessions); r.code != 1 {
		t.Fatalf("second rm: exit %d", r.code)
	}
}

// TestBadToolNamesAreUsageErrors: unknown tools and malformed rules stop
// the run with exit status 2 and a message naming them, before anything
// is sent or stored.
func TestBadToolNamesAreUsageErrors(t *testing.T) {
	fake := fakeapi.New(t)
	sessions := t.TempDir()
	for _, tc := range []struct{ args []string }{
		{[]string{"--tools", "Read,Frobnicate"}},
		{[]string{"--allowedTools", "Bash(ls"}},
		{[]string{"--allowedTools", "Nonesuch(x)"}},
		{[]string{"--disallowedTools", "WebSearch"}},
		{[]string{"--tools", "Bash(ls:*)"}},
		{[]string{"--permission-mode", "yolo"}},
		{[]string{"--settings", `{"permissions": {"allow": ["Read("]}}`}},
	} {
		r := cli{}.run(t, fake, append([]string{"-p", "hi", "--sessions-dir", sessions}, tc.args...)...)
		bad := tc.args[1]
		if i := strings.LastIndex(bad, ","); i >= 0 {
			bad = bad[i+1:]
		}
		if tc.args[0] == "--settings" {
			bad = "Read("
		}
		if r.code != 2 || !strings.Contains(r.stderr, tc.args[0]) || !strings.Contains(r.stderr, bad) ||
			strings.Contains(r.stderr, "executor unavailable") {
			t.Errorf("%q: exit %d, stderr %s", tc.args, r.code, r.stderr)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
	if entries, _ := os.ReadDir(sessions); len(entries) != 0 {
		t.Fatalf("transcripts written: %v", entries)
	}
	// Aliases and rules of known tools pass.
	fake.Push(fakeapi.EndTurn(fakeapi.Text("fine")))
	r := cli{}.run(t, fake, "-p", "hi", "--sessions-dir", sessions, "--tools", "Read,BashOutput,Bash", "--allowedTools", "Bash(git log:*),KillShell")
	// BashOutput is TaskOutput's older name, and Bash brings TaskOutput
	// and TaskStop with it.
	var offered []string
	for _, tool := range fake.Requests()[0].Body.Tools {
		offered = append(offered, tool.Name)
	}
	slices.Sort(offered)
	if want := []string{"Bash", "Read", "TaskOutput", "TaskStop"}; r.code != 0 || !slices.Equal(offered, want) {
		t.Fatalf("known names: exit %d, tools offered %v, want %v; %s", r.code, offered, want, r.stderr)
	}
	// --tools "" offers none.
	fake.Push(fakeapi.EndTurn(fakeapi.Text("fine")))
	r = cli{}.run(t, fake, "-p", "hi", "--sessions-dir", sessions, "--tools", "")
	if got := fake.Requests()[1].Body.Tools; r.code != 0 || len(got) != 0 {
		t.Fatalf(`--tools "": exit %d, %d tools offered, %s`, r.code, len(got), r.stderr)
	}
}

// TestPromptFromStdin: piped input follows the prompt argument, or is the
// prompt without one.
func TestPromptFromStdin(t *testing.T) {
	fake := fakeapi.New(t)
	fake.SetFallback(fakeapi.Static(fakeapi.EndTurn(fakeapi.Text("ok"))))
	r := cli{stdin: strings.NewReader("line 1 of the log\nline 2\n")}.run(t, fake, "-p", "explain", "this", "--sessions-dir", t.TempDir())
	if got := fake.Requests()[0].Body.Messages[0].Text(); r.code != 0 || got != "explain this\n\nline 1 of the log\nline 2" {
		t.Fatalf("exit %d, prompt %q\n%s", r.code, got, r.stderr)
	}
	r = cli{stdin: strings.NewReader("the whole prompt\n")}.run(t, fake, "-p", "--sessions-dir", t.TempDir())
	if got := fake.Requests()[1].Body.Messages[0].Text(); r.code != 0 || got != "the whole prompt" {
		t.Fatalf("exit %d, prompt %q\n%s", r.code, got, r.stderr)
	}
	// Nothing at all: a usage error.
	r = cli{}.run(t, fake, "-p", "--sessions-dir", t.TempDir())
	if r.code != 2 || !strings.Contains(r.stderr, "no prompt") {
		t.Fatalf("empty stdin, no prompt: exit %d, %s", r.code, r.stderr)
	}
}

// TestSilentStdinIsNotWaitedFor: a prompt argument with a stdin pipe that
// stays open and silent goes on without it, saying so.
func TestSilentStdinIsNotWaitedFor(t *testing.T) {
	fake := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Text("ok")))
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	r := cli{stdin: pr}.run(t, fake, "-p", "just this", "--sessions-dir", t.TempDir())
	pr.Close()
	if got := fake.Requests()[0].Body.Messages[0].Text(); r.code != 0 || got != "just this" || !strings.Contains(r.stderr, "nothing arrived on stdin") {
		t.Fatalf("exit %d, prompt %q, stderr %s", r.code, got, r.stderr)
	}
}

// TestNoPromptOnTerminal: with a terminal on stdin and no prompt, the run
// is a usage error at once instead of a wait for typing.
func TestNoPromptOnTerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	go io.Copy(io.Discard, ptmx) //nolint:errcheck // drains the terminal until it closes
	fake := fakeapi.New(t)
	cmd := cli{}.command(t, fake, "-p", "--sessions-dir", t.TempDir())
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stderr = tty, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("orchestrator -p without a prompt waited for the terminal")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "no prompt") {
		t.Fatalf("exit %v, stderr %s", err, stderr.String())
	}
}

// TestSignalEndsTheTurn sends SIGINT (then, in a second run, SIGTERM) while
// a Bash command runs: the command is killed, its output so far is in the
// interrupted result of the saved transcript, and the exit status is 130
// (143).
func TestSignalEndsTheTurn(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
		tag  string
	}{{syscall.SIGINT, 130, "27.1828"}, {syscall.SIGTERM, 143, "26.1828"}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			root, sessions := sandboxtest.Dir(t), t.TempDir()
			fake := fakeapi.New(t, fakeapi.ToolTurn(fakeapi.ToolUse("toolu_long", "Bash",
				map[string]any{"command": "echo printed-before; sleep " + tc.tag + "; echo never"})))
			cmd := cli{}.command(t, fake, "-p", "run it", "--root", root, "--sessions-dir", sessions,
				"--permission-mode", "bypassPermissions", "--verbose")
			var stdout bytes.Buffer
			cmd.Stdout = &stdout
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// --verbose shows the command's output as the orchestrator
			// receives it: once the line is there, the signal comes.
			var log bytes.Buffer
			sc := bufio.NewScanner(io.TeeReader(stderr, &log))
			for sc.Scan() && !strings.Contains(sc.Text(), "│ printed-before") {
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(&log, stderr)
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.code {
				t.Fatalf("exit %v, want %d\nstderr:\n%s", err, tc.code, log.String())
			}
			// Killed, the command may take a moment to leave the process
			// table; it must not stay.
			for deadline := time.Now().Add(10 * time.Second); len(pidsWith(tc.tag)) > 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the command outlived the orchestrator: pids %v", pidsWith(tc.tag))
				}
			}
			if !strings.Contains(log.String(), "--resume") {
				t.Fatalf("stderr does not say how to go on:\n%s", log.String())
			}
			msgs := savedMessages(t, sessions)
			last := msgs[len(msgs)-1]
			if last.Role != model.RoleUser || len(last.Content) != 2 || last.Content[1].Text != "[Request interrupted by user]" {
				t.Fatalf("last message of the transcript = %+v", last)
			}
			res := last.Content[0]
			txt := res.Content[0].Text
			if res.ToolUseID != "toolu_long" || res.IsError == nil || !*res.IsError || !strings.Contains(txt, "Interrupted") ||
				!strings.HasSuffix(txt, "\nprinted-before") {
				t.Fatalf("interrupted result = %+v (%q)", res, txt)
			}
		})
	}
}

// savedMessages returns the messages of the only transcript in dir.
func savedMessages(t *testing.T, dir string) []model.Message {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("transcripts: %v", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var msgs []model.Message
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec struct {
			Type    string         `json:"type"`
			Message *model.Message `json:"message"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("transcript line %q: %v", line, err)
		}
		if rec.Type == "message" {
			msgs = append(msgs, *rec.Message)
		}
	}
	return msgs
}

// TestSettingsLayers: the user's, the project's and the local settings
// files and inline --settings all apply, layered as Claude Code layers
// them; what they do not allow is denied and listed in the result.
func TestSettingsLayers(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(home, ".claude", "settings.json"), `{"permissions": {"allow": ["Bash(touch user-ok)"]}}`, 0o644)
	writeFile(t, filepath.Join(project, ".claude", "settings.json"), `{"permissions": {"allow": ["Bash(touch project-ok)"], "defaultMode": "plan"}}`, 0o644)
	writeFile(t, filepath.Join(project, ".claude", "settings.local.json"), `{"permissions": {"defaultMode": "default"}}`, 0o644)
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(
			fakeapi.ToolUse("toolu_u", "Bash", map[string]any{"command": "touch user-ok"}),
			fakeapi.ToolUse("toolu_p", "Bash", map[string]any{"command": "touch project-ok"}),
			fakeapi.ToolUse("toolu_i", "Bash", map[string]any{"command": "touch inline-ok"}),
			fakeapi.ToolUse("toolu_f", "Bash", map[string]any{"command": "touch flag-ok"}),
			fakeapi.ToolUse("toolu_no", "Bash", map[string]any{"command": "touch not-allowed"}),
		),
		fakeapi.EndTurn(fakeapi.Text("done")),
	)
	r := cli{dir: project, home: home}.run(t, fake, "-p", "go", "--sessions-dir", t.TempDir(), "--output-format", "stream-json",
		"--settings", `{"permissions": {"allow": ["Bash(touch inline-ok)"]}}`, "--allowedTools", "Bash(touch flag-ok)")
	init, res := parseStream(t, r.stdout)
	if r.code != 0 || init.PermissionMode != "default" {
		t.Fatalf("exit %d, init %+v\n%s", r.code, init, r.stderr)
	}
	results, _ := toolResultsOf(fake.Requests()[1])
	for id, file := range map[string]string{"toolu_u": "user-ok", "toolu_p": "project-ok", "toolu_i": "inline-ok", "toolu_f": "flag-ok"} {
		if _, err := os.Stat(filepath.Join(project, file)); err != nil || results[id] != "(Bash completed with no output)" {
			t.Errorf("%s: result %q, %v", id, results[id], err)
		}
	}
	if _, err := os.Stat(filepath.Join(project, "not-allowed")); err == nil || !strings.Contains(results["toolu_no"], "not granted") {
		t.Errorf("call no rule allows: %q", results["toolu_no"])
	}
	if len(res.Denials) != 1 || res.Denials[0].ToolUseID != "toolu_no" || res.Denials[0].ToolName != "Bash" ||
		res.Denials[0].ToolInput["command"] != "touch not-allowed" || res.DurationAPIMs == nil {
		t.Fatalf("result = %+v", res)
	}

	// --permission-mode is over every file.
	fake.Push(fakeapi.EndTurn(fakeapi.Text("again")))
	r = cli{dir: project, home: home}.run(t, fake, "-p", "go", "--sessions-dir", t.TempDir(), "--output-format", "stream-json", "--permission-mode", "acceptEdits")
	if init, _ := parseStream(t, r.stdout); init.PermissionMode != "acceptEdits" {
		t.Fatalf("init with --permission-mode = %+v", init)
	}
	// A broken settings file is reported with its name and line.
	writeFile(t, filepath.Join(project, ".claude", "settings.local.json"), "{\n  \"permissions\": {\"allow\": [\"Bash(ls\"]}\n}", 0o644)
	r = cli{dir: project, home: home}.run(t, fake, "-p", "go", "--sessions-dir", t.TempDir())
	if r.code != 1 || !strings.Contains(r.stderr, "settings.local.json:2:") {
		t.Fatalf("broken local settings: exit %d, %s", r.code, r.stderr)
	}
}

// toolResultsOf returns the text of each tool_result of a request's last
// message, by tool_use id.
func toolResultsOf(r *fakeapi.Request) (map[string]string, []string) {
	msgs := r.Body.Messages
	out := map[string]string{}
	var order []string
	for _, b := range msgs[len(msgs)-1].Content {
		if b.Type == model.BlockToolResult {
			var s strings.Builder
			for _, c := range b.Content {
				s.WriteString(c.Text)
			}
			out[b.ToolUseID] = s.String()
			order = append(order, b.ToolUseID)
		}
	}
	return out, order
}

// TestClaudeMD: the user's CLAUDE.md and the project's, from the
// repository root down to the working directory, are in the system
// prompt, followed by --append-system-prompt; files above the repository
// are not.
func TestClaudeMD(t *testing.T) {
	home, top := t.TempDir(), t.TempDir()
	repo := filepath.Join(top, "repo")
	work := filepath.Join(repo, "service")
	writeFile(t, filepath.Join(home, ".claude", "CLAUDE.md"), "user-rule-7", 0o644)
	writeFile(t, filepath.Join(top, "CLAUDE.md"), "outside-rule-7", 0o644)
	writeFile(t, filepath.Join(repo, ".git", "HEAD"), "ref: refs/heads/main\n", 0o644)
	writeFile(t, filepath.Join(repo, "CLAUDE.md"), "repo-rule-7", 0o644)
	writeFile(t, filepath.Join(work, ".claude", "CLAUDE.md"), "service-rule-7", 0o644)
	fake := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Text("ok")))
	r := cli{dir: work, home: home}.run(t, fake, "-p", "hi", "--sessions-dir", t.TempDir(), "--append-system-prompt", "appended-rule-7")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var system strings.Builder
	for _, b := range fake.Requests()[0].Body.System {
		system.WriteString(b.Text)
	}
	s := system.String()
	last := -1
	for _, want := range []string{"user-rule-7", "repo-rule-7", "service-rule-7", "appended-rule-7"} {
		i := strings.Index(s, want)
		if i < 0 || i < last {
			t.Fatalf("system prompt lacks %s, or has it out of order:\n%s", want, s)
		}
		last = i
	}
	if strings.Contains(s, "outside-rule-7") {
		t.Fatalf("a CLAUDE.md above the repository is in the system prompt")
	}
}

// TestStatusLineOnTerminal: in text mode a running command shows one
// status line on a terminal's stderr, cleared at the end; a stderr that is
// not a terminal gets nothing.
func TestStatusLineOnTerminal(t *testing.T) {
	root := sandboxtest.Dir(t)
	script := func() *fakeapi.Server {
		return fakeapi.New(t,
			fakeapi.ToolTurn(fakeapi.ToolUse("toolu_1", "Bash", map[string]any{"command": "echo status-tick; sleep 1.2"})),
			fakeapi.EndTurn(fakeapi.Text("finished")))
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var term bytes.Buffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(&term, ptmx) // ends with EIO once the terminal's last user closes it
	}()
	cmd := cli{}.command(t, script(), "-p", "go", "--root", root, "--sessions-dir", t.TempDir(), "--permission-mode", "bypassPermissions")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, tty
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, term.String())
	}
	tty.Close()
	<-copied
	out := term.String()
	if stdout.String() != "finished\n" || !strings.Contains(out, "\r\x1b[K⏺ Bash(echo status-tick; sleep 1.2)") || !strings.HasSuffix(out, "\r\x1b[K") {
		t.Fatalf("stdout %q, terminal %q", stdout.String(), out)
	}

	r := cli{}.run(t, script(), "-p", "go", "--root", root, "--sessions-dir", t.TempDir(), "--permission-mode", "bypassPermissions")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("stderr not on a terminal: exit %d, %q", r.code, r.stderr)
	}
}

// TestVerbose: --verbose lists the tool calls and their output on stderr,
// and leaves stdout to the answer.
func TestVerbose(t *testing.T) {
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(fakeapi.Text("Let me look."), fakeapi.ToolUse("toolu_1", "Bash", map[string]any{"command": "echo verbose-out; exit 3"})),
		fakeapi.EndTurn(fakeapi.Text("It failed.")))
	r := cli{}.run(t, fake, "-p", "go", "--root", sandboxtest.Dir(t), "--sessions-dir", t.TempDir(), "--permission-mode", "bypassPermissions", "--verbose")
	for _, want := range []string{"Let me look.\n", "⏺ Bash(echo verbose-out; exit 3)\n", "  │ verbose-out\n", "  ⎿ error: Exit code 3\n"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if r.code != 0 || r.stdout != "It failed.\n" {
		t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
	}
}
