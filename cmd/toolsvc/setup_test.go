package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

const echoHi = `{"type":"tool_use","id":"hi","name":"Bash","input":{"command":"echo hi"}}`

// goNames are Go identifiers of configuration fields that must not reach a
// user in place of a flag.
var goNames = []string{"RunAsUser", "SessionUIDs", "SessionUser", "ReadOnlyPaths", "ReadWritePaths", "CPUTime", "OpenFiles", "Config."}

// toolsvc runs the binary with args and stdin, as user uid when uid is 0 or
// more (the test must be root then), and returns its exit code and output.
func toolsvc(t *testing.T, uid int, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(toolsvcBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if uid >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("toolsvc %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// rootOwnedDir returns a directory root owns, mode 0755 under searchable
// parents: a checkout root made, as the README's commands meet it.
func rootOwnedDir(t *testing.T) string {
	t.Helper()
	parent := t.TempDir()
	dir := filepath.Join(parent, "checkout")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(parent), parent} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestCallEmbeddedRunsAsTheCaller: call --embedded runs the tools as the
// user who runs it, in any directory that user may use: root in its own
// (mode 0700) directory, and an ordinary user in theirs, where a private
// network namespace is out of reach and the host's network is the default.
func TestCallEmbeddedRunsAsTheCaller(t *testing.T) {
	script := `{"id":"m","content":[
		{"type":"tool_use","id":"w","name":"Write","input":{"file_path":"by-write.txt","content":"w\n"}},
		{"type":"tool_use","id":"b","name":"Bash","input":{"command":"id -u && touch by-bash && cat by-write.txt"}}]}`
	check := func(t *testing.T, uid int, dir string, stdout, stderr string) {
		t.Helper()
		var rs []toolResult
		if err := json.Unmarshal([]byte(stdout), &rs); err != nil || len(rs) != 2 {
			t.Fatalf("results %q (%v)\nstderr: %s", stdout, err, stderr)
		}
		if want := fmt.Sprintf("%d\nw", uid); rs[1].Content != want || rs[1].IsError == nil || *rs[1].IsError {
			t.Fatalf("Bash: %+v, want content %q", rs[1], want)
		}
		for _, name := range []string{"by-write.txt", "by-bash"} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if owner := int(fi.Sys().(*syscall.Stat_t).Uid); owner != uid {
				t.Errorf("%s belongs to uid %d, want %d", name, owner, uid)
			}
		}
	}
	t.Run("as this user in a private directory", func(t *testing.T) {
		dir := t.TempDir() // mode 0700, owned by whoever runs the test
		code, stdout, stderr := toolsvc(t, -1, script, "call", "--embedded", "--root", dir)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		check(t, os.Getuid(), dir, stdout, stderr)
	})
	t.Run("as an ordinary user", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("the test switches to nobody, which needs root; the other subtest runs as you")
		}
		dir := sandboxtest.Dir(t) // nobody's
		code, stdout, stderr := toolsvc(t, sandboxtest.NobodyUID, script, "call", "--embedded", "--root", dir)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		check(t, sandboxtest.NobodyUID, dir, stdout, stderr)
	})
}

