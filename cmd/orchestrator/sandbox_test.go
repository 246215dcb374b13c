package main_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
)

// devHome makes a fake home directory: a program in ~/.local/bin, an ssh
// key and a plain file.
func devHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	for name, content := range map[string]string{
		".local/bin/hello-from-home": "#!/bin/sh\necho hello from a program in home\n",
		".ssh/id_x":                  "PRIVATE KEY\n",
		"notes.txt":                  "notes\n",
	} {
		writeFile(t, filepath.Join(home, name), content, 0o755)
	}
	return home
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// runAs runs `orchestrator -p` as a user whose HOME is home, with
// ~/.local/bin first on PATH, the way a shell would set them up.
func runAs(t *testing.T, fake *fakeapi.Server, home string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(orchestratorBin, args...)
	cmd.Env = append([]string{
		"PATH=" + filepath.Join(home, ".local/bin") + ":" + os.Getenv("PATH"),
		"HOME=" + home,
		"ANTHROPIC_API_KEY=test-key",
		"ANTHROPIC_BASE_URL=" + fake.URL,
	}, env...)
	if root := os.Getenv("PYENV_ROOT"); root != "" {
		cmd.Env = append(cmd.Env, "PYENV_ROOT="+root) // pyenv's shims find their versions
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if errs := fake.Errors(); len(errs) > 0 {
		t.Fatalf("fake API errors: %v\nstderr: %s", errs, r.stderr)
	}
	return r
}

// toolResults returns the tool_result blocks the model was sent, by id.
func toolResults(fake *fakeapi.Server) map[string]model.Block {
	out := map[string]model.Block{}
	reqs := fake.Requests()
	if len(reqs) == 0 {
		return out
	}
	for _, m := range reqs[len(reqs)-1].Body.Messages {
		for _, b := range m.Content {
			if b.Type == model.BlockToolResult {
				out[b.ToolUseID] = b
			}
		}
	}
	return out
}

func resultText(b model.Block) string {
	var s []string
	for _, c := range b.Content {
		s = append(s, c.Text)
	}
	return strings.Join(s, "")
}

// turns scripts one tool call per model turn, so that a failing Bash call
// does not cancel the others, then the end of the turn.
func turns(uses ...fakeapi.Block) []fakeapi.Reply {
	var out []fakeapi.Reply
	for _, u := range uses {
		out = append(out, fakeapi.ToolTurn(u))
	}
	return append(out, fakeapi.EndTurn(fakeapi.Text("Done.")))
}

type wantResult struct {
	contains string
	isError  bool
}

func checkResults(t *testing.T, fake *fakeapi.Server, r result, want map[string]wantResult) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	got := toolResults(fake)
	for id, w := range want {
		b, ok := got[id]
		text := resultText(b)
		if !ok || !strings.Contains(text, w.contains) || (b.IsError != nil && *b.IsError) != w.isError {
			t.Errorf("%s: %q (is_error %v), want %q (is_error %v)", id, text, b.IsError != nil && *b.IsError, w.contains, w.isError)
		}
	}
}

