package main_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// runAs runs the orchestrator binary in dir as user uid (or as the test's
// user when uid is negative) with the fake API's address. A run that does
// not end within two minutes (a server that should have refused to start)
// is killed and fails the test.
func runAsUID(t *testing.T, uid int, dir string, fake *fakeapi.Server, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, orchestratorBin, args...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = dir
	// A home of its own, apart from the workspace: the sandbox keeps
	// Bash from creating entries right in a directory that holds keys and
	// credentials (~/.ssh, ...), so a workspace that is also HOME cannot
	// take new files at its top level from Bash.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + sandboxtest.Dir(t), "ANTHROPIC_API_KEY=test-key", "ANTHROPIC_BASE_URL=" + fake.URL}
	if uid >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("orchestrator %s still running after two minutes; killed\n%s", strings.Join(args, " "), stderr.String())
	}
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestHeadlessAsAnOrdinaryUser: orchestrator -p works for a user without
// privileges: the in-process executor runs the tools as that user, with
// the host's network (a private network namespace needs root).
func TestHeadlessAsAnOrdinaryUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the test switches to nobody, which needs root; TestHeadlessInCurrentDirectory runs as you")
	}
	dir := sandboxtest.Dir(t) // nobody's
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_id", "Bash", map[string]any{"command": "id -u && touch by-bash"})),
		fakeapi.EndTurn(fakeapi.Text("Done.")),
	)
	r := runAsUID(t, sandboxtest.NobodyUID, dir, fake, "-p", "who am I", "--permission-mode", "bypassPermissions", "--sessions-dir", filepath.Join(dir, "sessions"))
	if r.code != 0 || !strings.Contains(r.stdout, "Done.") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Raw), `"content":"65534"`) {
		t.Fatalf("the Bash result is not nobody's uid: %d requests\n%s", len(reqs), reqs[len(reqs)-1].Raw)
	}
	if fi, err := os.Stat(filepath.Join(dir, "by-bash")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != sandboxtest.NobodyUID {
		t.Fatalf("by-bash: %v, want a file of nobody's", err)
	}
}

// TestHeadlessSetupErrorsNameTheFlag: when the in-process executor cannot
// be set up, the message names the flag that fixes it, and no Go field.
func TestHeadlessSetupErrorsNameTheFlag(t *testing.T) {
	root := os.Geteuid() == 0
	missing := filepath.Join(t.TempDir(), "missing")
	private := t.TempDir() // mode 0700: nobody may not write it
	cases := []struct {
		name     string
		asNobody bool
		rootOnly bool
		args     []string
		code     int
		want     []string
	}{
		{name: "unknown sandbox", args: []string{"--sandbox", "chroot"}, code: 2, want: []string{`--sandbox must be "landlock" or "none", not "chroot"`}},
		{name: "unknown network", args: []string{"--network", "bridge"}, code: 2, want: []string{`--network must be "host", "allowlist" or "none", not "bridge"`}},
		{name: "missing root", args: []string{"--root", missing}, code: 1, want: []string{missing, "pass --root an existing directory"}},
		{name: "unknown run-as user", rootOnly: true, args: []string{"--run-as", "no-such-user-xyz"}, code: 1, want: []string{"no-such-user-xyz", "leave out --run-as"}},
		{name: "run-as user who cannot write the root", rootOnly: true, args: []string{"--run-as", "nobody", "--root", private}, code: 1,
			want: []string{private, "not accessible to user nobody", "leave out --run-as"}},
		{name: "no private network without root", asNobody: true, args: []string{"--network", "none", "--root", "/"}, code: 1,
			want: []string{"network namespace", "pass --network host"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			uid := -1
			if (tc.asNobody || tc.rootOnly) && !root {
				t.Skip("needs root")
			}
			dir := t.TempDir()
			if tc.asNobody {
				uid, dir = sandboxtest.NobodyUID, sandboxtest.Dir(t)
			}
			fake := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Text("unreachable")))
			args := append([]string{"-p", "hello", "--sessions-dir", filepath.Join(dir, "sessions")}, tc.args...)
			r := runAsUID(t, uid, dir, fake, args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstderr: %s", r.code, tc.code, r.stderr)
			}
			for _, want := range tc.want {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
				}
			}
			for _, name := range []string{"RunAsUser", "SessionUIDs", "Config."} {
				if strings.Contains(r.stderr, name) {
					t.Errorf("stderr names the Go identifier %q:\n%s", name, r.stderr)
				}
			}
		})
	}
}

// TestServeSetupErrorsNameTheFlag: orchestrator serve sets up its
// in-process executor before it serves, so a setup error stops it at once,
// naming the flag.
func TestServeSetupErrorsNameTheFlag(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	fake := fakeapi.New(t)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"missing root", []string{"--listen", "127.0.0.1:0", "--insecure", "--root", missing}, []string{missing, "pass --root an existing directory"}},
		{"unknown network", []string{"--listen", "127.0.0.1:0", "--insecure", "--network", "bridge"}, []string{"--network must be"}},
		{"socket in a missing directory", []string{"--listen", "unix://" + filepath.Join(missing, "orchestrator.sock")}, []string{"--listen: ", missing}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := runAsUID(t, -1, dir, fake, append([]string{"serve", "--sessions-dir", filepath.Join(dir, "sessions")}, tc.args...)...)
			if r.code == 0 {
				t.Fatalf("exit 0, want a setup error\n%s", r.stderr)
			}
			for _, want := range tc.want {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
				}
			}
		})
	}
}