// TestSetupErrorsNameTheFlag: every way toolsvc's setup can fail ends in a
// message that names the flag that fixes it, and no Go field name.
func TestSetupErrorsNameTheFlag(t *testing.T) {
	root := os.Geteuid() == 0
	missing := filepath.Join(t.TempDir(), "missing")
	private := t.TempDir() // mode 0700: nobody may not write it
	cases := []struct {
		name     string
		asNobody bool // run as nobody (needs root)
		rootOnly bool
		args     []string
		want     []string
	}{
		{name: "unknown sandbox", args: []string{"call", "--embedded", "--sandbox", "chroot"}, want: []string{`--sandbox must be "landlock" or "none", not "chroot"`}},
		{name: "unknown network", args: []string{"call", "--embedded", "--network", "bridge"}, want: []string{`--network must be "none", "allowlist" or "host", not "bridge"`}},
		{name: "missing root", args: []string{"call", "--embedded", "--root", missing}, want: []string{missing, "pass --root an existing directory"}},
		{name: "bad uid range", args: []string{"call", "--embedded", "--session-uids", "5-1"}, want: []string{"--session-uids: ", "5-1"}},
		{name: "negative limit", args: []string{"call", "--embedded", "--limit-cpu", "-1s"}, want: []string{"--limit-cpu must not be negative"}},
		{name: "one process per call", args: []string{"call", "--embedded", "--limit-processes", "1"}, want: []string{"--limit-processes must be 0 (unlimited) or at least 2"}},
		{name: "limit above the hard limit", args: []string{"call", "--embedded", "--limit-open-files", "99999999999"}, want: []string{"RLIMIT_NOFILE", "--limit-open-files"}},
		{name: "missing extra directory", args: []string{"call", "--embedded", "--rw", missing}, want: []string{missing, "flag -rw"}},
		{name: "missing sandbox-read directory", args: []string{"call", "--embedded", "--sandbox-read", missing}, want: []string{missing, "--sandbox-read"}},
		{name: "unknown run-as user", rootOnly: true, args: []string{"call", "--embedded", "--run-as", "no-such-user-xyz"}, want: []string{"no-such-user-xyz", "leave out --run-as"}},
		{name: "run-as user who cannot write the root", rootOnly: true, args: []string{"call", "--embedded", "--run-as", "nobody", "--root", private},
			want: []string{private, "not accessible to user nobody", "leave out --run-as"}},
		{name: "run-as with session uids", rootOnly: true, args: []string{"serve", "--run-as", "nobody", "--session-uids", "3300000-3300010"}, want: []string{"--run-as", "--session-uids", "exclude each other"}},
		{name: "uid range holding nobody", rootOnly: true, args: []string{"serve", "--session-uids", "60000-70000"}, want: []string{"--session-uids: ", "65534"}},
		{name: "no private network without root", asNobody: true, args: []string{"call", "--embedded", "--root", "/", "--network", "none"},
			want: []string{"network namespace", "pass --network host"}},
		{name: "serve without root and private network", asNobody: true, args: []string{"serve", "--root", "/", "--listen", "unix://" + filepath.Join(missing, "toolsvc.sock")},
			want: []string{"network namespace", "pass --network host"}},
		{name: "socket in a missing directory", args: []string{"serve", "--root", t.TempDir(), "--listen", "unix://" + filepath.Join(missing, "toolsvc.sock"), "--network", "host"},
			want: []string{"--listen: ", missing}},
		{name: "missing TLS files", args: []string{"serve", "--listen", "127.0.0.1:0", "--tls-cert", missing + ".crt", "--tls-key", missing + ".key"},
			want: []string{"--tls-cert/--tls-key", missing + ".crt"}},
		{name: "plaintext TCP", args: []string{"serve", "--listen", "127.0.0.1:0"}, want: []string{"--tls-cert", "--insecure"}},
		{name: "nothing listening at --addr", args: []string{"call", "--addr", "unix://" + filepath.Join(missing, "toolsvc.sock"), "--connect-timeout", "100ms"},
			want: []string{"--addr unix://" + missing, "--connect-timeout"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			uid := -1
			if (tc.asNobody || tc.rootOnly) && !root {
				t.Skip("needs root")
			}
			if tc.asNobody {
				uid = sandboxtest.NobodyUID
			}
			code, _, stderr := toolsvc(t, uid, echoHi, tc.args...)
			if code == 0 {
				t.Fatalf("exit 0, want a setup error\n%s", stderr)
			}
			for _, want := range tc.want {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			for _, name := range goNames {
				if strings.Contains(stderr, name) {
					t.Errorf("stderr names the Go identifier %q:\n%s", name, stderr)
				}
			}
		})
	}
}

// TestServeRootOwnedWorkspace: toolsvc serve as root gives each session a
// user of its own, who cannot work in a workspace root owns. A session that
// opens there is refused with the flags that fix it, and the fix it names
// first (--session-dirs) works.
func TestServeRootOwnedWorkspace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("session users need root")
	}
	dir := rootOwnedDir(t)
	addr, _ := startServe(t, dir)
	code, _, stderr := toolsvc(t, -1, echoHi, "call", "--insecure", "--addr", addr)
	if code == 0 {
		t.Fatal("a session of its own user opened in a workspace root owns")
	}
	for _, want := range []string{dir, "--session-dirs", "--session-uids off", "--run-as"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	for _, name := range goNames {
		if strings.Contains(stderr, name) {
			t.Errorf("stderr names the Go identifier %q:\n%s", name, stderr)
		}
	}

	addr, _ = startServe(t, dir, "--session-dirs")
	rs := runCall(t, `{"type":"tool_use","id":"w","name":"Bash","input":{"command":"echo hi > f && cat f"}}`, "--insecure", "--addr", addr)
	if len(rs) != 1 || rs[0].Content != "hi" {
		t.Fatalf("with --session-dirs: %+v", rs)
	}
}

// TestServeSessionUIDsRunOut: when every id of --session-uids is taken, a
// new session is refused naming the flag.
func TestServeSessionUIDsRunOut(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("session users need root")
	}
	// One id, in a block of its own for this process, far above accounts.
	id := 3_400_000 + (os.Getpid()%4096)*1024
	dir := rootOwnedDir(t)
	// The first session's Bash outlives its client (a broken stream keeps
	// the session): no grace for it when the server stops.
	// --max-sessions 0: no bound, so that a range of one id is not refused
	// at start as too small for the default --max-sessions.
	addr, _ := startServe(t, dir, "--session-dirs", "--session-uids", fmt.Sprintf("%d-%d", id, id), "--grace", "0s", "--max-sessions", "0")

	// The first session holds the id while its Bash runs.
	first := exec.Command(toolsvcBin, "call", "--insecure", "--addr", addr, "--session", "first")
	first.Stdin = strings.NewReader(`{"type":"tool_use","id":"hold","name":"Bash","input":{"command":"touch started && sleep 600"}}`)
	var firstErr bytes.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = first.Process.Kill()
			_ = first.Wait()
		}
	})
	started := filepath.Join(dir, "sessions", "first", "started")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first session's Bash did not start: %s", firstErr.String())
		}
	}

	code, _, stderr := toolsvc(t, -1, echoHi, "call", "--insecure", "--addr", addr)
	if code == 0 || !strings.Contains(stderr, "every id of "+strconv.Itoa(id)) || !strings.Contains(stderr, "--session-uids") {
		t.Errorf("second session: exit %d, stderr %s; want a refusal naming --session-uids", code, stderr)
	}
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	stopped = true
}