// TestHeadlessDevelopmentSandbox: the in-process executor of -p runs
// programs installed under HOME, keeps keys out of Bash and Read, and
// lets nothing be written outside the workspace and the caches.
func TestHeadlessDevelopmentSandbox(t *testing.T) {
	home, ws := devHome(t), t.TempDir()
	fake := fakeapi.New(t, turns(
		fakeapi.ToolUse("run-home-program", "Bash", map[string]any{"command": "hello-from-home && echo HOME=$HOME"}),
		fakeapi.ToolUse("cat-key", "Bash", map[string]any{"command": "cat ~/.ssh/id_x"}),
		fakeapi.ToolUse("read-key", "Read", map[string]any{"file_path": "~/.ssh/id_x"}),
		fakeapi.ToolUse("read-notes", "Read", map[string]any{"file_path": filepath.Join(home, "notes.txt")}),
		fakeapi.ToolUse("write-home", "Bash", map[string]any{"command": "touch ~/new-file"}),
		fakeapi.ToolUse("write-etc", "Bash", map[string]any{"command": "touch /etc/toolwire-probe"}),
		fakeapi.ToolUse("write-workspace", "Bash", map[string]any{"command": "echo made > made.txt && cat made.txt"}),
		fakeapi.ToolUse("api-key", "Bash", map[string]any{"command": `echo "${ANTHROPIC_API_KEY:-not in the environment}"; cat /proc/$PPID/environ`}),
	)...)
	r := runAs(t, fake, home, nil, "-p", "try the sandbox", "--root", ws, "--sessions-dir", t.TempDir(), "--permission-mode", "bypassPermissions")
	checkResults(t, fake, r, map[string]wantResult{
		"run-home-program": {"hello from a program in home\nHOME=" + home, false},
		"cat-key":          {"Exit code 1\ncat: " + home + "/.ssh/id_x: Permission denied", true},
		"read-key":         {`matches the protected-file pattern "**/.ssh/**"`, true},
		"read-notes":       {"1\tnotes", false},
		"write-home":       {"Permission denied", true},
		"write-etc":        {"Permission denied", true},
		"write-workspace":  {"made", false},
		"api-key":          {"not in the environment\ncat: /proc/", true},
	})
	if s := resultText(toolResults(fake)["api-key"]); !strings.HasSuffix(s, "/environ: Permission denied") || strings.Contains(s, "test-key") {
		t.Errorf("the orchestrator's environment: %q", s)
	}
	for _, p := range []string{filepath.Join(home, "new-file"), "/etc/toolwire-probe"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
}

// TestHeadlessNetwork: -p gives Bash the machine's network by default, and
// none with --network none, where a failed connection gets a note saying
// why and how to allow it. No packet leaves the machine: the failed
// connection has no route to take.
func TestHeadlessNetwork(t *testing.T) {
	hostIfaces, err := os.ReadFile("/proc/net/dev")
	if err != nil {
		t.Fatal(err)
	}
	listIfaces := "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\\n' ' '"
	home := devHome(t)

	fake := fakeapi.New(t, turns(fakeapi.ToolUse("ifaces", "Bash", map[string]any{"command": listIfaces}))...)
	r := runAs(t, fake, home, nil, "-p", "network?", "--root", t.TempDir(), "--sessions-dir", t.TempDir(), "--permission-mode", "bypassPermissions")
	if strings.Count(string(hostIfaces), ":") > 1 {
		checkResults(t, fake, r, map[string]wantResult{"ifaces": {"", false}})
		if got := resultText(toolResults(fake)["ifaces"]); strings.TrimSpace(got) == "lo" {
			t.Errorf("-p by default: interfaces %q, want the machine's", got)
		}
	}

	fake = fakeapi.New(t, turns(
		fakeapi.ToolUse("ifaces", "Bash", map[string]any{"command": listIfaces}),
		fakeapi.ToolUse("connect", "Bash", map[string]any{"command": "exec 3<>/dev/tcp/192.0.2.1/9"}),
	)...)
	r = runAs(t, fake, home, nil, "-p", "network?", "--network", "none", "--root", t.TempDir(), "--sessions-dir", t.TempDir(), "--permission-mode", "bypassPermissions")
	checkResults(t, fake, r, map[string]wantResult{
		"ifaces":  {"lo ", false},
		"connect": {"Exit code 1\n/bin/bash: connect: Network is unreachable", true},
	})
	got := toolResults(fake)
	if s := resultText(got["ifaces"]); s != "lo " {
		t.Errorf("--network none: interfaces %q, want loopback only", s)
	}
	if s := resultText(got["connect"]); !strings.HasSuffix(s, "\nNote: this command ran in a sandbox without network access (loopback only), which is likely why it failed. The user can allow network access with --network host.") {
		t.Errorf("--network none: failed connection without the note: %q", s)
	}
}

// TestHeadlessSandboxPathFlags: --add-dir opens a directory to Read, Write
// and Bash (and counts as the workspace for the permission mode),
// --sandbox-write to Bash alone; --sandbox-read starts whatever system
// directories this distribution lacks; a missing directory is a usage
// error naming the flag.
func TestHeadlessSandboxPathFlags(t *testing.T) {
	home, added, bashOnly, readable := devHome(t), t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(added, "a.txt"), "added\n", 0o644)
	fake := fakeapi.New(t, turns(
		fakeapi.ToolUse("read-added", "Read", map[string]any{"file_path": filepath.Join(added, "a.txt")}),
		fakeapi.ToolUse("write-added", "Write", map[string]any{"file_path": filepath.Join(added, "w.txt"), "content": "by Write\n"}),
		fakeapi.ToolUse("bash-added", "Bash", map[string]any{"command": "cat " + added + "/w.txt && echo by-bash > " + added + "/b.txt && echo by-bash > " + bashOnly + "/b.txt && echo wrote"}),
		fakeapi.ToolUse("write-bash-only", "Write", map[string]any{"file_path": filepath.Join(bashOnly, "w.txt"), "content": "no\n"}),
		fakeapi.ToolUse("bash-outside", "Bash", map[string]any{"command": "echo x > " + readable + "/x"}),
	)...)
	r := runAs(t, fake, home, nil, "-p", "use the directories", "--root", t.TempDir(), "--sessions-dir", t.TempDir(),
		"--add-dir", added, "--sandbox-write", bashOnly, "--sandbox-read", readable,
		"--permission-mode", "acceptEdits", "--allowedTools", "Bash")
	checkResults(t, fake, r, map[string]wantResult{
		"read-added":      {"1\tadded", false},
		"write-added":     {"File created successfully", false},
		"bash-added":      {"by Write\nwrote", false},
		"write-bash-only": {"", true},
		"bash-outside":    {"Permission denied", true},
	})
	for _, p := range []string{added + "/b.txt", bashOnly + "/b.txt"} {
		if b, err := os.ReadFile(p); err != nil || string(b) != "by-bash\n" {
			t.Errorf("%s: %q %v", p, b, err)
		}
	}

	missing := filepath.Join(t.TempDir(), "missing")
	for _, flag := range []string{"--add-dir", "--sandbox-read", "--sandbox-write"} {
		r := runAs(t, fake, home, nil, "-p", "x", flag, missing)
		if want := fmt.Sprintf("invalid value %q for flag -%s: no directory %s", missing, strings.TrimLeft(flag, "-"), missing); r.code != 2 || !strings.Contains(r.stderr, want) {
			t.Errorf("%s MISSING: exit %d, stderr %q; want 2 and %q", flag, r.code, r.stderr, want)
		}
	}
}

