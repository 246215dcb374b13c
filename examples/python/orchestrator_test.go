//go:build linux

package pythonexample_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/model/fakeapi"
)

// orchestratorEvent is one line orchestrator_example.py prints.
type orchestratorEvent struct {
	Event      string `json:"event"`
	ID         string `json:"id"`
	Created    bool   `json:"created"`
	Turns      int    `json:"turns"`
	Name       string `json:"name"`
	ToolUseID  string `json:"tool_use_id"`
	ToolName   string `json:"tool_name"`
	Answer     string `json:"answer"`
	IsError    bool   `json:"is_error"`
	Content    string `json:"content"`
	StopReason string `json:"stop_reason"`
	Text       string `json:"text"`

	SandboxBackend  string   `json:"sandbox_backend"`
	SandboxEnforced []string `json:"sandbox_enforced"`
}

func parseEvents(t *testing.T, out string) []orchestratorEvent {
	t.Helper()
	var evs []orchestratorEvent
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var ev orchestratorEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// events returns the events of kind.
func events(evs []orchestratorEvent, kind string) []orchestratorEvent {
	var out []orchestratorEvent
	for _, ev := range evs {
		if ev.Event == kind {
			out = append(out, ev)
		}
	}
	return out
}

// TestPythonOrchestratorExample runs a real `orchestrator serve` (with its
// in-process executor) against the fake Messages API and drives it from
// Python: orchestrator_example.py creates its session when GetSession
// answers SESSION_NOT_FOUND, runs a turn whose Write asks for permission
// and answers it, then runs again and finds the session. Then
// toolwire_reasons.py checks every OrchestratorService refusal's reason.
func TestPythonOrchestratorExample(t *testing.T) {
	requirePythonGRPC(t)
	ctx, cancel := context.WithTimeout(context.Background(), testBudget(t))
	defer cancel()

	fake := fakeapi.New(t,
		fakeapi.ToolTurn(fakeapi.Text("Writing it."),
			fakeapi.ToolUse("toolu_py_write", "Write", map[string]any{"file_path": "hello.txt", "content": "hello from python\n"})),
		fakeapi.EndTurn(fakeapi.Text("Wrote hello.txt.")),
		fakeapi.EndTurn(fakeapi.Text("Still here.")),
	)
	binDir, root, sockDir := t.TempDir(), t.TempDir(), t.TempDir()
	orchestrator := build(ctx, t, binDir, "orchestrator", os.Getenv("TOOLWIRE_ORCHESTRATOR"))
	sock := filepath.Join(sockDir, "orchestrator.sock")
	cmd := exec.Command(orchestrator, "serve", "--listen", "unix://"+sock, "--root", root,
		"--sessions-dir", filepath.Join(t.TempDir(), "sessions"), "--model", "claude-test")
	cmd.Env = append(os.Environ(), "ANTHROPIC_API_KEY=test-key", "ANTHROPIC_BASE_URL="+fake.URL, "HOME="+t.TempDir())
	startProcess(ctx, t, "orchestrator", cmd, sock)
	addr := "unix://" + sock

	first := parseEvents(t, runPython(ctx, t, "orchestrator_example.py", addr, "Create hello.txt", "--session", "py-example",
		"--require-sandbox", "landlock"))
	if s := events(first, "session"); len(s) != 1 || s[0].ID != "py-example" || !s[0].Created ||
		s[0].SandboxBackend != "landlock" || !slices.Contains(s[0].SandboxEnforced, "PROTECTION_LANDLOCK_FS") {
		t.Errorf("first run: session events %+v, want py-example created on a landlock executor", s)
	}
	if p := events(first, "permission_request"); len(p) != 1 || p[0].ToolUseID != "toolu_py_write" || p[0].ToolName != "Write" || p[0].Answer != "allow_once" {
		t.Errorf("permission requests %+v, want one for toolu_py_write, allowed once", p)
	}
	if r := events(first, "tool_result"); len(r) != 1 || r[0].ToolUseID != "toolu_py_write" || r[0].IsError || !strings.Contains(r[0].Content, "hello.txt") {
		t.Errorf("tool results %+v, want toolu_py_write done", r)
	}
	if tc := events(first, "turn_complete"); len(tc) != 1 || tc[0].StopReason != "STOP_REASON_END_TURN" || tc[0].Text != "Wrote hello.txt." {
		t.Errorf("turn_complete %+v", tc)
	}
	if b, err := os.ReadFile(filepath.Join(root, "hello.txt")); err != nil || string(b) != "hello from python\n" {
		t.Errorf("hello.txt: %q, %v", b, err)
	}

	second := parseEvents(t, runPython(ctx, t, "orchestrator_example.py", addr, "Are you there?", "--session", "py-example"))
	if s := events(second, "session"); len(s) != 1 || s[0].Created || s[0].Turns != 1 {
		t.Errorf("second run: session events %+v, want the existing session with one turn", s)
	}
	if tc := events(second, "turn_complete"); len(tc) != 1 || tc[0].Text != "Still here." {
		t.Errorf("second run: turn_complete %+v", tc)
	}

	out := runPython(ctx, t, "toolwire_reasons.py", "orchestrator", addr)
	checkReasons(t, out, []reasonLine{
		{"get an unknown session", "NOT_FOUND", "SESSION_NOT_FOUND", map[string]string{"session_id": "py-nope"}},
		{"get a malformed id", "INVALID_ARGUMENT", "INVALID_ARGUMENT", map[string]string{"session_id": "../x"}},
		{"delete an unknown session", "NOT_FOUND", "SESSION_NOT_FOUND", map[string]string{"session_id": "py-nope"}},
		{"create with a bad configuration", "INVALID_ARGUMENT", "INVALID_ARGUMENT", noMeta()},
		{"create with a workspace outside the root", "FAILED_PRECONDITION", "WORKSPACE_INVALID", map[string]string{"session_id": "py-ws"}},
		{"create on an unreachable executor", "UNAVAILABLE", "EXECUTOR_UNAVAILABLE", map[string]string{"session_id": "py-down"}},
		{"create requiring a sandbox the executor lacks", "FAILED_PRECONDITION", "SANDBOX_REQUIREMENT_UNMET", map[string]string{"session_id": "py-sandbox", "missing": "backend:gvisor"}},
		{"create an existing session", "ALREADY_EXISTS", "SESSION_EXISTS", map[string]string{"session_id": "py-reasons"}},
		{"user message first", "INVALID_ARGUMENT", "INVALID_FIRST_MESSAGE", noMeta()},
		{"attach to an unknown session", "NOT_FOUND", "SESSION_NOT_FOUND", map[string]string{"session_id": "py-nope"}},
		{"second attach", "INVALID_ARGUMENT", "UNEXPECTED_MESSAGE", map[string]string{"session_id": "py-reasons"}},
		{"stream of a deleted session", "UNAVAILABLE", "SESSION_CLOSED", map[string]string{"session_id": "py-reasons"}},
	})
	if errs := fake.Errors(); len(errs) > 0 {
		t.Errorf("fake API: %v", errs)
	}
}
