package main_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// sharedDir is a directory every session user may write, holding files.
func sharedDir(t *testing.T, files ...string) string {
	t.Helper()
	d := sandboxtest.Dir(t)
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(d, f), []byte("content of "+f+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func toolUse(id, name string, input map[string]any) string {
	b, _ := json.Marshal(map[string]any{"type": "tool_use", "id": id, "name": name, "input": input})
	return string(b) + "\n"
}

func bashUse(id, command string) string {
	return toolUse(id, "Bash", map[string]any{"command": command})
}

// TestSandboxPathFlags: --sandbox-read and --sandbox-write open directories
// to processes, --add-dir to processes and file tools; each only that.
func TestSandboxPathFlags(t *testing.T) {
	read, write, add := sharedDir(t, "r.txt"), sharedDir(t), sharedDir(t, "a.txt")
	root := sandboxtest.Dir(t)

	// Without the flags, none of them is reachable.
	rs := runCall(t, bashUse("b", "cat "+read+"/r.txt"), "--embedded", "--profile", "service", "--root", root)
	if c, _ := rs[0].Content.(string); !strings.Contains(c, "Permission denied") {
		t.Fatalf("without --sandbox-read: %q", c)
	}

	in := bashUse("cat-read", "cat "+read+"/r.txt") +
		bashUse("write-read", "echo x > "+read+"/x; true") + // a failed Bash call would cancel its siblings
		bashUse("write-write", "echo w > "+write+"/w.txt && cat "+write+"/w.txt") +
		bashUse("bash-add", "cat "+add+"/a.txt && echo b > "+add+"/b.txt && echo wrote") +
		toolUse("read-add", "Read", map[string]any{"file_path": add + "/a.txt"}) +
		toolUse("write-add", "Write", map[string]any{"file_path": add + "/c.txt", "content": "c\n"}) +
		toolUse("read-read", "Read", map[string]any{"file_path": read + "/r.txt"}) +
		toolUse("write-write-tool", "Write", map[string]any{"file_path": write + "/tool.txt", "content": "t\n"})
	rs = runCall(t, in, "--embedded", "--profile", "service", "--root", root, "--sandbox-read", read, "--sandbox-write", write, "--add-dir", add)
	want := map[string]struct {
		content string
		isError bool
	}{
		"cat-read":         {"content of r.txt", false},
		"write-read":       {"Permission denied", false},
		"write-write":      {"w", false},
		"bash-add":         {"content of a.txt\nwrote", false},
		"read-add":         {"1\tcontent of a.txt", false},
		"write-add":        {"File created successfully", false},
		"read-read":        {"outside the directories this session may use", true},
		"write-write-tool": {"outside the directories this session may use", true},
	}
	for _, r := range rs {
		w := want[r.ToolUseID]
		c, _ := r.Content.(string)
		if !strings.Contains(c, w.content) || (r.IsError != nil && *r.IsError) != w.isError {
			t.Errorf("%s: %q (is_error %v), want %q (is_error %v)", r.ToolUseID, c, deref(r.IsError), w.content, w.isError)
		}
	}
	if len(rs) != len(want) {
		t.Errorf("%d results, want %d", len(rs), len(want))
	}
}

// TestMissingSandboxDirIsUsageError: a directory given to a path flag that
// does not exist stops toolsvc with exit 2 and a message naming the flag.
func TestMissingSandboxDirIsUsageError(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, flag := range []string{"--sandbox-read", "--sandbox-write", "--add-dir", "--ro", "--rw"} {
		for _, sub := range [][]string{{"call", "--embedded"}, {"serve", "--listen", "127.0.0.1:0"}} {
			cmd := exec.Command(toolsvcBin, append(sub, "--root", t.TempDir(), flag, missing)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cmd.Stdin = strings.NewReader("")
			err := cmd.Run()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), `invalid value "`+missing+`" for flag -`+strings.TrimLeft(flag, "-")+`: no directory `+missing) {
				t.Errorf("toolsvc %s %s MISSING: %v\n%s", sub[0], flag, err, stderr.String())
			}
		}
	}
}

// TestServeSandboxRead: serve with --sandbox-read starts on this machine,
// whatever system directories it lacks, and its processes read the
// directory.
func TestServeSandboxRead(t *testing.T) {
	read := sharedDir(t, "r.txt")
	addr, _ := startServe(t, sandboxtest.Dir(t), "--sandbox-read", read)
	rs := runCall(t, bashUse("b", "cat "+read+"/r.txt"), "--insecure", "--addr", addr)
	if len(rs) != 1 || rs[0].Content != "content of r.txt" {
		t.Fatalf("results %+v", rs)
	}
}
