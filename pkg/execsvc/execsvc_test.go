package execsvc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
	"github.com/toolwire/toolwire/pkg/tool"
)

func TestMain(m *testing.M) {
	if err := sandbox.BecomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(sandboxtest.Main(m))
}

// testIDs lies far above accounts and toolsvc's default range.
var testIDs = sandbox.UIDRange{First: 3_200_000, Last: 3_200_099}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("session users need root")
	}
}

// factoryOf resolves cfg and returns its EnvFactory, as New does.
func factoryOf(t *testing.T, cfg Config, users *sandbox.UIDPool) executor.EnvFactory {
	t.Helper()
	return factoryWith(t, cfg, users, nil)
}

// factoryWith is factoryOf with a store of saved outputs.
func factoryWith(t *testing.T, cfg Config, users *sandbox.UIDPool, outputs *outputStore) executor.EnvFactory {
	t.Helper()
	res, err := resolve(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return envFactory(cfg, res, users, outputs, nil)
}

// openEnv opens a session's environment the way the executor does.
func openEnv(t *testing.T, factory executor.EnvFactory, id, dir string) (*tool.Env, executor.SandboxInfo) {
	t.Helper()
	env, info, err := factory(context.Background(), executor.EnvRequest{SessionID: id, Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	return env, info
}

// bash runs a script in env's sandbox and returns its output.
func bash(t *testing.T, env *tool.Env, script string) string {
	t.Helper()
	p, err := env.Procs.Start(context.Background(), sandbox.Cmd{Args: []string{"/bin/bash", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p.Output())
	p.Output().Close()
	p.Wait()
	return string(out)
}

// TestSessionsHaveUsersOfTheirOwn opens sessions the way toolsvc does with
// --session-uids and --session-dirs: each gets a workspace of its user's,
// and one session can neither see, signal nor read into another.
func TestSessionsHaveUsersOfTheirOwn(t *testing.T) {
	needRoot(t)
	root := sandboxtest.Dir(t)
	cfg := Config{Root: root, SessionDirs: true, SessionUIDs: testIDs, TempRoot: sandboxtest.Dir(t)}
	ex, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ex.Close()
	pool, err := sandbox.NewUIDPool(testIDs)
	if err != nil {
		t.Fatal(err)
	}
	factory := factoryOf(t, cfg, pool)
	a, _ := openEnv(t, factory, "a", "")
	b, info := openEnv(t, factory, "b", "")
	if got := strings.Join(info.Enforced, " "); !strings.Contains(got, "pid_isolation") || !strings.Contains(info.RunAs, "uid "+strconv.Itoa(b.Procs.UID())) {
		t.Errorf("Hello of b: enforced %q, run as %q", got, info.RunAs)
	}

	// The workspace made for a belongs to a's user alone.
	fi, err := os.Stat(a.Procs.Workspace())
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) != a.Procs.UID() || fi.Mode().Perm() != 0o700 || a.Procs.Workspace() != filepath.Join(root, "sessions", "a") {
		t.Errorf("a's workspace %s: owner %d mode %v, want %d and 0700", a.Procs.Workspace(), st.Uid, fi.Mode().Perm(), a.Procs.UID())
	}

	p, err := a.Procs.Start(context.Background(), sandbox.Cmd{Args: []string{"/bin/bash", "-c", "echo a-secret > secret.txt; echo ready; exec sleep 4721"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	if line, _ := bufio.NewReader(p.Output()).ReadString('\n'); line != "ready\n" {
		t.Fatalf("a's process printed %q", line)
	}
	pid := strconv.Itoa(p.Pid())
	out := bash(t, b, "ls /proc | grep -x "+pid+" || echo absent; cat /proc/"+pid+"/cmdline; kill -KILL "+pid+"; cat "+filepath.Join(a.Procs.Workspace(), "secret.txt")+"; ps -eo args=")
	for _, want := range []string{"absent", "/cmdline: No such file or directory", "Operation not permitted", "secret.txt: Permission denied"} {
		if !strings.Contains(out, want) {
			t.Errorf("b's attacks printed %q, want %q", out, want)
		}
	}
	// a's process as ps shows it, or as its cmdline reads (NUL between
	// arguments); not the bare number, which a temp directory's name in
	// the messages above may hold.
	if strings.Contains(out, "sleep 4721") || strings.Contains(out, "sleep\x004721") || strings.Contains(out, "a-secret") {
		t.Errorf("b saw a's process or secret:\n%s", out)
	}

	// A session in the root shares the root's files, which another user
	// owns on disk; it runs as a user of its own all the same.
	c, _ := openEnv(t, factory, "c", ".")
	if out := bash(t, c, "echo c > by-c && stat -c %u by-c && id -u"); out != fmt.Sprintf("%d\n%d\n", c.Procs.UID(), c.Procs.UID()) {
		t.Errorf("session in the root: %q", out)
	}
	if fi, err := os.Stat(filepath.Join(root, "by-c")); err != nil || int(fi.Sys().(*syscall.Stat_t).Uid) != sandboxtest.NobodyUID {
		t.Errorf("by-c on disk: %v %v, want it to belong to the root's owner", fi, err)
	}

	a.Close()
	if code, _ := p.Wait(); code != 137 {
		t.Errorf("a's process ended with %d after its session closed, want 137", code)
	}
}

// TestFailedOpenGivesTheIDBack: an Open that fails after the lease must not
// keep the id.
func TestFailedOpenGivesTheIDBack(t *testing.T) {
	needRoot(t)
	one := sandbox.UIDRange{First: testIDs.Last, Last: testIDs.Last}
	root := sandboxtest.Dir(t)
	cfg := Config{Root: root, SessionUIDs: one, TempRoot: sandboxtest.Dir(t)}
	pool, err := sandbox.NewUIDPool(one)
	if err != nil {
		t.Fatal(err)
	}
	factory := factoryOf(t, cfg, pool)
	if _, _, err := factory(context.Background(), executor.EnvRequest{SessionID: "x", Workspace: "/outside/the/root"}); err == nil {
		t.Fatal("a workspace outside the root was accepted")
	}
	env, _, err := factory(context.Background(), executor.EnvRequest{SessionID: "y"})
	if err != nil {
		t.Fatalf("the only id did not come back: %v", err)
	}
	env.Close()
}

func TestNewRefusesTwoUserModes(t *testing.T) {
	cfg := Config{Root: sandboxtest.Dir(t), SessionUIDs: testIDs, Sandbox: sandbox.Config{RunAsUser: "nobody"}}
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "exclude each other") {
		t.Fatalf("got %v, want a refusal of --session-uids with --run-as", err)
	}
}

// TestExplainAddsTheFix: the errors of New and of a session's setup reach
// the caller with the hint of the setting they are about, and still wrap
// what they wrapped.
func TestExplainAddsTheFix(t *testing.T) {
	hints := Hints{
		SettingRoot:                     "FIX-ROOT",
		sandbox.SettingSessionWorkspace: "FIX-WORKSPACE",
		sandbox.SettingSessionUIDs:      "FIX-UIDS",
	}
	missing := filepath.Join(t.TempDir(), "missing")
	_, err := New(Config{Root: missing, Explain: hints.Explain})
	if err == nil || !strings.HasSuffix(err.Error(), "; to fix it, FIX-ROOT") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("New with a missing root: %v, want it to end with the root's hint and wrap ErrNotExist", err)
	}

	t.Run("session setup", func(t *testing.T) {
		needRoot(t)
		one := sandbox.UIDRange{First: testIDs.Last, Last: testIDs.Last}
		root := sandboxtest.Dir(t)
		rootOwned := filepath.Join(root, "root-owned")
		if err := os.Mkdir(rootOwned, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := Config{Root: root, SessionUIDs: one, TempRoot: sandboxtest.Dir(t), Explain: hints.Explain}
		pool, err := sandbox.NewUIDPool(one)
		if err != nil {
			t.Fatal(err)
		}
		factory := factoryOf(t, cfg, pool)
		_, _, err = factory(context.Background(), executor.EnvRequest{SessionID: "x", Workspace: "root-owned"})
		if err == nil || !strings.Contains(err.Error(), "not accessible to user") || !strings.HasSuffix(err.Error(), "; to fix it, FIX-WORKSPACE") {
			t.Errorf("a root-owned workspace: %v, want the workspace's hint", err)
		}
		env, _, err := factory(context.Background(), executor.EnvRequest{SessionID: "y"})
		if err != nil {
			t.Fatal(err)
		}
		defer env.Close()
		_, _, err = factory(context.Background(), executor.EnvRequest{SessionID: "z"})
		if err == nil || !strings.HasSuffix(err.Error(), "; to fix it, FIX-UIDS") {
			t.Errorf("no id left: %v, want the range's hint", err)
		}
	})
}

func TestHintsExplain(t *testing.T) {
	h := Hints{sandbox.SettingNetwork: "pass --network host", sandbox.SettingBackend: "pass --sandbox none"}
	plain := errors.New("plain")
	if got := h.Explain(plain); got != plain {
		t.Errorf("an error about no setting became %v", got)
	}
	if h.Explain(nil) != nil {
		t.Error("nil became an error")
	}
	both := fmt.Errorf("setup: %w; %w",
		&sandbox.SettingError{Setting: sandbox.SettingBackend, Err: errors.New("no Landlock")},
		&sandbox.SettingError{Setting: sandbox.SettingNetwork, Err: errors.New("no netns")})
	want := "setup: no Landlock; no netns; to fix it, pass --sandbox none; and pass --network host"
	if got := h.Explain(both); got.Error() != want || !errors.Is(got, both) {
		t.Errorf("got %q, want %q wrapping the original", got, want)
	}
}

// TestFailedSetupReleasesEverything opens sessions whose setup fails late,
// after the session's id, its idmap helper process, its temp file system,
// its temp and output directories and its workspace are set up (the
// session user cannot reach the workspace the client named): each open
// fails, and nothing is left of it, no process, mount, directory, open
// file or id; the same session opens once the workspace is fixed.
func TestFailedSetupReleasesEverything(t *testing.T) {
	needRoot(t)
	one := sandbox.UIDRange{First: testIDs.Last - 1, Last: testIDs.Last - 1}
	root, temps, outputRoot := sandboxtest.Dir(t), sandboxtest.Dir(t), filepath.Join(sandboxtest.Dir(t), "outputs")
	// A workspace of another owner, behind a directory only root may
	// search.
	locked := filepath.Join(root, "locked")
	ws := filepath.Join(locked, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(ws, sandboxtest.NobodyUID, sandboxtest.NobodyGID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(locked, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := PrepareOutputRoot(outputRoot); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Root: root, SessionUIDs: one, TempRoot: temps, TempQuota: 8 << 20, OutputRoot: outputRoot, OutputRetention: time.Hour}
	pool, err := sandbox.NewUIDPool(one)
	if err != nil {
		t.Fatal(err)
	}
	outputs, err := newOutputStore(outputRoot, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	factory := factoryWith(t, cfg, pool, outputs)
	open := func() error {
		env, _, err := factory(context.Background(), executor.EnvRequest{SessionID: "s", Workspace: "locked/ws"})
		if err == nil {
			env.Close()
		}
		return err
	}
	// The mount points under the temp root.
	tempMounts := func() []string {
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		var points []string
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], temps+"/") {
				points = append(points, f[4])
			}
		}
		return points
	}
	// The temp root stays mounted on itself for later sessions.
	t.Cleanup(func() {
		for _, p := range slices.Backward(tempMounts()) {
			_ = syscall.Unmount(p, syscall.MNT_DETACH)
		}
	})
	tempEntries := func() []string {
		var left []string
		_ = filepath.WalkDir(temps, func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.Contains(d.Name(), "toolwire-s-") {
				left = append(left, p)
			}
			return nil
		})
		return left
	}
	// One open first: what the process sets up once (the temp root, the
	// runtime's descriptors) is not a session's.
	if err := open(); err == nil || !strings.Contains(err.Error(), "locked is not accessible") {
		t.Fatalf("open with an unreachable workspace: %v, want an error naming it", err)
	}
	fds, mounts := sandboxtest.OpenFDs(), tempMounts()
	for i := range 20 {
		if err := open(); err == nil {
			t.Fatalf("open %d succeeded", i)
		}
	}
	if left := sandboxtest.WaitNoDescendants(5 * time.Second); len(left) > 0 {
		t.Errorf("processes left by failed opens: %v", left)
	}
	if n := sandboxtest.OpenFDs(); n != fds {
		t.Errorf("%d open files after 20 failed opens, %d before", n, fds)
	}
	if got := tempMounts(); !slices.Equal(got, mounts) || len(got) != 1 {
		t.Errorf("mounts under the temp root after the failed opens: %v, before: %v; want only the temp root's own", got, mounts)
	}
	if left := tempEntries(); len(left) > 0 {
		t.Errorf("temp directories left by failed opens: %v", left)
	}
	// The only id, and the session's saved outputs, come back.
	if err := os.Chmod(locked, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := open(); err != nil {
		t.Fatalf("open once the workspace is reachable: %v", err)
	}
}

// TestWorkspaceQuotaWhereItHolds opens sessions on an executor whose root
// is a btrfs with quotas: a workspace it makes gets the quota and says so
// in the Hello, one it makes below a mount of another file system, and one
// the client owns already, get none and do not claim one.
func TestWorkspaceQuotaWhereItHolds(t *testing.T) {
	needRoot(t)
	root := sandboxtest.Btrfs(t, 256<<20, true)
	other := filepath.Join(root, "other")
	owned := filepath.Join(root, "owned")
	// The root and what is in it are nobody's, the tools' user.
	for _, d := range []string{other, owned} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mount("toolwire-test", other, "tmpfs", 0, "size=1m,mode=0755,uid=65534,gid=65534"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(other, syscall.MNT_DETACH) })
	for _, d := range []string{root, owned} {
		if err := os.Chown(d, sandboxtest.NobodyUID, sandboxtest.NobodyGID); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Root: root, SessionDirs: true, TempRoot: sandboxtest.Dir(t), WorkspaceQuota: 8 << 20, RequireWorkspaceQuota: true}
	quotas, err := workspaceQuotas(cfg, root)
	if err != nil {
		t.Fatal(err)
	}
	res, err := resolve(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory := envFactory(cfg, res, nil, nil, quotas)
	for _, tc := range []struct {
		session, workspace string
		quota              bool
	}{
		{"made", "", true},
		{"below-a-mount", "other/ws", false},
		{"owned", "owned", false},
	} {
		env, info := openEnv(t, factory, tc.session, tc.workspace)
		if got := slices.Contains(info.Enforced, "workspace_quota"); got != tc.quota || (env.Workspace != nil) != tc.quota {
			t.Errorf("session %s: Hello claims a workspace quota %v, env reports one %v; want %v", tc.session, got, env.Workspace != nil, tc.quota)
		}
		if tc.quota {
			if _, limit, ok := env.Workspace(); !ok || limit != 8<<20 {
				t.Errorf("session %s: workspace usage limit %d, %v; want 8 MiB", tc.session, limit, ok)
			}
		}
	}
}
