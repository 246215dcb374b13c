package readme_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/testkit"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/test/readme"
)

// nobody is the ordinary user the test runs the commands as when it runs
// as root.
const nobody = 65534

// python is the interpreter the Python example's README names.
const python = "/usr/bin/python3"

// who is one of the two users the commands run as.
type who struct {
	name string
	role string // the README's marker: "root" or "user"
	uid  int    // -1: the test's own user
}

// TestReadme runs the README's commands as written, in a clean clone, as
// root and as an ordinary user (see the package documentation).
func TestReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries in a clean clone, once as each user")
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	users := []who{{name: "as an ordinary user", role: "user", uid: -1}}
	if os.Geteuid() == 0 {
		users = []who{{name: "as root", role: "root", uid: -1}, {name: "as an ordinary user", role: "user", uid: nobody}}
	} else {
		t.Log("not root: the commands run as this user only")
	}
	for _, u := range users {
		t.Run(u.name, func(t *testing.T) {
			e := newEnv(t, repo, u)
			t.Run("quickstart", e.quickstart)
			t.Run("using the executor directly", e.executorSection)
			t.Run("python example", e.python)
		})
	}
}

// env is one user's clean clone and environment.
type env struct {
	who
	clone string
	vars  []string
}

// newEnv clones repo for u into a new directory that others may pass
// through (toolsvc serve as root gives sessions users of their own), and
// makes u's environment.
func newEnv(t *testing.T, repo string, u who) *env {
	base := t.TempDir()
	for _, p := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{who: u, clone: filepath.Join(base, "toolwire")}
	cleanClone(t, repo, e.clone)
	tmp := filepath.Join(base, "tmp") // $TMPDIR, where the README's mktemp goes
	mkdirs(t, 0o755, tmp)
	if u.uid < 0 {
		// The user's own environment, as they would type the commands;
		// transcripts go to a state directory of the test's.
		state := filepath.Join(base, "state")
		mkdirs(t, 0o700, state)
		e.vars = append(os.Environ(), "TMPDIR="+tmp, "XDG_STATE_HOME="+state, "PYTHONDONTWRITEBYTECODE=1")
		return e
	}
	// A user of their own: a home, a Go build cache and a module cache,
	// with the modules the commands build copied from this user's cache,
	// and no network for Go.
	home, gocache, gomodcache := filepath.Join(base, "home"), filepath.Join(base, "gocache"), filepath.Join(base, "gomodcache")
	mkdirs(t, 0o755, home, gocache)
	testkit.GoTelemetryOff(t, home)
	copyModules(t, e.clone, gomodcache)
	for _, dir := range []string{e.clone, tmp, home, gocache, gomodcache} {
		chownTree(t, dir, u.uid)
	}
	goroot := strings.TrimSpace(goEnv(t, "GOROOT"))
	e.vars = []string{
		"PATH=" + filepath.Join(goroot, "bin") + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + home, "USER=nobody", "LOGNAME=nobody", "TMPDIR=" + tmp, "LANG=C.UTF-8",
		"GOCACHE=" + gocache, "GOMODCACHE=" + gomodcache, "GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local",
		"GOFLAGS=-buildvcs=false", "PYTHONDONTWRITEBYTECODE=1",
	}
	return e
}

