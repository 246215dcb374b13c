package execgrpc_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
	"github.com/toolwire/toolwire/pkg/settings"
)

// realHarness serves the real built-in tools, sandboxed, over loopback TCP,
// with permissions out of the way (bypassPermissions).
func realHarness(t *testing.T) (*harness, string) {
	t.Helper()
	return permHarness(t, execsvc.Config{Operator: settings.Settings{Permissions: settings.Permissions{DefaultMode: permission.ModeBypass}}})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, sandboxtest.NobodyUID, sandboxtest.NobodyGID); err != nil && os.Geteuid() == 0 {
		t.Fatal(err)
	}
}

func TestReadThenEditInOneMessage(t *testing.T) {
	h, root := realHarness(t)
	a := filepath.Join(root, "A.txt")
	writeFile(t, a, "alpha\nbeta\n")
	s := h.open(nil)
	s.useTool("r", "m1", "Read", `{"file_path":"`+a+`"}`)
	s.useTool("e", "m1", "Edit", `{"file_path":"`+a+`","old_string":"beta","new_string":"gamma"}`)
	s.useTool("r2", "m1", "Read", `{"file_path":"`+a+`","offset":2,"limit":1}`)
	rs := s.results(3)
	want := []string{
		"1\talpha\n2\tbeta\n3\t",
		"The file " + a + " has been updated successfully. (file state is current in your context — no need to Read it back)",
		"2\tgamma",
	}
	for i, r := range rs {
		if r.GetIsError() || text(r) != want[i] {
			t.Errorf("result %d (%s): %q, want %q", i, r.GetToolUseId(), text(r), want[i])
		}
	}
	if b, _ := os.ReadFile(a); string(b) != "alpha\ngamma\n" {
		t.Fatalf("file now %q", b)
	}
}

