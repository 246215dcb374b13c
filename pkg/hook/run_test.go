package hook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/hook"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

func TestMain(m *testing.M) {
	sandbox.RunChildIfRequested()
	if err := sandbox.BecomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(sandboxtest.Main(m))
}

// newRunner returns a confined runner over a fresh workspace.
func newRunner(t *testing.T) (*sandbox.Runner, string) {
	t.Helper()
	ws := sandboxtest.Dir(t)
	r, err := sandbox.NewRunner(sandbox.Config{}, ws, filepath.Join(sandboxtest.Dir(t), "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, ws
}

// compile builds a Set of one matcher for ev on every tool.
func compile(t *testing.T, ev hook.Event, cmds ...string) *hook.Set {
	t.Helper()
	m := hook.Matcher{Event: ev, Matcher: "*"}
	for _, c := range cmds {
		m.Commands = append(m.Commands, hook.Command{Command: c, Timeout: 30 * time.Second})
	}
	s, err := hook.Compile([]hook.Matcher{m})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// printJSON is a hook command that prints js on stdout.
func printJSON(js string) string {
	return "cat <<'END_OF_JSON'\n" + js + "\nEND_OF_JSON"
}

var bashInput = hook.Input{SessionID: "s1", ToolName: "Bash", ToolUseID: "toolu_1", ToolInput: json.RawMessage(`{"command":"ls"}`)}

func TestNoHooks(t *testing.T) {
	r, _ := newRunner(t)
	var none *hook.Set
	if o := none.Run(t.Context(), r, hook.PreToolUse, bashInput); !isZero(o) {
		t.Errorf("nil Set: %+v", o)
	}
	s := compile(t, hook.PostToolUse, "exit 2")
	if o := s.Run(t.Context(), r, hook.PreToolUse, bashInput); !isZero(o) {
		t.Errorf("hook of another event ran: %+v", o)
	}
}

func isZero(o hook.Outcome) bool {
	return !o.Block && o.Reason == "" && o.Decision == "" && o.UpdatedInput == nil && len(o.Errors) == 0 && o.DecidedBy == "" && !o.Stop
}

func TestExitCodes(t *testing.T) {
	r, _ := newRunner(t)
	tests := map[string]struct {
		ev        hook.Event
		cmd       string
		block     bool
		decision  hook.Decision
		reason    string
		errSubstr string
	}{
		"exit 0":                   {ev: hook.PreToolUse, cmd: "exit 0"},
		"exit 0 with plain output": {ev: hook.PreToolUse, cmd: "echo just logging; echo warn >&2"},
		"exit 2 blocks with stderr only": {
			ev: hook.PreToolUse, cmd: "echo not for the model; echo 'rm is not allowed here' >&2; exit 2",
			block: true, decision: hook.Deny, reason: "rm is not allowed here",
		},
		"exit 2 from a child's stderr": {
			ev: hook.PreToolUse, cmd: "sh -c 'echo from child >&2'; exit 2",
			block: true, decision: hook.Deny, reason: "from child",
		},
		"exit 2 with nothing to say": {ev: hook.PreToolUse, cmd: "exit 2", block: true, decision: hook.Deny},
		"exit 2 ignores JSON": {
			ev: hook.PreToolUse, cmd: `echo '{"hookSpecificOutput":{"permissionDecision":"allow"}}'; exit 2`,
			block: true, decision: hook.Deny,
		},
		"exit 1 is not blocking": {ev: hook.PreToolUse, cmd: "echo oops >&2; exit 1", errSubstr: "exited with status 1: oops"},
		"exit 3 is not blocking": {ev: hook.PreToolUse, cmd: "exit 3", errSubstr: "exited with status 3"},
		"command not found":      {ev: hook.PreToolUse, cmd: "no-such-command-here", errSubstr: "status 127"},
		"post exit 2 is feedback": {
			ev: hook.PostToolUse, cmd: "echo 'lint: 3 warnings' >&2; exit 2",
			block: true, reason: "lint: 3 warnings",
		},
		"post exit 1": {ev: hook.PostToolUse, cmd: "exit 1", errSubstr: "status 1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := compile(t, tc.ev, tc.cmd).Run(t.Context(), r, tc.ev, bashInput)
			if o.Block != tc.block || o.Decision != tc.decision || o.Reason != tc.reason {
				t.Errorf("Block, Decision, Reason = %v, %q, %q; want %v, %q, %q", o.Block, o.Decision, o.Reason, tc.block, tc.decision, tc.reason)
			}
			if tc.errSubstr == "" && len(o.Errors) > 0 {
				t.Errorf("unexpected errors %q", o.Errors)
			}
			if tc.errSubstr != "" && (len(o.Errors) != 1 || !strings.Contains(o.Errors[0], tc.errSubstr) || !strings.Contains(o.Errors[0], tc.cmd)) {
				t.Errorf("Errors = %q, want one naming the hook and containing %q", o.Errors, tc.errSubstr)
			}
			if tc.block && !strings.Contains(o.DecidedBy, tc.cmd) {
				t.Errorf("DecidedBy = %q, want the hook %q", o.DecidedBy, tc.cmd)
			}
		})
	}
	if left, _ := filepath.Glob(filepath.Join(r.TempDir(), ".hook-*")); len(left) > 0 {
		t.Errorf("stderr files left behind: %v", left)
	}
}

func TestJSONOutput(t *testing.T) {
	r, _ := newRunner(t)
	tests := map[string]struct {
		ev             hook.Event
		out            string
		block          bool
		decision       hook.Decision
		reason         string
		decisionReason string
		updated        string
		context        string
		stop           bool
		errSubstr      string
	}{
		"allow": {
			ev: hook.PreToolUse, out: `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"safe listing"}}`,
			decision: hook.Allow, decisionReason: "safe listing",
		},
		"deny": {
			ev: hook.PreToolUse, out: `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no network"}}`,
			block: true, decision: hook.Deny, reason: "no network", decisionReason: "no network",
		},
		"ask": {
			ev: hook.PreToolUse, out: `{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"touches prod"}}`,
			decision: hook.Ask, decisionReason: "touches prod",
		},
		"updated input": {
			ev: hook.PreToolUse, out: `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"ls -la"}}}`,
			decision: hook.Allow, updated: `{"command":"ls -la"}`,
		},
		"updated input without decision": {
			ev: hook.PreToolUse, out: `{"hookSpecificOutput":{"updatedInput":{"command":"ls -1"}}}`,
			updated: `{"command":"ls -1"}`,
		},
		"legacy block": {
			ev: hook.PreToolUse, out: `{"decision":"block","reason":"legacy says no"}`,
			block: true, decision: hook.Deny, reason: "legacy says no", decisionReason: "legacy says no",
		},
		"legacy approve": {
			ev: hook.PreToolUse, out: `{"decision":"approve","reason":"fine"}`,
			decision: hook.Allow, decisionReason: "fine",
		},
		"permissionDecision beats legacy": {
			ev: hook.PreToolUse, out: `{"decision":"block","reason":"old","hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"new"}}`,
			decision: hook.Ask, decisionReason: "new",
		},
		"continue false stops and blocks": {
			ev: hook.PreToolUse, out: `{"continue":false,"stopReason":"build is broken"}`,
			block: true, decision: hook.Deny, reason: "build is broken", stop: true,
		},
		"continue true": {ev: hook.PreToolUse, out: `{"continue":true}`},
		"invalid JSON": {
			ev: hook.PreToolUse, out: `{"decision":`, errSubstr: "invalid JSON",
		},
		"unknown permission decision": {
			ev: hook.PreToolUse, out: `{"hookSpecificOutput":{"permissionDecision":"maybe"}}`, errSubstr: `unknown permissionDecision "maybe"`,
		},
		"other event's output": {
			ev: hook.PreToolUse, out: `{"hookSpecificOutput":{"hookEventName":"PostToolUse","permissionDecision":"deny"}}`, errSubstr: "not PreToolUse",
		},
		"updatedInput not an object": {
			ev: hook.PreToolUse, out: `{"hookSpecificOutput":{"updatedInput":"ls"}}`, errSubstr: "not a JSON object",
		},
		"post block": {
			ev: hook.PostToolUse, out: `{"decision":"block","reason":"tests fail now"}`,
			block: true, reason: "tests fail now",
		},
		"post additional context": {
			ev: hook.PostToolUse, out: `{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"formatted with gofmt"}}`,
			context: "formatted with gofmt",
		},
		"post ignores permission decisions": {
			ev: hook.PostToolUse, out: `{"hookSpecificOutput":{"permissionDecision":"deny","updatedInput":{"a":1}}}`,
		},
		"post continue false": {
			ev: hook.PostToolUse, out: `{"continue":false,"stopReason":"enough"}`, stop: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := compile(t, tc.ev, printJSON(tc.out)).Run(t.Context(), r, tc.ev, bashInput)
			if o.Block != tc.block || o.Decision != tc.decision || o.Reason != tc.reason || o.DecisionReason != tc.decisionReason {
				t.Errorf("Block, Decision, Reason, DecisionReason = %v, %q, %q, %q; want %v, %q, %q, %q",
					o.Block, o.Decision, o.Reason, o.DecisionReason, tc.block, tc.decision, tc.reason, tc.decisionReason)
			}
			if string(o.UpdatedInput) != tc.updated {
				t.Errorf("UpdatedInput = %s, want %s", o.UpdatedInput, tc.updated)
			}
			if o.AdditionalContext != tc.context || o.Stop != tc.stop {
				t.Errorf("AdditionalContext, Stop = %q, %v; want %q, %v", o.AdditionalContext, o.Stop, tc.context, tc.stop)
			}
			if tc.errSubstr == "" && len(o.Errors) > 0 {
				t.Errorf("unexpected errors %q", o.Errors)
			}
			if tc.errSubstr != "" && (len(o.Errors) != 1 || !strings.Contains(o.Errors[0], tc.errSubstr)) {
				t.Errorf("Errors = %q, want one containing %q", o.Errors, tc.errSubstr)
			}
			decided := tc.block || tc.decision != "" || tc.updated != ""
			if decided != (o.DecidedBy != "") {
				t.Errorf("DecidedBy = %q", o.DecidedBy)
			}
		})
	}
}

func TestCombine(t *testing.T) {
	r, ws := newRunner(t)
	allow := printJSON(`{"hookSpecificOutput":{"permissionDecision":"allow","permissionDecisionReason":"ok by A"}}`)
	ask := printJSON(`{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"check with B"}}`)
	deny := printJSON(`{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"C says no"}}`)
	exit2 := "echo 'D says no' >&2; exit 2"
	tests := map[string]struct {
		cmds           []string
		decision       hook.Decision
		reason         string
		decisionReason string
		decidedBy      []string
	}{
		"allow and ask":         {[]string{allow, ask}, hook.Ask, "", "check with B", []string{ask}},
		"deny beats all":        {[]string{allow, deny, ask}, hook.Deny, "C says no", "C says no", []string{deny}},
		"two denials joined":    {[]string{exit2, allow, deny}, hook.Deny, "D says no\nC says no", "D says no\nC says no", []string{exit2, deny}},
		"failures do not block": {[]string{"exit 1", allow}, hook.Allow, "", "ok by A", []string{allow}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := compile(t, hook.PreToolUse, tc.cmds...).Run(t.Context(), r, hook.PreToolUse, bashInput)
			if o.Decision != tc.decision || o.Reason != tc.reason || o.DecisionReason != tc.decisionReason {
				t.Errorf("Decision, Reason, DecisionReason = %q, %q, %q; want %q, %q, %q", o.Decision, o.Reason, o.DecisionReason, tc.decision, tc.reason, tc.decisionReason)
			}
			if o.Block != (tc.decision == hook.Deny) {
				t.Errorf("Block = %v", o.Block)
			}
			if n := strings.Count(o.DecidedBy, "PreToolUse["); n != len(tc.decidedBy) {
				t.Errorf("DecidedBy = %q, want %d hooks", o.DecidedBy, len(tc.decidedBy))
			}
			for _, c := range tc.decidedBy {
				if !strings.Contains(o.DecidedBy, c) {
					t.Errorf("DecidedBy = %q, want it to name %q", o.DecidedBy, c)
				}
			}
		})
	}

	t.Run("last updatedInput in configuration order wins", func(t *testing.T) {
		// The first hook finishes last: it waits for the second one's marker.
		first := `for i in $(seq 1 1000); do [ -e second-done ] && break; sleep 0.01; done
` + printJSON(`{"hookSpecificOutput":{"updatedInput":{"command":"first"}}}`)
		second := printJSON(`{"hookSpecificOutput":{"updatedInput":{"command":"second"}}}`) + "\ntouch second-done"
		o := compile(t, hook.PreToolUse, first, second).Run(t.Context(), r, hook.PreToolUse, bashInput)
		if string(o.UpdatedInput) != `{"command":"second"}` || len(o.Errors) > 0 {
			t.Errorf("UpdatedInput = %s, Errors = %q", o.UpdatedInput, o.Errors)
		}
		if _, err := os.Stat(filepath.Join(ws, "second-done")); err != nil {
			t.Error(err)
		}
		if !strings.Contains(o.DecidedBy, "touch second-done") {
			t.Errorf("DecidedBy = %q", o.DecidedBy)
		}
	})
}

