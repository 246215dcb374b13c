//go:build linux

package pythonexample_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// reasonLine is one case toolwire_reasons.py prints.
type reasonLine struct {
	Case     string            `json:"case"`
	Code     string            `json:"code"`
	Reason   string            `json:"reason"`
	Metadata map[string]string `json:"metadata"`
}

// runPython runs a script of this directory with Debian's python and
// returns its stdout; a failing script fails the test.
func runPython(ctx context.Context, t *testing.T, script string, args ...string) string {
	t.Helper()
	path, err := filepath.Abs(script)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, python, append([]string{path}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
	}
	if stderr.Len() > 0 {
		t.Logf("%s stderr:\n%s", script, stderr.String())
	}
	return stdout.String()
}

// checkReasons compares the cases toolwire_reasons.py printed with want,
// by case name: each must be there once, with its code, reason and
// exactly its metadata.
func checkReasons(t *testing.T, out string, want []reasonLine) {
	t.Helper()
	got := map[string][]reasonLine{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var l reasonLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got[l.Case] = append(got[l.Case], l)
	}
	for _, w := range want {
		ls := got[w.Case]
		delete(got, w.Case)
		if len(ls) != 1 {
			t.Errorf("%s: printed %d times, want once", w.Case, len(ls))
			continue
		}
		g := ls[0]
		if g.Code != w.Code || g.Reason != w.Reason || !maps.Equal(g.Metadata, w.Metadata) {
			t.Errorf("%s: got %s %q %v, want %s %q %v", w.Case, g.Code, g.Reason, g.Metadata, w.Code, w.Reason, w.Metadata)
		}
	}
	if len(got) > 0 {
		t.Errorf("cases the test does not know: %v", slices.Sorted(maps.Keys(got)))
	}
}

func noMeta() map[string]string { return map[string]string{} }

// TestPythonErrorReasons runs toolwire_reasons.py against real toolsvc
// processes (one open, one wanting a bearer token) and checks that Python
// reads the code, reason and metadata of every refusal from the
// grpc-status-details-bin trailer.
func TestPythonErrorReasons(t *testing.T) {
	requirePythonGRPC(t)
	ctx, cancel := context.WithTimeout(context.Background(), testBudget(t))
	defer cancel()

	binDir, workspace, sockDir := t.TempDir(), t.TempDir(), t.TempDir()
	searchable(t, workspace)
	toolsvc := buildToolsvc(ctx, t, binDir)
	open, guarded := filepath.Join(sockDir, "open.sock"), filepath.Join(sockDir, "guarded.sock")
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startServer(ctx, t, toolsvc, open, workspace)
	// The second server runs no tools; it needs no session users of its own.
	startServer(ctx, t, toolsvc, guarded, workspace, "--token-file", token, "--session-uids", "off")

	out := runPython(ctx, t, "toolwire_reasons.py", "executor", "unix://"+open, "--guarded", "unix://"+guarded)
	checkReasons(t, out, []reasonLine{
		{"tool_use first", "INVALID_ARGUMENT", "INVALID_FIRST_MESSAGE", noMeta()},
		{"resume of an unknown session", "NOT_FOUND", "SESSION_NOT_FOUND", map[string]string{"session_id": "py-nope"}},
		{"workspace outside the root", "FAILED_PRECONDITION", "WORKSPACE_INVALID", map[string]string{"session_id": "py-ws"}},
		{"rule that does not compile", "INVALID_ARGUMENT", "INVALID_OPEN", map[string]string{"field": "settings"}},
		{"second open", "INVALID_ARGUMENT", "UNEXPECTED_MESSAGE", map[string]string{"session_id": "py-twice"}},
		{"tool_use without id", "INVALID_ARGUMENT", "INVALID_TOOL_USE", map[string]string{"session_id": "py-noid"}},
		{"open of a live session", "ALREADY_EXISTS", "SESSION_EXISTS", map[string]string{"session_id": "py-live"}},
		{"stream of a resumed session", "ABORTED", "SESSION_SUPERSEDED", map[string]string{"session_id": "py-live"}},
		{"no token", "UNAUTHENTICATED", "TOKEN_MISSING", noMeta()},
		{"wrong token", "UNAUTHENTICATED", "TOKEN_INVALID", noMeta()},
	})
}