// quickstart runs the Quickstart's first command, scripts/run -p, against a
// fake Messages API whose model lists the commands with Bash and answers.
func (e *env) quickstart(t *testing.T) {
	blocks := e.blocks(t, "README.md", "Quickstart")
	script := readme.Script(blocks, e.role)
	if !strings.Contains(script, "scripts/run -p") {
		t.Fatalf("the Quickstart's first command is no longer scripts/run -p; teach this test what to expect:\n%s", script)
	}
	t.Log("scripts/test, the Quickstart's second command, is not run: it would run this test again")
	const answer = "The repository has two commands, orchestrator and toolsvc."
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_readme_ls", "Bash", map[string]any{"command": "ls cmd"})),
		fakeapi.EndTurn(fakeapi.Text(answer)),
	)
	stdout, _ := e.run(t, script, "ANTHROPIC_API_KEY=readme-test-key", "ANTHROPIC_BASE_URL="+fake.URL)
	if !strings.Contains(stdout, answer) {
		t.Errorf("stdout lacks the model's answer %q:\n%s", answer, stdout)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2 (the prompt, then the Bash result)", len(reqs))
	}
	result, isError := toolResult(t, reqs[1].Raw, "toolu_readme_ls")
	if isError || !strings.Contains(result, "orchestrator") || !strings.Contains(result, "toolsvc") {
		t.Errorf("the Bash result the model got: %q (is_error %v), want the commands listed", result, isError)
	}
}

