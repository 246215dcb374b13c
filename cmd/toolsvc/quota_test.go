package main_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// testFS mounts a tmpfs of its own for the test, so that no quota test can
// fill the real disk whatever happens, and returns its path.
func testFS(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a file system needs root")
	}
	dir := sandboxtest.Dir(t)
	if err := syscall.Mount("toolwire-test", dir, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// sessionMounts counts the session temp file systems mounted under dir in
// this process's mount namespace.
func sessionMounts(dir string) int {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for i, x := range f {
			if x == "-" && i+2 < len(f) && f[i+2] == "toolwire-session-tmp" && strings.HasPrefix(f[4], dir+"/") {
				n++
			}
		}
	}
	return n
}

// TestServeDiskQuotas runs toolsvc serve as root with its root, temp and
// output directories on a file system the test makes, and floods each
// place a session can write: its temp directory (one big file, then many
// small ones), a foreground command's output and a background command's
// output. Each write past a quota fails in the command or stops, the
// result names the quota, and the test file system loses no more than the
// saved-output quotas once the sessions are over.
func TestServeDiskQuotas(t *testing.T) {
	fs := testFS(t, "512m")
	root, tmp, outputs := filepath.Join(fs, "root"), filepath.Join(fs, "tmp"), filepath.Join(fs, "outputs")
	for _, d := range []string{root, tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mountsBefore := sessionMounts(fs)
	freeBefore := sandboxtest.FreeBytes(t, fs)
	t.Setenv("TMPDIR", tmp)
	addr, _ := startServe(t, root, "--session-dirs", "--session-temp-quota", "16M", "--session-output-quota", "8M", "--output-dir", outputs)

	session := func(blocks ...string) []toolResult {
		t.Helper()
		var msg strings.Builder
		msg.WriteString(`{"id":"m","content":[`)
		for i, b := range blocks {
			if i > 0 {
				msg.WriteString(",")
			}
			msg.WriteString(b)
		}
		msg.WriteString("]}")
		rs := runCall(t, msg.String(), "--insecure", "--addr", addr)
		if len(rs) != len(blocks) {
			t.Fatalf("%d results for %d calls: %+v", len(rs), len(blocks), rs)
		}
		return rs
	}
	bash := func(id, command string, background bool) string {
		return fmt.Sprintf(`{"type":"tool_use","id":%q,"name":"Bash","input":{"command":%q,"run_in_background":%v}}`, id, command, background)
	}

	// The temp directory: one big file, many small ones (a session each:
	// a failed Bash call cancels the rest of its message).
	checkResult(t, session(bash("size", `df -k "$TMPDIR" | tail -1 | awk '{print $2}'`, false))[0], false, "16384")
	checkResult(t, session(bash("filler", `dd if=/dev/zero of="$TMPDIR/fill" bs=1M count=64 2>&1 | head -1; exit ${PIPESTATUS[0]}`, false))[0],
		true, "No space left on device", "is full: its disk quota is 16 MiB")
	checkResult(t, session(bash("files", `cd "$TMPDIR" && for i in $(seq 5000); do echo x > f$i || exit 1; done`, false))[0],
		true, "No space left on device", "is out of files (inodes): its disk quota is 16 MiB")

	// A foreground command's output beyond the saved-output quota.
	rs := session(bash("flood", `head -c 40M /dev/zero | tr '\0' 'a' | fold -w 100`, false))
	checkResult(t, rs[0], false, "The full output could not be saved (the session's saved-output quota (8 MiB) was reached)")

	// A background command's output: it stops at the quota, and the command
	// with it.
	rs = session(
		bash("bg", `yes flood`, true),
		bash("wait", `for i in $(seq 100); do pgrep -x yes >/dev/null && break; sleep 0.05; done; while pgrep -x yes >/dev/null; do sleep 0.05; done; echo gone`, false),
	)
	checkResult(t, rs[1], false, "gone")
	files, _ := filepath.Glob(filepath.Join(outputs, "*", "*.output"))
	if len(files) != 1 {
		t.Fatalf("background output files: %v, want one", files)
	}
	out, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out); n < 7<<20 || n > 8<<20+4096 {
		t.Errorf("background output file has %d bytes, want it stopped at the 8 MiB quota", n)
	}
	want := "[toolwire] Output stopped: the session's saved-output quota (8 MiB) was reached; the command was killed.\n"
	if !bytes.HasSuffix(out, []byte(want)) {
		t.Errorf("background output ends with %q, want %q", out[max(0, len(out)-200):], want)
	}

	// Every session is over: their temp file systems are gone, and what is
	// left on the test's file system is the saved outputs, within quota.
	if n := sessionMounts(fs); n != mountsBefore {
		t.Errorf("%d session temp file systems mounted after the sessions, want %d", n, mountsBefore)
	}
	if lost := freeBefore - sandboxtest.FreeBytes(t, fs); lost > 3*8<<20+1<<20 {
		t.Errorf("the file system lost %d bytes, more than the sessions' saved-output quotas", lost)
	}
}