// Claude Code takes an offset of 0 or below and a limit of 0 as if they were
// not given, although the schema it shows the model (and ListTools shows)
// rules them out.
func TestReadOffsetAndLimitBelowOne(t *testing.T) {
	h, root := realHarness(t)
	s := h.open(nil)
	for i, c := range []struct{ in, want string }{
		{`"offset":-1`, "1\talpha\n2\tbeta\n3\t"},
		{`"limit":0`, "1\talpha\n2\tbeta\n3\t"},
		{`"offset":0,"limit":0`, "1\talpha\n2\tbeta\n3\t"},
		{`"offset":-5,"limit":1`, "1\talpha"},
	} {
		// A file each: an unchanged re-read would get the "unchanged" note.
		name := filepath.Join(root, fmt.Sprintf("A%d.txt", i))
		writeFile(t, name, "alpha\nbeta\n")
		s.useTool(fmt.Sprint("r", i), fmt.Sprint("m", i), "Read", `{"file_path":"`+name+`",`+c.in+`}`)
		r := s.results(1)[0]
		if r.IsError != nil || text(r) != c.want {
			t.Errorf("Read {%s}: is_error %v, %q; want %q", c.in, r.GetIsError(), text(r), c.want)
		}
	}
	list, err := h.client.ListTools(context.Background(), &executorv1.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list.GetTools() {
		if d.GetName() == "Read" && !strings.Contains(d.GetInputSchemaJson(), `"exclusiveMinimum": 0`) {
			t.Errorf("Read's schema for the model lost Claude Code's bounds: %s", d.GetInputSchemaJson())
		}
	}
}

func TestEditWithoutReadIsRefused(t *testing.T) {
	h, root := realHarness(t)
	a := filepath.Join(root, "A.txt")
	writeFile(t, a, "alpha\n")
	s := h.open(nil)
	s.useTool("e", "m1", "Edit", `{"file_path":"`+a+`","old_string":"alpha","new_string":"x"}`)
	r := s.results(1)[0]
	if !r.GetIsError() || text(r) != "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>" {
		t.Fatalf("%q", text(r))
	}
}

func TestBashConcurrencyVerdicts(t *testing.T) {
	h, _ := realHarness(t)
	s := h.open(nil)
	inputs := map[string]string{
		"ls":      `{"command":"ls -la"}`,
		"pipe":    `{"command":"cat go.mod | grep module"}`,
		"mkdir":   `{"command":"mkdir x"}`,
		"redir":   `{"command":"echo hi > f"}`,
		"unknown": `{"command":"nonexistent-cmd-xyz"}`,
		"broken":  `{"command":"echo 'unterminated"}`,
	}
	for id, in := range inputs {
		s.useTool(id, "m-"+id, "Bash", in)
	}
	// Each Accepted comes before its call's Result, or with it.
	verdict, results := map[string]bool{}, 0
	s.until(func(ev *executorv1.ExecuteResponse) bool {
		if a := ev.GetAccepted(); a != nil {
			verdict[a.GetToolUseId()] = a.GetConcurrencySafe()
		}
		if r := ev.GetResult(); r != nil {
			if _, ok := verdict[r.GetToolUseId()]; !ok {
				t.Errorf("result of %s before its Accepted", r.GetToolUseId())
			}
			results++
		}
		return len(verdict) == len(inputs) && results == len(inputs)
	})
	for id, safe := range map[string]bool{"ls": true, "pipe": true, "mkdir": false, "redir": false, "unknown": false, "broken": false} {
		if verdict[id] != safe {
			t.Errorf("%s: concurrency-safe %v, want %v", id, verdict[id], safe)
		}
	}
}

func TestBashCwdPersistsEnvDoesNot(t *testing.T) {
	h, root := realHarness(t)
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := h.open(nil)
	s.useTool("1", "m1", "Bash", `{"command":"cd sub && export FOO=bar"}`)
	s.results(1)
	s.useTool("2", "m2", "Bash", `{"command":"pwd; echo FOO=$FOO"}`)
	r := s.results(1)[0]
	if got, want := text(r), filepath.Join(root, "sub")+"\nFOO="; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestBashProgressAndTimeoutOverTheStream(t *testing.T) {
	h, _ := realHarness(t)
	s := h.open(nil)
	s.useTool("t", "m1", "Bash", `{"command":"echo started; (sleep 60 &) ; setsid sleep 60 & sleep 60","timeout":1500}`)
	var sawOutput bool
	evs := s.until(func(ev *executorv1.ExecuteResponse) bool {
		if p := ev.GetProgress(); p != nil && strings.Contains(string(p.GetOutput()), "started") {
			sawOutput = true
		}
		return ev.GetResult() != nil
	})
	r := evs[len(evs)-1].GetResult()
	if !sawOutput {
		t.Error("no progress event carried the output before the timeout")
	}
	if !r.GetIsError() || r.GetOutcome() != executorv1.Outcome_OUTCOME_TIMEOUT || !strings.HasPrefix(text(r), "Exit code 143\nCommand timed out after 1s\nstarted") {
		t.Fatalf("timeout result %v %q", r.GetOutcome(), text(r))
	}
	// The cleanup of realHarness fails the test if any sleep survived.
}

func TestBackgroundShellLifecycle(t *testing.T) {
	h, _ := realHarness(t)
	s := h.open(nil)
	s.useTool("bg", "m1", "Bash", `{"command":"echo begin; sleep 30","run_in_background":true,"description":"wait"}`)
	r := s.results(1)[0]
	const prefix = "Command running in background with ID: "
	if !strings.HasPrefix(text(r), prefix) {
		t.Fatalf("%q", text(r))
	}
	if r.IsError == nil || r.GetIsError() {
		t.Errorf("background launch: is_error %v, want a stated false like every Bash result", r.IsError)
	}
	id := strings.Fields(strings.TrimPrefix(text(r), prefix))[0]
	id = strings.TrimSuffix(id, ".")
	s.useTool("out", "m2", "TaskOutput", `{"task_id":"`+id+`","block":false}`)
	if got := text(s.results(1)[0]); !strings.Contains(got, "<status>running</status>") {
		t.Fatalf("TaskOutput: %q", got)
	}
	s.useTool("stop", "m3", "KillShell", `{"shell_id":"`+id+`"}`)
	if got := text(s.results(1)[0]); !strings.Contains(got, `"message":"Successfully stopped task: `+id) {
		t.Fatalf("KillShell: %q", got)
	}
	s.useTool("gone", "m4", "TaskOutput", `{"task_id":"`+id+`"}`)
	if r := s.results(1)[0]; !r.GetIsError() || text(r) != "<tool_use_error>No task found with ID: "+id+"</tool_use_error>" {
		t.Fatalf("after stop: %q", text(r))
	}
}

func TestBackgroundShellDiesWithSession(t *testing.T) {
	h, _ := realHarness(t)
	s := h.open(nil)
	s.useTool("bg", "m1", "Bash", `{"command":"sleep 300","run_in_background":true}`)
	s.results(1)
	if err := s.s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for range s.events {
	}
	// The harness cleanup checks that no sleep is left.
}
