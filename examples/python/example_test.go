//go:build linux

package pythonexample_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/toolwire/toolwire/internal/testkit"
)

// python is Debian's interpreter, the one python3-grpcio installs into. Any
// other python3 on PATH may lack grpc.
const python = "/usr/bin/python3"

func TestMain(m *testing.M) {
	// Processes the server leaves behind are re-parented to this process, so
	// the test can find them after the server is gone.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "set child subreaper:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// toolResult is the Anthropic tool_result block the example prints.
type toolResult struct {
	Type      string          `json:"type"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   *bool           `json:"is_error"`
}

// text joins the text of the block's content, which is either a string or a
// list of content blocks.
func (r toolResult) text(t *testing.T) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(r.Content, &s); err == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(r.Content, &blocks); err != nil {
		t.Fatalf("result %s: content is neither a string nor blocks: %s", r.ToolUseID, r.Content)
	}
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
	}
	return b.String()
}

func (r toolResult) isError() bool { return r.IsError != nil && *r.IsError }

// TestPythonExample runs examples/python/toolwire_example.py against a real
// toolsvc process on a unix socket and checks what it printed.
func TestPythonExample(t *testing.T) {
	requirePythonGRPC(t)

	ctx, cancel := context.WithTimeout(context.Background(), testBudget(t))
	defer cancel()

	binDir, workspace, sockDir := t.TempDir(), t.TempDir(), t.TempDir()
	searchable(t, workspace)
	toolsvc := buildToolsvc(ctx, t, binDir)
	sock := filepath.Join(sockDir, "toolsvc.sock")
	startServer(ctx, t, toolsvc, sock, workspace)

	script, err := filepath.Abs("toolwire_example.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, python, script, "unix://"+sock, "--verbose")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("python example: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("python example stderr:\n%s", stderr.String())

	tools, results := parseOutput(t, stdout.String())
	for _, name := range []string{"Bash", "Glob", "Read", "Write"} {
		if !tools[name] {
			t.Errorf("ListTools output lacks %s; got %v", name, tools)
		}
	}

	tests := []struct {
		id      string
		wantErr bool
		check   func(t *testing.T, text string)
	}{
		{id: "toolu_py_01_write", check: contains("hello.txt")},
		{id: "toolu_py_02_read", check: contains("hello from python")},
		{id: "toolu_py_03_glob", check: contains("hello.txt")},
		{id: "toolu_py_04_bash", check: equals("hi")},
		{id: "toolu_py_05_bad", wantErr: true, check: contains("<tool_use_error>")},
		{id: "toolu_py_08_big", wantErr: true, check: contains("<tool_use_error>InputValidationError: Write was called with input too large to send to the executor")},
	}
	if len(results) != len(tests) {
		t.Errorf("got results for %d tool_use ids, want %d: %v", len(results), len(tests), keys(results))
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			got := results[tt.id]
			if len(got) != 1 {
				t.Fatalf("got %d results for %s, want exactly 1", len(got), tt.id)
			}
			r := got[0]
			if r.Type != "tool_result" {
				t.Errorf("type = %q, want tool_result", r.Type)
			}
			if r.isError() != tt.wantErr {
				t.Errorf("is_error = %v, want %v (content %s)", r.isError(), tt.wantErr, r.Content)
			}
			tt.check(t, r.text(t))
		})
	}

	// The Write really happened on the executor's side; the one too large
	// to send did not.
	if !fileUnder(t, workspace, "hello.txt", "hello from python\n") {
		t.Errorf("no hello.txt with the written content under the workspace %s", workspace)
	}
	if _, err := os.Stat(filepath.Join(workspace, "big.txt")); err == nil {
		t.Error("big.txt was written")
	}
}

// TestPythonExampleMCP runs the example with the example MCP server
// (examples/mcp/server) as the session's server: Hello lists it and its
// tools, and the MCP calls run with progress, next to the built-in ones.
func TestPythonExampleMCP(t *testing.T) {
	requirePythonGRPC(t)
	ctx, cancel := context.WithTimeout(context.Background(), testBudget(t))
	defer cancel()
	binDir, workspace, sockDir, serverDir := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	searchable(t, workspace)
	searchable(t, serverDir)
	toolsvc := buildToolsvc(ctx, t, binDir)
	// The sandbox runs programs from the system directories, the workspace
	// and what --sandbox-read adds.
	server := filepath.Join(serverDir, "example-mcp")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", server, "github.com/toolwire/toolwire/examples/mcp/server").CombinedOutput(); err != nil {
		t.Fatalf("build the example MCP server: %v\n%s", err, out)
	}
	sock := filepath.Join(sockDir, "toolsvc.sock")
	startServer(ctx, t, toolsvc, sock, workspace, "--sandbox-read", serverDir)

	cmd := exec.CommandContext(ctx, python, "toolwire_example.py", "unix://"+sock, "--mcp-command", server)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("python example: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"mcp server example: connected\n", "mcp tools: mcp__example__add, ", "progress toolu_py_07_mcp_slow: [1/2] step 1\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	_, results := parseOutput(t, out)
	if got := results["toolu_py_06_mcp_echo"]; len(got) != 1 || got[0].isError() || got[0].text(t) != "hi from mcp" {
		t.Errorf("mcp echo: %+v", got)
	}
	if got := results["toolu_py_07_mcp_slow"]; len(got) != 1 || got[0].isError() || got[0].text(t) != "counted 2 steps" {
		t.Errorf("mcp slow: %+v", got)
	}
	if got := results["toolu_py_04_bash"]; len(got) != 1 || got[0].text(t) != "hi" {
		t.Errorf("the built-in calls still run: %+v", got)
	}
}

// searchable makes dir and its parent searchable by others, as mkdir
// makes a directory: toolsvc run as root gives each session a user of its
// own, who must pass through every directory above its workspace. The
// workspace itself stays the test's user's (root's, in scripts/test), as
// in a checkout root made: the server is started with --session-dirs, as
// the README says.
func searchable(t *testing.T, dir string) {
	t.Helper()
	for _, p := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func contains(sub string) func(*testing.T, string) {
	return func(t *testing.T, text string) {
		t.Helper()
		if !strings.Contains(text, sub) {
			t.Errorf("text %q does not contain %q", text, sub)
		}
	}
}

func equals(want string) func(*testing.T, string) {
	return func(t *testing.T, text string) {
		t.Helper()
		if text != want {
			t.Errorf("text = %q, want %q", text, want)
		}
	}
}

func keys(m map[string][]toolResult) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// requirePythonGRPC skips the test when Debian's python cannot import grpc,
// unless TOOLWIRE_REQUIRE_PYTHON is set (scripts/test sets it after
// installing python3-grpcio, so a skip cannot hide a broken setup).
func requirePythonGRPC(t *testing.T) {
	t.Helper()
	out, err := exec.Command(python, "-c", "import grpc, google.protobuf").CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s cannot import grpc and protobuf (apt-get install python3-grpcio python3-protobuf): %v\n%s", python, err, out)
	if os.Getenv("TOOLWIRE_REQUIRE_PYTHON") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// testBudget is how long the test may run: the go test deadline less a
// margin for cleanup, or five minutes.
func testBudget(t *testing.T) time.Duration {
	if dl, ok := t.Deadline(); ok {
		return time.Until(dl) * 9 / 10
	}
	return 5 * time.Minute
}

// buildToolsvc builds ./cmd/toolsvc into dir, with the race detector when
// this test binary has it. TOOLWIRE_TOOLSVC names a ready binary to use
// instead, for trying the example against another build.
func buildToolsvc(ctx context.Context, t *testing.T, dir string) string {
	t.Helper()
	return build(ctx, t, dir, "toolsvc", os.Getenv("TOOLWIRE_TOOLSVC"))
}

// build builds ./cmd/name into dir, with the race detector when this test
// binary has it, and returns the binary; a non-empty ready is returned
// instead.
func build(ctx context.Context, t *testing.T, dir, name, ready string) string {
	t.Helper()
	if ready != "" {
		return ready
	}
	bin := filepath.Join(dir, name)
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/toolwire/toolwire/cmd/"+name)
	if out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

// startServer starts `toolsvc serve` on the unix socket sock, with extra
// flags, and waits until it accepts connections (see startProcess).
func startServer(ctx context.Context, t *testing.T, bin, sock, root string, extra ...string) {
	t.Helper()
	// As examples/python/README.md says to start it.
	args := []string{"serve", "--listen", "unix://" + sock, "--root", root, "--session-dirs"}
	if os.Geteuid() != 0 {
		args = append(args, "--network", "host")
	}
	cmd := exec.Command(bin, append(args, extra...)...)
	startProcess(ctx, t, "toolsvc", cmd, sock)
}

// leftoverChecks holds the tests that check for leftover processes once
// their servers are stopped.
var leftoverChecks sync.Map // *testing.T -> struct{}

// startProcess starts the server cmd and waits until it accepts
// connections on the unix socket sock. At cleanup it stops the server by
// PID (SIGTERM, then SIGKILL if it lingers) and fails the test if the
// server reported a data race; once every server of the test is stopped,
// it fails the test for processes they left behind.
func startProcess(ctx context.Context, t *testing.T, name string, cmd *exec.Cmd, sock string) {
	t.Helper()
	if _, loaded := leftoverChecks.LoadOrStore(t, struct{}{}); !loaded {
		// Registered before the first server's stop, so it runs after
		// the last one's.
		t.Cleanup(func() {
			leftoverChecks.Delete(t)
			killLeftovers(t)
		})
	}
	var logs testkit.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	// A process the server leaves behind may hold the log pipe open; do not
	// let it keep Wait from returning.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()

	t.Cleanup(func() {
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Errorf("SIGTERM %s (pid %d): %v", name, pid, err)
		}
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Errorf("%s (pid %d) still running 30s after SIGTERM; killing it", name, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			<-exited
		}
		t.Logf("%s exited: %v", name, waitErr)
		if strings.Contains(logs.String(), "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race:\n%s", name, logs.String())
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", name, logs.String())
		}
	})

	for {
		conn, err := net.Dial("unix", sock)
		if err == nil {
			conn.Close()
			return
		}
		select {
		case <-exited:
			t.Fatalf("%s exited before listening: %v\n%s", name, waitErr, logs.String())
		case <-ctx.Done():
			t.Fatalf("%s did not listen on %s: %v\n%s", name, sock, ctx.Err(), logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// killLeftovers fails the test for every process still parented to this
// one (orphans of the servers land here, see TestMain) and kills it by PID.
func killLeftovers(t *testing.T) {
	t.Helper()
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Errorf("read /proc: %v", err)
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, state, cmdline, ok := procInfo(pid)
		if !ok || ppid != self || state == "Z" {
			continue
		}
		t.Errorf("leftover process %d (%s) after toolsvc exited; killing it", pid, cmdline)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// procInfo reads a process's parent, state and command line from /proc.
func procInfo(pid int) (ppid int, state, cmdline string, ok bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", "", false
	}
	// The command name is in parentheses and may hold spaces; the fields
	// after its closing parenthesis are state, ppid, ...
	rest := string(stat[bytes.LastIndexByte(stat, ')')+1:])
	fields := strings.Fields(rest)
	if len(fields) < 2 {
		return 0, "", "", false
	}
	ppid, err = strconv.Atoi(fields[1])
	if err != nil {
		return 0, "", "", false
	}
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return ppid, fields[0], strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " ")), true
}

// parseOutput splits the example's stdout into the tool names it listed and
// its tool_result blocks, grouped by tool_use id.
func parseOutput(t *testing.T, out string) (map[string]bool, map[string][]toolResult) {
	t.Helper()
	tools := make(map[string]bool)
	results := make(map[string][]toolResult)
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	sawTools := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "tools: "):
			sawTools = true
			for _, name := range strings.Split(strings.TrimPrefix(line, "tools: "), ", ") {
				tools[name] = true
			}
		case strings.HasPrefix(line, "{"):
			var r toolResult
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("bad JSON line %q: %v", line, err)
			}
			results[r.ToolUseID] = append(results[r.ToolUseID], r)
		case line == "", strings.HasPrefix(line, "mcp "), strings.HasPrefix(line, "progress "):
			// MCP lines: see TestPythonExampleMCP.
		default:
			t.Errorf("unexpected output line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !sawTools {
		t.Errorf("no tools line in the output:\n%s", out)
	}
	return tools, results
}

// fileUnder reports whether a file called name with content want exists
// anywhere under root (the executor may give a session its own directory).
func fileUnder(t *testing.T, root, name, want string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != name {
			return nil
		}
		got, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if string(got) == want {
			found = true
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		t.Errorf("walk %s: %v", root, err)
	}
	return found
}