func TestStdin(t *testing.T) {
	r, ws := newRunner(t)
	sub := filepath.Join(ws, "sub")
	if err := os.Mkdir(sub, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(sub, 0o777)
	in := hook.Input{
		SessionID:      "sess-42",
		Cwd:            sub,
		ToolName:       "Edit",
		ToolUseID:      "toolu_abc",
		ToolInput:      json.RawMessage(`{"file_path": "/x/a.go", "old_string": "a\"b", "new_string": "ü"}`),
		ToolResponse:   json.RawMessage(`{"filePath": "/x/a.go", "success": true}`),
		PermissionMode: "acceptEdits",
	}
	record := `cat > "$CLAUDE_PROJECT_DIR/stdin.json"; pwd > "$CLAUDE_PROJECT_DIR/pwd"`
	tests := map[string]struct {
		ev   hook.Event
		in   hook.Input
		want string
		cwd  string
	}{
		"pre": {hook.PreToolUse, in, `{"session_id":"sess-42","transcript_path":"","cwd":"` + sub + `","hook_event_name":"PreToolUse","tool_name":"Edit",` +
			`"tool_input":{"file_path":"/x/a.go","old_string":"a\"b","new_string":"ü"},"tool_use_id":"toolu_abc","permission_mode":"acceptEdits"}`, sub},
		"post": {hook.PostToolUse, in, `{"session_id":"sess-42","transcript_path":"","cwd":"` + sub + `","hook_event_name":"PostToolUse","tool_name":"Edit",` +
			`"tool_input":{"file_path":"/x/a.go","old_string":"a\"b","new_string":"ü"},"tool_response":{"filePath":"/x/a.go","success":true},` +
			`"tool_use_id":"toolu_abc","permission_mode":"acceptEdits"}`, sub},
		"defaults": {hook.PreToolUse, hook.Input{ToolName: "Bash"}, `{"session_id":"","transcript_path":"","cwd":"` + ws +
			`","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{},"tool_use_id":"","permission_mode":"default"}`, ws},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := compile(t, tc.ev, record).Run(t.Context(), r, tc.ev, tc.in)
			if !isZero(o) {
				t.Fatalf("outcome %+v", o)
			}
			got, err := os.ReadFile(filepath.Join(ws, "stdin.json"))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("stdin\n got %s\nwant %s", got, tc.want)
			}
			pwd, _ := os.ReadFile(filepath.Join(ws, "pwd"))
			if strings.TrimSpace(string(pwd)) != tc.cwd {
				t.Errorf("hook ran in %q, want %q", pwd, tc.cwd)
			}
		})
	}
}