// executorSection runs every command of "Using the executor directly"
// and checks that each toolsvc call printed one successful result.
func (e *env) executorSection(t *testing.T) {
	blocks := e.blocks(t, "README.md", "Using the executor directly")
	script := readme.Script(blocks, e.role)
	stdout, _ := e.run(t, script)
	calls := strings.Count(script, "toolsvc call")
	type result struct {
		Type      string          `json:"type"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   *bool           `json:"is_error"`
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	var arrays [][]result
	for dec.More() {
		var a []result
		if err := dec.Decode(&a); err != nil {
			t.Fatalf("stdout is not the JSON arrays toolsvc call prints: %v\n%s", err, stdout)
		}
		arrays = append(arrays, a)
	}
	if calls == 0 || len(arrays) != calls {
		t.Fatalf("%d toolsvc call commands printed %d result arrays:\n%s", calls, len(arrays), stdout)
	}
	for _, a := range arrays {
		for _, r := range a {
			if r.Type != "tool_result" || r.IsError == nil || *r.IsError {
				t.Errorf("result %s: type %q, is_error %v, content %s", r.ToolUseID, r.Type, r.IsError, r.Content)
			}
		}
	}
	if first := arrays[0]; len(first) != 1 || string(first[0].Content) != `"hi"` {
		t.Errorf("the first call's results: %+v, want one with content hi", first)
	}
}

// python runs "Run it" of examples/python/README.md.
func (e *env) python(t *testing.T) {
	if out, err := exec.Command(python, "-c", "import grpc, google.protobuf").CombinedOutput(); err != nil {
		msg := fmt.Sprintf("%s cannot import grpc and protobuf (apt-get install python3-grpcio python3-protobuf): %v\n%s", python, err, out)
		if os.Getenv("TOOLWIRE_REQUIRE_PYTHON") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	blocks := e.blocks(t, filepath.Join("examples", "python", "README.md"), "Run it")
	stdout, _ := e.run(t, readme.Script(blocks, e.role))
	if !strings.HasPrefix(stdout, "tools: ") || !strings.Contains(stdout, `"tool_use_id": "toolu_py_04_bash", "content": "hi"`) {
		t.Errorf("the example's output lacks its tools or Bash's hi:\n%s", stdout)
	}
}

// blocks returns the sh blocks of a section of a Markdown file of the clone.
func (e *env) blocks(t *testing.T, file, heading string) []readme.Block {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(e.clone, file))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := readme.Blocks(md, heading)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return blocks
}

// run runs script with bash -euo pipefail in the clone, as e's user, and
// returns its output; it fails the test when the script fails. Processes
// the script leaves (a server it did not stop) are given 30 seconds to end,
// then killed and reported.
func (e *env) run(t *testing.T, script string, vars ...string) (string, string) {
	t.Helper()
	t.Logf("running %s:\n%s", e.name, script)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/bash", "-c", "set -euo pipefail\n"+script)
	cmd.Dir = e.clone
	cmd.Env = append(append([]string(nil), e.vars...), vars...)
	var stdout, stderr testkit.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if e.uid >= 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(e.uid), Gid: uint32(e.uid)}
	}
	// The script's group: bash and whatever it started in the background.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 30 * time.Second
	err := cmd.Run()
	if pgid := cmd.Process.Pid; !groupEnds(pgid, 30*time.Second) {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		t.Errorf("the script left processes running (its group %d); killed them", pgid)
	}
	if err != nil {
		t.Fatalf("script failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", testkit.Tail(stdout.String(), 4000), testkit.Tail(stderr.String(), 4000))
	return stdout.String(), stderr.String()
}

// groupEnds waits up to timeout for process group pgid to have no process.
func groupEnds(pgid int, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// toolResult returns the text and is_error of the tool_result for id in a
// Messages API request body.
func toolResult(t *testing.T, raw []byte, id string) (string, bool) {
	t.Helper()
	var body struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	for _, m := range body.Messages {
		var blocks []struct {
			Type      string          `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			IsError   bool            `json:"is_error"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type != "tool_result" || b.ToolUseID != id {
				continue
			}
			var text string
			if json.Unmarshal(b.Content, &text) != nil {
				var parts []struct {
					Text string `json:"text"`
				}
				_ = json.Unmarshal(b.Content, &parts)
				for _, p := range parts {
					text += p.Text
				}
			}
			return text, b.IsError
		}
	}
	t.Fatalf("no tool_result for %s in the request", id)
	return "", false
}

// cleanClone makes a clean clone of repo at dst: a shallow git clone of
// its HEAD, with the working tree's uncommitted changes to tracked files
// applied (so that the test runs what is being changed; files git does not
// track are left out, as a clone leaves them out), or a copy when repo is
// not a git checkout.
func cleanClone(t *testing.T, repo, dst string) {
	t.Helper()
	if err := exec.Command("git", "-C", repo, "rev-parse", "--is-inside-work-tree").Run(); err != nil {
		t.Logf("%s is not a git checkout: copying it", repo)
		copyTree(t, repo, dst)
		return
	}
	gitRun(t, "", "clone", "--quiet", "--depth", "1", "file://"+repo, dst)
	diff := gitRun(t, repo, "diff", "HEAD", "--binary")
	if len(diff) == 0 {
		return
	}
	t.Logf("applying the working tree's uncommitted changes to the clone (%d bytes of diff)", len(diff))
	cmd := exec.Command("git", "-C", dst, "apply", "--binary", "-")
	cmd.Stdin = bytes.NewReader(diff)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s", err, out)
	}
}

func gitRun(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	if dir != "" {
		args = append([]string{"-C", dir}, args...)
	}
	cmd := exec.Command("git", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// copyTree copies the regular files, directories and symlinks of src to
// dst, leaving out built binaries (bin/).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir() && rel == "bin":
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
}

// copyModules fills gomodcache with the modules the clone's commands need,
// from this user's module cache (no network), by listing their packages.
func copyModules(t *testing.T, clone, gomodcache string) {
	t.Helper()
	own := strings.TrimSpace(goEnv(t, "GOMODCACHE"))
	cmd := exec.Command("go", "list", "-deps", "./cmd/...")
	cmd.Dir = clone
	cmd.Env = append(os.Environ(), "GOMODCACHE="+gomodcache, "GOPROXY=file://"+filepath.Join(own, "cache", "download"),
		"GOSUMDB=off", "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("copy the modules from %s: %v\n%s", own, err, testkit.Tail(string(out), 20))
	}
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return string(out)
}

func mkdirs(t *testing.T, mode os.FileMode, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.Mkdir(d, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
}

// chownTree gives dir and everything in it to uid (and the group of the
// same number). Module cache directories are read-only; the owner may
// still change.
func chownTree(t *testing.T, dir string, uid int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, uid)
	})
	if err != nil {
		t.Fatalf("chown %s: %v", dir, err)
	}
}