// TestServeWorkspaceQuota runs toolsvc serve as root with --root on a
// btrfs file system with quotas that the test makes, and fills a session's
// workspace with one big file, many small ones and a Write: each stops at
// the quota with a result that names it, a subvolume (which the quota
// would not cover) cannot be made, the Hello says the workspace has a
// quota, a session opened again under the same id finds its files and its
// quota, and the file system loses no more than the quota.
func TestServeWorkspaceQuota(t *testing.T) {
	fs := sandboxtest.Btrfs(t, 512<<20, true)
	root := filepath.Join(fs, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	freeBefore := sandboxtest.FreeBytes(t, fs)
	addr, _ := startServe(t, root, "--session-dirs", "--session-workspace-quota", "16M")

	call := func(session string, blocks ...string) []toolResult {
		t.Helper()
		msg := `{"id":"m","content":[` + strings.Join(blocks, ",") + "]}"
		rs := runCall(t, msg, "--insecure", "--addr", addr, "--session", session, "--require-sandbox", "workspace_quota")
		if len(rs) != len(blocks) {
			t.Fatalf("%d results for %d calls: %+v", len(rs), len(blocks), rs)
		}
		return rs
	}
	bash := func(id, command string) string {
		return fmt.Sprintf(`{"type":"tool_use","id":%q,"name":"Bash","input":{"command":%q}}`, id, command)
	}
	full := "is full: its disk quota is 16 MiB"

	checkResult(t, call("big", bash("filler", `dd if=/dev/zero of=fill bs=1M count=64 2>&1 | tail -1; exit ${PIPESTATUS[0]}`))[0],
		true, "Disk quota exceeded", full)
	checkResult(t, call("small", bash("files", `for i in $(seq 20000); do head -c 3000 /dev/zero > f$i || exit 1; done`))[0],
		true, "Disk quota exceeded", full)
	checkResult(t, call("write", bash("prefill", `head -c 15M /dev/zero > fill`),
		fmt.Sprintf(`{"type":"tool_use","id":"write","name":"Write","input":{"file_path":"more.txt","content":%q}}`, strings.Repeat("w", 4<<20)))[1],
		true, "disk quota exceeded: the session's workspace quota (16 MiB) was reached")
	checkResult(t, call("subvolume", bash("sub", `btrfs subvolume create sub`))[0], true, "Operation not permitted")
	// A command that goes on after a write failed at the quota.
	checkResult(t, call("later", bash("fill", `head -c 32M /dev/zero > fill; ls fill`))[0], false, "Disk quota exceeded", full)

	// The same session id again: its workspace, its files and its quota.
	checkResult(t, call("big", bash("again", `ls -l fill | awk '{print $5}'; rm fill && head -c 8M /dev/zero > a && head -c 12M /dev/zero > b`))[0],
		true, "Disk quota exceeded", full)

	// Every workspace holds at most its quota.
	if lost := freeBefore - sandboxtest.FreeBytes(t, fs); lost > 6*16<<20+8<<20 {
		t.Errorf("the file system lost %d bytes, more than six workspace quotas of 16 MiB", lost)
	}
}

// TestWorkspaceQuotaFlagMustHold checks that toolsvc serve refuses to start
// when --session-workspace-quota is given and --root cannot have quotas,
// saying why and what fixes it, while the default quota does not stop it.
func TestWorkspaceQuotaFlagMustHold(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the quota needs root")
	}
	root := testFS(t, "16m")
	cmd := exec.Command(toolsvcBin, "serve", "--listen", "127.0.0.1:0", "--insecure", "--root", root, "--session-workspace-quota", "1G")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("toolsvc started with a workspace quota it cannot enforce:\n%s", out)
	}
	for _, want := range []string{"a workspace quota of 1 GiB cannot be enforced under " + root, "is not on btrfs", "--session-workspace-quota 0"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("toolsvc said:\n%s\nwant it to say %q", out, want)
		}
	}
	_, _ = startServe(t, root, "--session-dirs")
}

// checkResult checks a tool_result's is_error and that its text says each
// of wants.
func checkResult(t *testing.T, r toolResult, isError bool, wants ...string) {
	t.Helper()
	text, _ := r.Content.(string)
	if (r.IsError != nil && *r.IsError) != isError {
		t.Errorf("%s: is_error %v, want %v; content %q", r.ToolUseID, deref(r.IsError), isError, text)
	}
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s: content %q, want it to say %q", r.ToolUseID, text, w)
		}
	}
}
