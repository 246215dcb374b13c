package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// fakeHome makes a home directory with a program, secrets and ordinary
// files, and returns it.
func fakeHome(t *testing.T) string {
	t.Helper()
	home := sandboxtest.Dir(t)
	files := map[string]string{
		".local/bin/hello":           "#!/bin/sh\necho hello from home\n",
		".ssh/id_x":                  "PRIVATE KEY\n",
		".config/gcloud/credentials": "gcloud secret\n",
		".config/tool/config":        "ordinary config\n",
		"notes.txt":                  "notes\n",
	}
	for name, content := range files {
		p := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(home, ".ssh"), filepath.Join(home, "keys")); err != nil {
		t.Fatal(err)
	}
	return home
}

// devRunner is a runner of the development profile: everything readable
// but the denied paths of home, HOME set to home. It runs as the test's
// own user, as the orchestrator's in-process executor does.
func devRunner(t *testing.T, home string, extra ...string) *sandbox.Runner {
	t.Helper()
	deny := append([]string{filepath.Join(home, ".ssh"), filepath.Join(home, ".config/gcloud"), filepath.Join(home, ".aws")}, extra...)
	cfg := sandbox.Config{
		ReadAll:      true,
		DenyPaths:    deny,
		Home:         home,
		RunAsUser:    "0:0",
		Network:      sandbox.NetworkHost,
		EnvAllowlist: []string{"*"},
		EnvDenylist:  sandbox.DefaultEnvDenylist(),
	}
	r, err := sandbox.NewRunner(cfg, sandboxtest.Dir(t), filepath.Join(sandboxtest.Dir(t), "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func TestReadAllButDenied(t *testing.T) {
	home := fakeHome(t)
	r := devRunner(t, home)
	// Created after the runner: a denied path that did not exist then is
	// kept out all the same.
	if err := os.MkdirAll(filepath.Join(home, ".aws"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".aws/credentials"), []byte("aws secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, script, want string
		ok                 bool
	}{
		{"program under home runs", "$HOME/.local/bin/hello", "hello from home", true},
		{"HOME is the home", `echo "$HOME"`, home, true},
		{"ordinary file readable", "cat $HOME/notes.txt", "notes", true},
		{"sibling of a denied dir readable", "cat $HOME/.config/tool/config", "ordinary config", true},
		{"system files readable", "head -c 4 /etc/passwd", "root", true},
		{"home can be listed", "ls -A $HOME", ".ssh", true},
		{"names in a denied dir can be listed", "ls $HOME/.ssh", "id_x", true},
		{"ssh key unreadable", "cat $HOME/.ssh/id_x", "Permission denied", false},
		{"ssh key unreadable through a link", "cat $HOME/keys/id_x", "Permission denied", false},
		{"nested denied dir unreadable", "cat $HOME/.config/gcloud/credentials", "Permission denied", false},
		{"denied path made later unreadable", "cat $HOME/.aws/credentials", "Permission denied", false},
		{"home not writable", "echo x > $HOME/notes.txt", "Permission denied", false},
		{"no new files in home", "touch $HOME/new", "Permission denied", false},
		{"no writing into a denied dir", "echo x > $HOME/.ssh/authorized_keys", "Permission denied", false},
		{"disks stay out", "for d in /dev/vda /dev/sda /dev/nvme0n1 /dev/xvda /dev/loop0; do [ -b $d ] && exec head -c 1 $d; done; echo no disk; exit 1", "Permission denied", false},
		{"the usual devices work", "echo x > /dev/null && head -c 1 /dev/urandom | wc -c", "1", true},
		{"workspace writable", "echo hi > out.txt && cat out.txt", "hi", true},
		{"temp dir writable", `echo hi > "$TMPDIR/t" && cat "$TMPDIR/t"`, "hi", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, code := run(t, r, c.script)
			if (code == 0) != c.ok || !strings.Contains(out, c.want) {
				t.Fatalf("%q: exit %d, output %q; want success %v and %q", c.script, code, out, c.ok, c.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(home, "new")); err == nil {
		t.Error("a file was created in home")
	}
}

func TestDeniedWorkingDirectoryAndProgram(t *testing.T) {
	home := fakeHome(t)
	r := devRunner(t, home)
	for name, c := range map[string]sandbox.Cmd{
		"working directory": {Args: []string{"/bin/true"}, Dir: filepath.Join(home, ".ssh")},
		"program":           {Args: []string{filepath.Join(home, ".ssh/id_x")}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := r.Start(context.Background(), c)
			var pe *sandbox.PolicyError
			if !errors.As(err, &pe) || !strings.Contains(pe.Msg, "kept out") {
				t.Fatalf("got %v, want a policy error saying the path is kept out", err)
			}
		})
	}
	cfg := sandbox.Config{ReadAll: true, DenyPaths: []string{home}, RunAsUser: "0:0", Network: sandbox.NetworkHost}
	ws := filepath.Join(home, "project")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if r, err := sandbox.NewRunner(cfg, ws, t.TempDir()); err == nil || !strings.Contains(err.Error(), "kept out") {
		if r != nil {
			r.Close()
		}
		t.Fatalf("a workspace in a denied path: %v", err)
	}
}

func TestEnvironmentDenylist(t *testing.T) {
	t.Setenv("TOOLWIRE_TEST_PLAIN", "visible")
	t.Setenv("TOOLWIRE_TEST_TOKEN", "secret")
	t.Setenv("ANTHROPIC_API_KEY", "secret")
	t.Setenv("Lower_Secret_Name", "secret")
	t.Setenv("SHELL", "/usr/bin/zsh") // the user's own: kept
	r := devRunner(t, fakeHome(t))
	out, code := run(t, r, `echo "$TOOLWIRE_TEST_PLAIN ${TOOLWIRE_TEST_TOKEN-none} ${ANTHROPIC_API_KEY-none} ${Lower_Secret_Name-none} $SHELL"; env | grep -c '^HOME='`)
	if code != 0 || out != "visible none none none /usr/bin/zsh\n1\n" {
		t.Fatalf("output %q (exit %d): want the plain variable, none of the secrets, the user's SHELL, and one HOME", out, code)
	}
}

// TestDeniedInsideGrantedDirectory checks carving without ReadAll: an extra
// read-only directory that holds a denied one.
func TestDeniedInsideGrantedDirectory(t *testing.T) {
	home := fakeHome(t)
	cfg := sandbox.Config{ReadOnlyPaths: []string{home}, DenyPaths: []string{filepath.Join(home, ".ssh")}, RunAsUser: "0:0", Network: sandbox.NetworkHost}
	r, err := sandbox.NewRunner(cfg, sandboxtest.Dir(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if out, code := run(t, r, "cat "+filepath.Join(home, "notes.txt")); code != 0 || out != "notes\n" {
		t.Errorf("granted file: %q, exit %d", out, code)
	}
	if out, code := run(t, r, "cat "+filepath.Join(home, ".ssh/id_x")); code == 0 || !strings.Contains(out, "Permission denied") {
		t.Errorf("denied file: %q, exit %d", out, code)
	}
	if out, code := run(t, r, "head -c 4 /etc/passwd; cat /etc/shadow"); code == 0 || !strings.HasPrefix(out, "root") || !strings.Contains(out, "Permission denied") {
		t.Errorf("system files: %q, exit %d; want /etc/passwd readable and /etc/shadow not", out, code)
	}
}

// TestExtraPathsOnAnyDistribution checks that asking for an extra path
// keeps the missing system directories optional (Debian has no /lib32 or
// /etc/pki), while a missing extra path is refused by name.
func TestExtraPathsOnAnyDistribution(t *testing.T) {
	extra := t.TempDir()
	cfg := sandbox.Config{ReadOnlyPaths: []string{extra}, Network: sandbox.NetworkHost}
	if err := sandbox.Check(cfg); err != nil {
		t.Fatalf("an existing extra path: %v", err)
	}
	r, err := sandbox.NewRunner(cfg, sandboxtest.Dir(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	cfg.ReadOnlyPaths = []string{filepath.Join(extra, "missing")}
	if err := sandbox.Check(cfg); err == nil || !strings.Contains(err.Error(), filepath.Join(extra, "missing")) {
		t.Fatalf("a missing extra path: %v", err)
	}
}

// TestRootKeepsOnlyFileCapabilities: processes that stay root (the
// orchestrator's in-process executor run by root) keep the capabilities to
// work on files of other owners, and lose the rest: they cannot read the
// environment of another root process (where the model API key lives),
// reconfigure the network or load modules.
func TestRootKeepsOnlyFileCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	r := devRunner(t, fakeHome(t))
	// The workspace belongs to nobody, mode 0755: writing into it as root
	// takes CAP_DAC_OVERRIDE.
	script := fmt.Sprintf("grep CapEff /proc/self/status; cat /proc/%d/environ >/dev/null; echo x > by-root && echo wrote", os.Getpid())
	out, code := run(t, r, script)
	want := fmt.Sprintf("CapEff:\t000000000000041f\ncat: /proc/%d/environ: Permission denied\nwrote\n", os.Getpid())
	if code != 0 || out != want {
		t.Fatalf("output %q (exit %d)\nwant %q", out, code, want)
	}
}

// TestWorkspaceHoldingDeniedPath: a workspace that holds a denied path
// (orchestrator -p run in the home directory) stays writable below its
// top level, the denied path stays out, and no entry can be made right
// in it (the documented cost of carving).
func TestWorkspaceHoldingDeniedPath(t *testing.T) {
	home := fakeHome(t)
	cfg := sandbox.Config{ReadAll: true, DenyPaths: []string{filepath.Join(home, ".ssh")}, RunAsUser: "0:0", Network: sandbox.NetworkHost}
	r, err := sandbox.NewRunner(cfg, home, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for script, want := range map[string]string{
		"echo x > .config/tool/new && cat .config/tool/new":  "x\n",
		"echo y >> notes.txt && tail -n 1 notes.txt":         "y\n",
		"cat .ssh/id_x 2>&1 | grep -c 'Permission denied'":   "1\n",
		"touch top-level 2>&1 | grep -c 'Permission denied'": "1\n",
	} {
		if out, _ := run(t, r, script); out != want {
			t.Errorf("%s: %q, want %q", script, out, want)
		}
	}
}