// TestHeadlessBuildsGoAndPython is the "must show": -p with the
// in-process executor builds and tests a small Go module and a small
// Python project with the user's real caches. The Go build cache is the
// one under the (fake) HOME, as go env GOCACHE resolves it: it is written,
// and a second session finds it warm. Nothing needs the network.
func TestHeadlessBuildsGoAndPython(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	home, ws := devHome(t), t.TempDir()
	writeFile(t, filepath.Join(ws, "go.mod"), "module example.com/hello\n\ngo 1.22\n", 0o644)
	writeFile(t, filepath.Join(ws, "hello.go"), "package hello\n\n// Greet greets.\nfunc Greet(name string) string { return \"hello, \" + name }\n", 0o644)
	writeFile(t, filepath.Join(ws, "hello_test.go"), "package hello\n\nimport \"testing\"\n\nfunc TestGreet(t *testing.T) {\n\tif got := Greet(\"go\"); got != \"hello, go\" {\n\t\tt.Fatal(got)\n\t}\n}\n", 0o644)
	writeFile(t, filepath.Join(ws, "py/calc.py"), "def add(a, b):\n    return a + b\n", 0o644)
	writeFile(t, filepath.Join(ws, "py/test_calc.py"), "import unittest\n\nimport calc\n\n\nclass TestAdd(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n\n\nif __name__ == '__main__':\n    unittest.main()\n", 0o644)
	// Go may not reach a module proxy or download a toolchain.
	env := []string{"GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod"}
	const long = 600000 // a cold build cache on a loaded machine
	fake := fakeapi.New(t, turns(
		fakeapi.ToolUse("go", "Bash", map[string]any{"command": "go env GOCACHE && go build ./... && go test ./...", "timeout": long}),
		fakeapi.ToolUse("python", "Bash", map[string]any{"command": "cd py && python3 -m unittest -v", "timeout": long}),
	)...)
	r := runAs(t, fake, home, env, "-p", "build and test", "--root", ws, "--sessions-dir", t.TempDir(), "--permission-mode", "bypassPermissions")
	cache := filepath.Join(home, ".cache", "go-build")
	checkResults(t, fake, r, map[string]wantResult{
		"go":     {cache + "\nok  \texample.com/hello", false},
		"python": {"test_add (test_calc.TestAdd", false},
	})
	if s := resultText(toolResults(fake)["python"]); !strings.Contains(s, "Ran 1 test") || !strings.HasSuffix(s, "OK") {
		t.Errorf("python3 (%s) -m unittest: %q", python, s)
	}
	entries, err := os.ReadDir(cache)
	if err != nil || len(entries) < 16 {
		t.Fatalf("Go build cache %s: %d entries, %v; want it filled", cache, len(entries), err)
	}
	if _, err := os.Stat(filepath.Join(ws, "py", "__pycache__")); err != nil {
		t.Errorf("python wrote no bytecode into the workspace: %v", err)
	}

	// A new session finds the cache warm.
	fake = fakeapi.New(t, turns(fakeapi.ToolUse("go", "Bash", map[string]any{"command": "go test ./...", "timeout": long}))...)
	r = runAs(t, fake, home, env, "-p", "test again", "--root", ws, "--sessions-dir", t.TempDir(), "--permission-mode", "bypassPermissions")
	checkResults(t, fake, r, map[string]wantResult{"go": {"ok  \texample.com/hello\t(cached)", false}})
}