func TestParallel(t *testing.T) {
	r, ws := newRunner(t)
	// Each hook announces itself and then waits for the other: both can
	// only succeed if they run at the same time.
	wait := func(me, other string) string {
		return fmt.Sprintf(`touch %s; for i in $(seq 1 2000); do [ -e %s ] && exit 0; sleep 0.01; done; echo gave up >&2; exit 1`, me, other)
	}
	o := compile(t, hook.PreToolUse, wait("a", "b"), wait("b", "a")).Run(t.Context(), r, hook.PreToolUse, bashInput)
	if len(o.Errors) > 0 {
		t.Fatalf("hooks did not run at once: %q", o.Errors)
	}
	for _, f := range []string{"a", "b"} {
		if _, err := os.Stat(filepath.Join(ws, f)); err != nil {
			t.Error(err)
		}
	}
}

func TestTimeout(t *testing.T) {
	r, ws := newRunner(t)
	s, err := hook.Compile([]hook.Matcher{{Event: hook.PreToolUse, Matcher: "Bash", Commands: []hook.Command{
		{Command: "sleep 1000 & echo $! > bg.pid; sleep 1000", Timeout: 300 * time.Millisecond},
		{Command: printJSON(`{"hookSpecificOutput":{"permissionDecision":"allow"}}`)},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	o := s.Run(t.Context(), r, hook.PreToolUse, bashInput)
	if o.Block || o.Decision != hook.Allow {
		t.Errorf("Block, Decision = %v, %q; the call should go on", o.Block, o.Decision)
	}
	if len(o.Errors) != 1 || !strings.Contains(o.Errors[0], "timed out after 300ms") || !strings.Contains(o.Errors[0], "sleep 1000") {
		t.Errorf("Errors = %q, want the timeout of the sleeping hook", o.Errors)
	}
	assertGone(t, filepath.Join(ws, "bg.pid"))
}

func TestCancel(t *testing.T) {
	r, ws := newRunner(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			// The shell creates the file before echo writes the pid: wait
			// for the whole line.
			if b, err := os.ReadFile(filepath.Join(ws, "bg.pid")); err == nil && strings.HasSuffix(string(b), "\n") {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	o := compile(t, hook.PreToolUse, "sleep 1000 & echo $! > bg.pid; sleep 1000").Run(ctx, r, hook.PreToolUse, bashInput)
	if len(o.Errors) != 1 || !strings.Contains(o.Errors[0], "was stopped: context canceled") {
		t.Errorf("Errors = %q", o.Errors)
	}
	assertGone(t, filepath.Join(ws, "bg.pid"))
}

// assertGone checks that the process whose pid is in file no longer runs.
func assertGone(t *testing.T, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(b))
	if pid == "" {
		t.Fatalf("%s holds no pid", file)
	}
	if _, err := os.Stat("/proc/" + pid); err == nil {
		t.Errorf("background process %s of the hook survived", pid)
	}
	if left := sandboxtest.Descendants(); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

func TestPostToolUseFormatsFile(t *testing.T) {
	r, ws := newRunner(t)
	file := filepath.Join(ws, "main.go")
	if err := os.WriteFile(file, []byte("x   :=    1\ny  =  2\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(file, 0o666)
	// A formatter hook in plain shell: pull file_path out of tool_input and
	// squeeze runs of spaces in that file.
	format := `f=$(sed -n 's/.*"tool_input":{[^}]*"file_path":"\([^"]*\)".*/\1/p')
[ -n "$f" ] || { echo "no file_path" >&2; exit 1; }
sed -i 's/  */ /g' "$f" && echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"formatted '"$f"'"}}'`
	s, err := hook.Compile([]hook.Matcher{{Event: hook.PostToolUse, Matcher: "Edit|Write", Commands: []hook.Command{{Command: format}}}})
	if err != nil {
		t.Fatal(err)
	}
	in := hook.Input{
		ToolName:     "Edit",
		ToolInput:    json.RawMessage(`{"file_path":"` + file + `","old_string":"a","new_string":"b"}`),
		ToolResponse: json.RawMessage(`{"filePath":"` + file + `"}`),
	}
	o := s.Run(t.Context(), r, hook.PostToolUse, in)
	if len(o.Errors) > 0 || o.Block {
		t.Fatalf("outcome %+v", o)
	}
	if o.AdditionalContext != "formatted "+file {
		t.Errorf("AdditionalContext = %q", o.AdditionalContext)
	}
	got, _ := os.ReadFile(file)
	if string(got) != "x := 1\ny = 2\n" {
		t.Errorf("file after hook = %q", got)
	}
	if o := s.Run(t.Context(), r, hook.PostToolUse, hook.Input{ToolName: "Read", ToolInput: in.ToolInput}); !isZero(o) {
		t.Errorf("hook ran for Read: %+v", o)
	}
}

func TestConfined(t *testing.T) {
	r, _ := newRunner(t)
	// Writable by the sandbox user, but outside the workspace: only the
	// sandbox's policy stops the write.
	outside := sandboxtest.Dir(t)
	target := filepath.Join(outside, "escaped")
	o := compile(t, hook.PreToolUse, "echo hi > "+target).Run(t.Context(), r, hook.PreToolUse, bashInput)
	if len(o.Errors) != 1 || !strings.Contains(o.Errors[0], "status 1") || !strings.Contains(o.Errors[0], "Permission denied") {
		t.Errorf("Errors = %q, want the denied write", o.Errors)
	}
	if _, err := os.Stat(target); err == nil {
		t.Error("hook wrote outside the workspace")
	}
	// No network either: only loopback exists.
	o = compile(t, hook.PreToolUse, `ls /sys/class/net | grep -vx lo && exit 1; exit 0`).Run(t.Context(), r, hook.PreToolUse, bashInput)
	if len(o.Errors) > 0 {
		t.Errorf("hook saw network interfaces: %q", o.Errors)
	}
}

func TestOutputCaps(t *testing.T) {
	r, _ := newRunner(t)
	t.Run("stdout", func(t *testing.T) {
		cmd := fmt.Sprintf(`printf '{"a":"'; head -c %d /dev/zero | tr '\0' x; printf '"}'`, 3*hook.MaxStdout)
		o := compile(t, hook.PreToolUse, cmd).Run(t.Context(), r, hook.PreToolUse, bashInput)
		if len(o.Errors) != 1 || !strings.Contains(o.Errors[0], "more than") {
			t.Errorf("Errors = %.200q", o.Errors)
		}
	})
	t.Run("stderr", func(t *testing.T) {
		cmd := fmt.Sprintf(`head -c %d /dev/zero | tr '\0' x >&2; exit 2`, 3*hook.MaxStderr)
		o := compile(t, hook.PreToolUse, cmd).Run(t.Context(), r, hook.PreToolUse, bashInput)
		if !o.Block || !strings.HasPrefix(o.Reason, strings.Repeat("x", hook.MaxStderr)+"\n") || !strings.Contains(o.Reason, "truncated") || len(o.Reason) > hook.MaxStderr+100 {
			t.Errorf("Block = %v, Reason of %d bytes ending %q", o.Block, len(o.Reason), o.Reason[max(0, len(o.Reason)-60):])
		}
	})
}

func TestTexts(t *testing.T) {
	tests := map[string]struct{ got, want string }{
		"blocked":   {hook.BlockedText("Bash", "no rm"), "PreToolUse hook blocked this Bash call: no rm"},
		"no reason": {hook.BlockedText("Bash", ""), "PreToolUse hook blocked this Bash call: (the hook gave no reason)"},
		"feedback":  {hook.FeedbackText("Edit", "lint failed"), "PostToolUse hook feedback on this Edit call: lint failed"},
		"context":   {hook.ContextText(hook.PostToolUse, "Edit", "formatted"), "<system-reminder>PostToolUse hook context for Edit: formatted</system-reminder>"},
	}
	for name, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", name, tc.got, tc.want)
		}
	}
}
