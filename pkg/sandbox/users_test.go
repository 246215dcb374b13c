package sandbox_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// testIDs is far above the ids of accounts and of DefaultSessionUIDs, so
// the tests meet neither a real user nor a toolsvc running on the machine.
var testIDs = sandbox.UIDRange{First: 3_100_000, Last: 3_100_999}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("session users need root")
	}
}

func newPool(t *testing.T, r sandbox.UIDRange) *sandbox.UIDPool {
	t.Helper()
	pool, err := sandbox.NewUIDPool(r)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// sessionRunner returns a runner with a session user of its own. With own,
// its workspace is made for it the way toolsvc makes one (owned by the
// session user, mode 0700); otherwise the workspace is nobody's, which the
// runner shows to the session user as its own.
func sessionRunner(t *testing.T, pool *sandbox.UIDPool, cfg sandbox.Config, own bool) *sandbox.Runner {
	t.Helper()
	lease, err := pool.Lease()
	if err != nil {
		t.Fatal(err)
	}
	ws := sandboxtest.Dir(t)
	if own {
		ws = filepath.Join(ws, "ws")
		if err := os.Mkdir(ws, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(ws, lease.ID(), lease.ID()); err != nil {
			t.Fatal(err)
		}
	}
	cfg.SessionUser = lease
	r, err := sandbox.NewRunner(cfg, ws, filepath.Join(sandboxtest.Dir(t), "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// startReady starts a bash script in r and waits until it prints "ready".
func startReady(t *testing.T, r *sandbox.Runner, script string) *sandbox.Process {
	t.Helper()
	p, err := r.Start(context.Background(), sandbox.Cmd{Args: []string{"/bin/bash", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		p.Output().Close()
	})
	br := bufio.NewReader(p.Output())
	for {
		line, err := br.ReadString('\n')
		if strings.TrimSpace(line) == "ready" {
			return p
		}
		if err != nil {
			t.Fatalf("%q ended before it was ready: %v (last line %q)", script, err, line)
		}
	}
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 600 {
		return s[:600] + "..."
	}
	return s
}

// ptraceAttach is a perl script that tries PTRACE_ATTACH on the pid given
// as its argument and prints the error.
func ptraceAttach(t *testing.T) string {
	nr := map[string]int{"amd64": 101, "arm64": 117}[runtime.GOARCH]
	if nr == 0 {
		return ""
	}
	return fmt.Sprintf(`perl -e 'syscall(%d, 16, $ARGV[0] + 0, 0, 0) == -1 or die "attached\n"; print "$!\n"'`, nr)
}

func needPerl(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("perl is needed to connect to unix sockets and to call ptrace from bash")
	}
}

// TestSessionUsersIsolated runs a process in session a and attacks it from
// session b: b must not list it, read its command line, signal it, trace it
// or read a's files. Without Landlock the same holds, by user ids and the
// private /proc alone.
func TestSessionUsersIsolated(t *testing.T) {
	needRoot(t)
	needPerl(t)
	pool := newPool(t, testIDs)
	cfgs := map[string]sandbox.Config{
		"landlock":         {},
		"without landlock": {Backend: sandbox.BackendNone, Network: sandbox.NetworkHost},
	}
	for name, cfg := range cfgs {
		t.Run(name, func(t *testing.T) {
			a := sessionRunner(t, pool, cfg, true)
			b := sessionRunner(t, pool, cfg, false)
			if a.UID() == b.UID() {
				t.Fatalf("both sessions run as uid %d", a.UID())
			}
			pa := startReady(t, a, `echo a-secret > secret.txt; echo a-tmp > "$TMPDIR/secret.txt"; echo ready; exec sleep 4711`)
			pid := strconv.Itoa(pa.Pid())
			cases := []struct{ name, script, want, not string }{
				{"stat /proc/<pid>", "test -e /proc/" + pid + " && echo visible || echo hidden", "hidden", ""},
				{"list /proc", "ls /proc | grep -x " + pid + " || echo absent", "absent", ""},
				{"read the command line", "cat /proc/" + pid + "/cmdline", "No such file or directory", "4711"},
				{"ps", "ps -eo pid=,args=", "ps -eo", "sleep 4711"},
				{"signal", "kill -KILL " + pid, "Operation not permitted", ""},
				{"read a workspace file", "cat " + filepath.Join(a.Workspace(), "secret.txt"), "Permission denied", "a-secret"},
				{"list the workspace", "ls " + a.Workspace(), "Permission denied", "secret"},
				{"read a temp file", "cat " + filepath.Join(a.TempDir(), "secret.txt"), "Permission denied", "a-tmp"},
				{"write into the workspace", "echo x > " + filepath.Join(a.Workspace(), "planted"), "Permission denied", ""},
			}
			if attach := ptraceAttach(t); attach != "" {
				cases = append(cases, struct{ name, script, want, not string }{"ptrace", attach + " " + pid, "Operation not permitted", "attached"})
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					out, _ := run(t, b, c.script)
					if !strings.Contains(out, c.want) || (c.not != "" && strings.Contains(out, c.not)) {
						t.Errorf("session b got %q, want %q and not %q", clip(out), c.want, c.not)
					}
				})
			}
			// The service sees and ends everything.
			if cmd, err := os.ReadFile("/proc/" + pid + "/cmdline"); err != nil || !strings.Contains(string(cmd), "4711") {
				t.Errorf("the service cannot read a's command line: %q %v", cmd, err)
			}
			if !alive(pa.Pid()) {
				t.Fatal("a's process died during b's attacks")
			}
			if _, err := os.Stat(filepath.Join(a.Workspace(), "planted")); err == nil {
				t.Error("b planted a file in a's workspace")
			}
			pa.Kill()
			if code, _ := pa.Wait(); code != 137 {
				t.Errorf("a's process ended with %d, want 137 from the service's kill", code)
			}
		})
	}
}

// TestSameUserSeesOtherSessions is the control of TestSessionUsersIsolated:
// two sessions that share a user, without Landlock, see and signal each
// other's processes, so the attacks above are real ones.
func TestSameUserSeesOtherSessions(t *testing.T) {
	cfg := sandbox.Config{Backend: sandbox.BackendNone, Network: sandbox.NetworkHost}
	a, b := newRunner(t, cfg), newRunner(t, cfg)
	pa := startReady(t, a, "echo ready; exec sleep 4712")
	pid := strconv.Itoa(pa.Pid())
	if out, _ := run(t, b, "tr '\\0' ' ' < /proc/"+pid+"/cmdline; kill -0 "+pid+" && echo signalled"); !strings.Contains(out, "sleep 4712") || !strings.Contains(out, "signalled") {
		t.Errorf("a session sharing the user got %q, want a's command line and a delivered signal", out)
	}
}

func TestSessionUserIdentity(t *testing.T) {
	needRoot(t)
	r := sessionRunner(t, newPool(t, testIDs), sandbox.Config{}, true)
	id := strconv.Itoa(r.UID())
	out, code := run(t, r, `id -u; id -g; id -G; whoami; echo "$HOME"; test -r /proc/$$/cmdline && echo sees-itself; ps -o args= -p $$; true`)
	want := strings.Join([]string{id, id, id, "toolwire", r.TempDir(), "sees-itself", "/bin/bash -c"}, "\n")
	if code != 0 || !strings.HasPrefix(out, want) {
		t.Errorf("got %q exit %d, want it to start with %q", out, code, want)
	}
	got := strings.Join(r.Enforced(), " ")
	for _, w := range []string{"pid_isolation", "unprivileged_user", "landlock_fs", "process_tree"} {
		if !strings.Contains(got, w) {
			t.Errorf("Enforced %q lacks %s", got, w)
		}
	}
}

// TestSessionUserWorkspaces checks who owns what in the three kinds of
// workspace: one made for the session, one another user owns (shown to the
// session as its own through an id-mapped mount), and one root owns (not
// mapped, so refused when its mode keeps the session user out).
func TestSessionUserWorkspaces(t *testing.T) {
	needRoot(t)
	pool := newPool(t, testIDs)
	owner := func(t *testing.T, path string) int {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return int(fi.Sys().(*syscall.Stat_t).Uid)
	}
	t.Run("made for the session", func(t *testing.T) {
		r := sessionRunner(t, pool, sandbox.Config{}, true)
		if out, code := run(t, r, "echo x > made && stat -c %u made"); code != 0 || strings.TrimSpace(out) != strconv.Itoa(r.UID()) {
			t.Fatalf("got %q exit %d", out, code)
		}
		if got := owner(t, filepath.Join(r.Workspace(), "made")); got != r.UID() {
			t.Errorf("on disk the file belongs to %d, want the session user %d", got, r.UID())
		}
	})
	t.Run("another user's", func(t *testing.T) {
		r := sessionRunner(t, pool, sandbox.Config{}, false)
		// A file the service wrote for the session, given to the
		// directory's owner as the file tools do.
		prior := filepath.Join(r.Workspace(), "prior")
		if err := os.WriteFile(prior, []byte("one\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(prior, sandboxtest.NobodyUID, sandboxtest.NobodyGID); err != nil {
			t.Fatal(err)
		}
		out, code := run(t, r, "echo two >> prior && echo x > made && stat -c %u made prior && cat prior")
		id := strconv.Itoa(r.UID())
		if want := id + "\n" + id + "\none\ntwo\n"; code != 0 || out != want {
			t.Fatalf("got %q exit %d, want %q", out, code, want)
		}
		if got := owner(t, filepath.Join(r.Workspace(), "made")); got != sandboxtest.NobodyUID {
			t.Errorf("on disk the file belongs to %d, want the workspace owner %d", got, sandboxtest.NobodyUID)
		}
	})
	t.Run("root's", func(t *testing.T) {
		ws := t.TempDir()
		os.Chmod(filepath.Dir(ws), 0o755)
		lease, err := pool.Lease()
		if err != nil {
			t.Fatal(err)
		}
		_, err = sandbox.NewRunner(sandbox.Config{SessionUser: lease}, ws, filepath.Join(sandboxtest.Dir(t), "tmp"))
		if err == nil || !strings.Contains(err.Error(), "not accessible to user toolwire") {
			t.Fatalf("got %v, want a refusal of the root-owned workspace", err)
		}
		if got := sandbox.SettingsOf(err); len(got) != 1 || got[0] != sandbox.SettingSessionWorkspace {
			t.Errorf("the refusal is about %q, want the session workspace", got)
		}
	})
}

// TestSessionEndKillsTheUser checks that, without cgroups, Close finds a
// session user's process that is in no call's tree (here one the test
// starts as that user and double-forks away) and that the id goes back to
// the pool only then. (With cgroups every process of the session is in the
// runner's cgroup tree, which no process can leave, and Close kills the
// tree without a look at the machine's processes.)
func TestSessionEndKillsTheUser(t *testing.T) {
	needRoot(t)
	sandbox.DisableCgroups(t)
	one := sandbox.UIDRange{First: testIDs.Last, Last: testIDs.Last}
	pool := newPool(t, one)
	lease, err := pool.Lease()
	if err != nil {
		t.Fatal(err)
	}
	ws, tmp := sandboxtest.Dir(t), filepath.Join(sandboxtest.Dir(t), "tmp")
	r, err := sandbox.NewRunner(sandbox.Config{SessionUser: lease}, ws, tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", "-c", "setsid sleep 4713 >/dev/null 2>&1 & echo $!")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(lease.ID()), Gid: uint32(lease.ID())}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	stray, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || !alive(stray) {
		t.Fatalf("stray process %q not running: %v", out, err)
	}
	if _, err := pool.Lease(); err == nil {
		t.Fatal("the pool's only id was leased twice")
	}
	r.Close()
	if alive(stray) {
		t.Errorf("the session user's stray process %d survived Close", stray)
	}
	again, err := pool.Lease()
	if err != nil {
		t.Fatalf("the id did not come back after Close: %v", err)
	}
	again.Release()
	if left := sandboxtest.WaitNoDescendants(5 * time.Second); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestFallbackKillsEscapees runs without cgroups, where only the process
// group and, for session users, the call's group mark find a call's tree.
func TestFallbackKillsEscapees(t *testing.T) {
	needRoot(t)
	sandbox.DisableCgroups(t)
	pool := newPool(t, testIDs)

	t.Run("kill", func(t *testing.T) {
		r := sessionRunner(t, pool, sandbox.Config{}, true)
		if got := strings.Join(r.Enforced(), " "); !strings.Contains(got, "process_tree") {
			t.Errorf("Enforced %q lacks process_tree", got)
		}
		p, err := r.Start(context.Background(), sandbox.Cmd{Args: []string{"/bin/bash", "-c", treeScript}})
		if err != nil {
			t.Fatal(err)
		}
		pids := readPids(t, p.Output())
		p.Kill()
		// The output ends once no process of the tree holds it; a survivor
		// would hold it open for ever.
		if f, ok := p.Output().(*os.File); ok {
			f.SetReadDeadline(time.Now().Add(30 * time.Second))
		}
		if _, err := io.Copy(io.Discard, p.Output()); err != nil {
			t.Errorf("output still open after Kill: %v; processes left: %v", err, sandboxtest.Descendants())
		}
		p.Output().Close()
		for _, pid := range pids {
			if alive(pid) {
				t.Errorf("pid %d survived Kill", pid)
			}
		}
	})
	t.Run("first process exits", func(t *testing.T) {
		r := sessionRunner(t, pool, sandbox.Config{}, true)
		out, code := run(t, r, "sleep 1000 & setsid sleep 1000 & (setsid sleep 1000 &); echo started")
		if out != "started\n" || code != 0 {
			t.Fatalf("got %q exit %d", out, code)
		}
		if left := sandboxtest.WaitNoDescendants(5 * time.Second); len(left) > 0 {
			t.Fatalf("left behind: %v", left)
		}
	})
	t.Run("other calls of the session live on", func(t *testing.T) {
		r := sessionRunner(t, pool, sandbox.Config{}, true)
		bg := startReady(t, r, "echo ready; exec sleep 4714")
		if out, code := run(t, r, "(setsid sleep 1000 &); echo started"); out != "started\n" || code != 0 {
			t.Fatalf("got %q exit %d", out, code)
		}
		if !alive(bg.Pid()) {
			t.Fatal("ending one call killed another call of the same session")
		}
		bg.Kill()
		if left := sandboxtest.WaitNoDescendants(5 * time.Second); len(left) > 0 {
			t.Fatalf("left behind: %v", left)
		}
	})
	// The control, and the gap docs/security.md names: with a fixed user,
	// the fallback kills the process group only, and a setsid child
	// escapes it.
	t.Run("fixed user: setsid escapes", func(t *testing.T) {
		r := newRunner(t, sandbox.Config{})
		if got := strings.Join(r.Enforced(), " "); !strings.Contains(got, "process_group") {
			t.Errorf("Enforced %q lacks process_group", got)
		}
		// The child reports its pid only once it runs in a session of its
		// own, so the kill cannot come before setsid.
		p, err := r.Start(context.Background(), sandbox.Cmd{Args: []string{"/bin/bash", "-c", "setsid /bin/sh -c 'echo $$; echo ready; exec sleep 4715' & wait"}})
		if err != nil {
			t.Fatal(err)
		}
		pids := readPids(t, p.Output())
		p.Kill()
		p.Output().Close()
		if len(pids) != 1 || !alive(pids[0]) {
			t.Fatalf("the setsid child %v is gone: the control does not show the gap", pids)
		}
		unix.Kill(pids[0], unix.SIGKILL)
		var ws unix.WaitStatus
		unix.Wait4(pids[0], &ws, 0, nil)
	})
}

// connectScript connects to the unix socket given as its argument and
// prints the first line it receives, or the error.
const connectScript = `perl -MIO::Socket::UNIX -e 'my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Peer => $ARGV[0]) or die "connect: $!\n"; print scalar <$s>'`

// TestUnixSockets: Landlock does not control connect(2) on a socket file,
// so file modes are what keep a tool from root's sockets and from another
// session's. The control shows the residual risk: a world-writable socket
// is reachable.
func TestUnixSockets(t *testing.T) {
	needRoot(t)
	needPerl(t)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		os.Chmod(d, 0o755)
	}
	sock := filepath.Join(dir, "root.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello from root\n"))
			c.Close()
		}
	}()
	defer func() { ln.Close(); <-done }()
	pool := newPool(t, testIDs)
	runners := map[string]*sandbox.Runner{
		"session user": sessionRunner(t, pool, sandbox.Config{}, true),
		"fixed user":   newRunner(t, sandbox.Config{}),
	}
	for name, r := range runners {
		t.Run(name, func(t *testing.T) {
			if err := os.Chmod(sock, 0o660); err != nil {
				t.Fatal(err)
			}
			if out, _ := run(t, r, connectScript+" "+sock); !strings.Contains(out, "connect: Permission denied") {
				t.Errorf("connect to root's socket (mode 0660): %q, want Permission denied", out)
			}
			if err := os.Chmod(sock, 0o666); err != nil {
				t.Fatal(err)
			}
			if out, _ := run(t, r, connectScript+" "+sock); out != "hello from root\n" {
				t.Errorf("connect to a world-writable socket: %q; the residual risk docs/security.md names has changed", out)
			}
		})
	}
	t.Run("another session's", func(t *testing.T) {
		a := sessionRunner(t, pool, sandbox.Config{}, true)
		b := sessionRunner(t, pool, sandbox.Config{}, true)
		asock := filepath.Join(a.Workspace(), "a.sock")
		startReady(t, a, `perl -MIO::Socket::UNIX -e 'my $l = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Local => $ARGV[0], Listen => 1) or die "listen: $!\n"; chmod 0777, $ARGV[0]; $| = 1; print "ready\n"; while (my $c = $l->accept) { print $c "hello from a\n"; close $c }' `+asock)
		if out, _ := run(t, a, connectScript+" "+asock); out != "hello from a\n" {
			t.Fatalf("a cannot reach its own socket: %q", out)
		}
		if out, _ := run(t, b, connectScript+" "+asock); !strings.Contains(out, "connect: Permission denied") {
			t.Errorf("b connecting to a's socket: %q, want Permission denied", out)
		}
	})
}

func TestUIDPool(t *testing.T) {
	t.Run("parse", func(t *testing.T) {
		cases := map[string]struct {
			want sandbox.UIDRange
			err  string
		}{
			"200000-265535": {want: sandbox.UIDRange{First: 200000, Last: 265535}},
			"":              {},
			"off":           {},
			"5":             {err: "want FIRST-LAST"},
			"10-5":          {err: "0 < FIRST <= LAST"},
			"0-10":          {err: "0 < FIRST <= LAST"},
			"60000-70000":   {err: "65534"},
		}
		for in, c := range cases {
			got, err := sandbox.ParseUIDRange(in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("%q: got %v, %v; want an error with %q", in, got, err, c.err)
				}
				continue
			}
			if err != nil || got != c.want {
				t.Errorf("%q: got %v, %v; want %v", in, got, err, c.want)
			}
		}
	})
	t.Run("refuses accounts", func(t *testing.T) {
		// uid 0 is refused by the range check; 1-99 holds Debian's
		// system accounts (daemon is 1).
		if _, err := sandbox.NewUIDPool(sandbox.UIDRange{First: 1, Last: 99}); err == nil || !strings.Contains(err.Error(), "choose a range no account uses") {
			t.Errorf("got %v, want a refusal naming an account", err)
		}
	})
	t.Run("round robin and exhaustion", func(t *testing.T) {
		pool := newPool(t, sandbox.UIDRange{First: testIDs.First, Last: testIDs.First + 2})
		var ids []int
		for range 3 {
			l, err := pool.Lease()
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, l.ID())
			defer l.Release()
		}
		if ids[0] == ids[1] || ids[1] == ids[2] || ids[0] == ids[2] {
			t.Errorf("ids %v repeat", ids)
		}
		if _, err := pool.Lease(); err == nil || !strings.Contains(err.Error(), "in use") {
			t.Errorf("a fourth lease from three ids: %v", err)
		}
	})
	t.Run("skips ids of live processes", func(t *testing.T) {
		needRoot(t)
		busy := testIDs.First + 10
		cmd := exec.Command("sleep", "100")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{uint32(busy)}}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		pool := newPool(t, sandbox.UIDRange{First: busy, Last: busy + 1})
		l, err := pool.Lease()
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		if l.ID() == busy {
			t.Errorf("leased %d, which a live process holds as a group", busy)
		}
		if l2, err := pool.Lease(); err == nil {
			t.Errorf("leased %d as well: the id a process holds came back", l2.ID())
		}
	})
}

