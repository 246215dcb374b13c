package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/rpcserver"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolwire/toolwire/internal/testkit"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

var toolsvcBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "toolsvc-test-")
	if err != nil {
		panic(err)
	}
	// Tests run the binary as nobody too.
	if err := os.Chmod(dir, 0o755); err != nil {
		panic(err)
	}
	toolsvcBin = filepath.Join(dir, "toolsvc")
	out, err := exec.Command("go", "build", "-o", toolsvcBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build toolsvc: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// toolResult is the Anthropic tool_result block toolsvc call prints.
type toolResult struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   any    `json:"content"`
	IsError   *bool  `json:"is_error"`
}

func runCall(t *testing.T, stdin string, args ...string) []toolResult {
	t.Helper()
	return runCallEnv(t, nil, stdin, args...)
}

// runCallEnv is runCall with env added to the environment.
func runCallEnv(t *testing.T, env []string, stdin string, args ...string) []toolResult {
	t.Helper()
	cmd := exec.Command(toolsvcBin, append([]string{"call"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("toolsvc call: %v\nstderr: %s", err, stderr.String())
	}
	// An embedded executor's sessions leave no cgroup directory behind.
	if left := cgroupsOf(t, cmd.Process.Pid); len(left) > 0 {
		t.Errorf("toolsvc call left its cgroup directories behind: %v", left)
	}
	var rs []toolResult
	if err := json.Unmarshal(stdout.Bytes(), &rs); err != nil {
		t.Fatalf("output is not a JSON array of tool_result blocks: %v\n%s", err, stdout.String())
	}
	return rs
}

func TestCallEmbeddedAssistantMessage(t *testing.T) {
	root := sandboxtest.Dir(t)
	msg := `{"id":"msg_1","role":"assistant","content":[
		{"type":"text","text":"Let me look."},
		{"type":"tool_use","id":"toolu_w","name":"Write","input":{"file_path":"notes.txt","content":"alpha\nbeta\n"}},
		{"type":"tool_use","id":"toolu_r","name":"Read","input":{"file_path":"notes.txt"}},
		{"type":"tool_use","id":"toolu_bad","name":"Read","input":"{\"file_path\": "},
		{"type":"tool_use","id":"toolu_x","name":"NoSuchTool","input":{}},
		{"type":"tool_use","id":"toolu_b","name":"Bash","input":{"command":"echo out; echo err >&2; exit 3"}}
	]}`
	rs := runCall(t, msg, "--embedded", "--root", root)
	want := []struct {
		id, content string
		isError     *bool
	}{
		{"toolu_w", "File created successfully at: notes.txt", nil},
		{"toolu_r", "1\talpha\n2\tbeta\n3\t", nil},
		{"toolu_bad", "<tool_use_error>InputValidationError: Read was called with input that could not be parsed as JSON.", ptr(true)},
		{"toolu_x", "<tool_use_error>Error: No such tool available: NoSuchTool</tool_use_error>", ptr(true)},
		{"toolu_b", "Exit code 3\nout\nerr", ptr(true)},
	}
	if len(rs) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(rs), len(want), rs)
	}
	for i, w := range want {
		r := rs[i]
		content, _ := r.Content.(string)
		if r.Type != "tool_result" || r.ToolUseID != w.id || !strings.HasPrefix(content, w.content) {
			t.Errorf("result %d: %+v, want id %s content starting %q", i, r, w.id, w.content)
		}
		if (r.IsError == nil) != (w.isError == nil) || (r.IsError != nil && *r.IsError != *w.isError) {
			t.Errorf("result %d (%s): is_error %v, want %v", i, w.id, deref(r.IsError), deref(w.isError))
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "notes.txt")); err != nil || string(b) != "alpha\nbeta\n" {
		t.Fatalf("file written: %q %v", b, err)
	}
}

func ptr[T any](v T) *T { return &v }

func deref(b *bool) any {
	if b == nil {
		return "absent"
	}
	return *b
}

func TestCallBlockPerLine(t *testing.T) {
	in := `{"type":"tool_use","id":"a","name":"Bash","input":{"command":"echo one"}}
{"type":"tool_use","id":"b","name":"Bash","input":{"command":"echo two"}}
`
	rs := runCall(t, in, "--embedded", "--root", sandboxtest.Dir(t))
	if len(rs) != 2 || rs[0].Content != "one" || rs[1].Content != "two" || rs[0].IsError == nil || *rs[0].IsError {
		t.Fatalf("results %+v", rs)
	}
}

// startServe runs toolsvc serve on a free loopback port and returns its
// address; the process is stopped with SIGTERM when the test ends.
func startServe(t *testing.T, root string, extra ...string) (string, *exec.Cmd) {
	t.Helper()
	addr, cmd, _ := startServeLogged(t, root, extra...)
	return addr, cmd
}

// startServeLogged is startServe that also returns toolsvc's log as it
// grows.
func startServeLogged(t *testing.T, root string, extra ...string) (string, *exec.Cmd, *testkit.Buffer) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := exec.Command(toolsvcBin, append([]string{"serve", "--listen", addr, "--insecure", "--root", root, "--log-format", "text"}, extra...)...)
	logs := &testkit.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("toolsvc logs:\n%s", logs.String())
		}
	})
	waitServing(t, addr)
	return addr, cmd, logs
}

func waitServing(t *testing.T, addr string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rpcserver.WaitServing(ctx, conn, "toolwire.executor.v1.ExecutorService"); err != nil {
		t.Fatalf("toolsvc at %s not serving: %v", addr, err)
	}
}