// TestHeadlessSandboxSettings: the settings file's sandbox.filesystem lists
// reach the in-process executor: allowWrite opens a directory to Bash,
// denyRead keeps Bash and Read out, allowRead takes a default entry out of
// the deny list.
func TestHeadlessSandboxSettings(t *testing.T) {
	home := devHome(t)
	writeFile(t, filepath.Join(home, ".cache/my-tool/.keep"), "", 0o644)
	writeFile(t, filepath.Join(home, "private/secret.txt"), "secret\n", 0o644)
	writeFile(t, filepath.Join(home, ".npmrc"), "registry=http://127.0.0.1:1/\n", 0o644)
	settingsFile := filepath.Join(t.TempDir(), "settings.json")
	writeFile(t, settingsFile, `{"sandbox": {"filesystem": {
		"allowWrite": ["~/.cache/my-tool"],
		"denyRead": ["~/private/**"],
		"allowRead": ["~/.npmrc"]
	}}}`, 0o644)
	fake := fakeapi.New(t, turns(
		fakeapi.ToolUse("allow-write", "Bash", map[string]any{"command": "echo x > ~/.cache/my-tool/out && echo wrote"}),
		fakeapi.ToolUse("deny-read-bash", "Bash", map[string]any{"command": "cat ~/private/secret.txt"}),
		fakeapi.ToolUse("deny-read-tool", "Read", map[string]any{"file_path": "~/private/secret.txt"}),
		fakeapi.ToolUse("allow-read", "Bash", map[string]any{"command": "cat ~/.npmrc"}),
	)...)
	r := runAs(t, fake, home, nil, "-p", "settings", "--settings", settingsFile, "--root", t.TempDir(), "--sessions-dir", t.TempDir(), "--permission-mode", "bypassPermissions")
	checkResults(t, fake, r, map[string]wantResult{
		"allow-write":    {"wrote", false},
		"deny-read-bash": {"Permission denied", true},
		"deny-read-tool": {"protected-file pattern", true},
		"allow-read":     {"registry=", false},
	})
}