func TestCheckSessionUsers(t *testing.T) {
	needRoot(t)
	if err := sandbox.CheckSessionUsers(sandboxtest.Dir(t)); err != nil {
		t.Fatal(err)
	}
}

// TestSessionSeesOnlyItsOwnTempMount starts a session whose temp directory
// is a file system of its own in this process's session temp root, beside
// another session's and beside the temp root of another toolsvc of the
// host with a session temp file system in it: the session's processes see
// their own temp mount only, and no other session's id in mountinfo,
// while the service still has every mount.
func TestSessionSeesOnlyItsOwnTempMount(t *testing.T) {
	needRoot(t)
	pool := newPool(t, testIDs)
	base := sandboxtest.Dir(t)
	mountTmpfs := func(dir string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := sandbox.MountSessionTemp(dir, 1<<20); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sandbox.UnmountSessionTemp(dir) })
	}
	// Another toolsvc's temp root (bound onto itself, as SessionTempRoot
	// does), in a temp dir of its own, and a session temp file system in
	// it. The parent of this process stands for that toolsvc, alive.
	foreign := filepath.Join(sandboxtest.Dir(t), "toolwire-sessions-"+strconv.Itoa(os.Getppid()))
	if err := os.Mkdir(foreign, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(foreign, foreign, "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(foreign, syscall.MNT_DETACH) })
	mountTmpfs(filepath.Join(foreign, "toolwire-tenant-a-1"))

	root, err := sandbox.SessionTempRoot(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(root, syscall.MNT_DETACH) })
	mountTmpfs(filepath.Join(root, "toolwire-tenant-b-2"))
	own := filepath.Join(root, "toolwire-mine-3")
	mountTmpfs(own)

	lease, err := pool.Lease()
	if err != nil {
		t.Fatal(err)
	}
	r, err := sandbox.NewRunner(sandbox.Config{SessionUser: lease}, sandboxtest.Dir(t), own)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// (Other tests of the machine may mount file systems of their own.)
	out, code := run(t, r, "grep -e ' toolwire-session-tmp ' -e toolwire-sessions- -e tenant /proc/self/mountinfo")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 1 || !strings.Contains(lines[0], " "+own+" ") {
		t.Errorf("the session's temp mounts:\n%s\nwant only its own temp file system on %s", out, own)
	}
	if strings.Contains(out, "tenant") {
		t.Errorf("the session sees another session's temp directory:\n%s", out)
	}
	host, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"toolwire-tenant-a-1", "toolwire-tenant-b-2", "toolwire-mine-3"} {
		if !strings.Contains(string(host), name) {
			t.Errorf("the service lost the mount %s", name)
		}
	}
}