func TestServeOverTCPAndCall(t *testing.T) {
	root := sandboxtest.Dir(t)
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("needle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, _ := startServe(t, root)
	in := `[{"type":"tool_use","id":"g","name":"Grep","input":{"pattern":"needle"}},
	        {"type":"tool_use","id":"l","name":"Glob","input":{"pattern":"*.txt"}}]`
	rs := runCall(t, in, "--insecure", "--addr", addr)
	if len(rs) != 2 || rs[0].Content != "Found 1 file\na.txt" || rs[1].Content != "a.txt" {
		t.Fatalf("results %+v", rs)
	}
}

func TestServeUnixSocketAndSIGTERM(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "toolsvc.sock")
	cmd := exec.Command(toolsvcBin, "serve", "--listen", "unix://"+sock, "--root", sandboxtest.Dir(t))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitServing(t, "unix://"+sock)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("toolsvc exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("toolsvc did not stop after SIGTERM")
	}
}

func TestCallPermissionModes(t *testing.T) {
	root := sandboxtest.Dir(t)
	write := `{"type":"tool_use","id":"w","name":"Write","input":{"file_path":"f.txt","content":"x"}}`
	for _, tc := range []struct {
		name    string
		args    []string
		content string
	}{
		{"plan mode refuses writes", []string{"--permission-mode", "plan"}, "Plan mode is on"},
		{"default mode asks and --ask=deny refuses", []string{"--permission-mode", "default"}, "The user denied permission to use Write."},
		{"default mode asks and --ask=allow runs", []string{"--permission-mode", "default", "--ask", "allow"}, "File created successfully at: f.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := runCall(t, write, append([]string{"--embedded", "--root", root}, tc.args...)...)
			content, _ := rs[0].Content.(string)
			if len(rs) != 1 || !strings.Contains(content, tc.content) {
				t.Fatalf("got %+v, want content containing %q", rs, tc.content)
			}
		})
	}
}

// A deny rule on a path under "~" holds when the model writes the path
// with "~" too, as the tools expand it; and in default mode such a path is
// outside the workspace, so reading it asks.
func TestCallTildeInTheInput(t *testing.T) {
	root := sandboxtest.Dir(t)
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "secret.txt"), []byte("hidden\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "notes.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	settingsFile := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(settingsFile, []byte(`{"permissions":{"deny":["Read(~/secret.txt)"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	in := `{"type":"tool_use","id":"s","name":"Read","input":{"file_path":"~/secret.txt"}}
{"type":"tool_use","id":"n","name":"Read","input":{"file_path":"~/notes.txt"}}`
	rs := runCallEnv(t, []string{"HOME=" + home}, in, "--embedded", "--root", root, "--settings", settingsFile, "--permission-mode", "default")
	if len(rs) != 2 {
		t.Fatalf("results %+v", rs)
	}
	for i, want := range []string{"Permission denied by rule Read(~/secret.txt)", "The user denied permission to use Read."} {
		content, _ := rs[i].Content.(string)
		if rs[i].IsError == nil || !*rs[i].IsError || !strings.Contains(content, want) {
			t.Errorf("%s: %q, want an error containing %q", rs[i].ToolUseID, content, want)
		}
	}
}

func TestServeOperatorSettingsCannotBeLoosened(t *testing.T) {
	root := sandboxtest.Dir(t)
	settingsFile := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(settingsFile, []byte(`{"permissions":{"deny":["Bash(rm:*)"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, _ := startServe(t, root, "--settings", settingsFile)
	in := `{"type":"tool_use","id":"rm","name":"Bash","input":{"command":"touch keep && bash -c 'rm keep'"}}`
	rs := runCall(t, in, "--insecure", "--addr", addr, "--permission-mode", "bypassPermissions")
	content, _ := rs[0].Content.(string)
	if rs[0].IsError == nil || !*rs[0].IsError || !strings.Contains(content, "Bash(rm:*)") {
		t.Fatalf("operator deny rule did not hold in bypass mode: %+v", rs)
	}
}

func TestServeRejectsMalformedSettings(t *testing.T) {
	settingsFile := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(settingsFile, []byte("{\n  \"permissions\": {\"allow\": [\"Bash(\"]}\n}"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(toolsvcBin, "serve", "--listen", "127.0.0.1:0", "--root", t.TempDir(), "--settings", settingsFile).CombinedOutput()
	if err == nil || !strings.Contains(string(out), settingsFile+":2:") {
		t.Fatalf("toolsvc accepted a malformed settings file or did not say where: %v\n%s", err, out)
	}
}

// TestNewWorkspaceAndFilesBelongToTheToolUser checks that, with toolsvc
// serve running as root, a workspace it creates and a file Write creates
// stay usable by the unprivileged user Bash runs as.
func TestNewWorkspaceAndFilesBelongToTheToolUser(t *testing.T) {
	root := sandboxtest.Dir(t)
	addr, _ := startServe(t, root)
	in := `{"id":"m","content":[
		{"type":"tool_use","id":"w","name":"Write","input":{"file_path":"made.txt","content":"one\n"}},
		{"type":"tool_use","id":"b","name":"Bash","input":{"command":"echo two >> made.txt && touch by-bash && cat made.txt"}}]}`
	rs := runCall(t, in, "--insecure", "--addr", addr, "--workspace", "sessions/s1")
	if len(rs) != 2 || rs[1].Content != "one\ntwo" || rs[1].IsError == nil || *rs[1].IsError {
		t.Fatalf("results %+v", rs)
	}
	if _, err := os.Stat(filepath.Join(root, "sessions", "s1", "by-bash")); err != nil {
		t.Fatal(err)
	}
}
