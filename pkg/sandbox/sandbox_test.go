package sandbox_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolwire/toolwire/internal/testkit"
	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

func TestMain(m *testing.M) {
	sandbox.RunChildIfRequested()
	if r := os.Getenv(claimHelperEnv); r != "" {
		claimHelper(r)
	}
	if err := sandbox.BecomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(sandboxtest.Main(m))
}

// configs are the policies most tests run under.
var configs = map[string]sandbox.Config{
	"landlock": {},
	"none":     {Backend: sandbox.BackendNone, Network: sandbox.NetworkHost},
}

func newRunner(t testing.TB, cfg sandbox.Config) *sandbox.Runner {
	t.Helper()
	r, err := sandbox.NewRunner(cfg, sandboxtest.Dir(t), filepath.Join(sandboxtest.Dir(t), "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// run runs a bash script and returns its merged output and exit code.
func run(t testing.TB, r *sandbox.Runner, script string, env ...string) (string, int) {
	t.Helper()
	p, err := r.Start(context.Background(), sandbox.Cmd{Args: []string{"/bin/bash", "-c", script}, Env: env})
	if err != nil {
		t.Fatalf("start %q: %v", script, err)
	}
	out, err := io.ReadAll(p.Output())
	p.Output().Close()
	if err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

func TestOutputAndExitCode(t *testing.T) {
	cases := []struct {
		name, script, want string
		code               int
	}{
		{"merged in write order", "for i in 1 2 3; do echo out$i; echo err$i >&2; done", "out1\nerr1\nout2\nerr2\nout3\nerr3\n", 0},
		{"exit status", "echo partial; exit 3", "partial\n", 3},
		{"killed by signal", "kill -9 $$", "", 137},
		{"stderr via /dev/stderr", "echo to-err > /dev/stderr", "to-err\n", 0},
		{"dev null", "echo gone > /dev/null; echo kept", "kept\n", 0},
	}
	for cfgName, cfg := range configs {
		r := newRunner(t, cfg)
		for _, c := range cases {
			t.Run(cfgName+"/"+c.name, func(t *testing.T) {
				out, code := run(t, r, c.script)
				if out != c.want || code != c.code {
					t.Errorf("got %q exit %d, want %q exit %d", out, code, c.want, c.code)
				}
			})
		}
	}
}

func TestStdin(t *testing.T) {
	r := newRunner(t, sandbox.Config{})
	p, err := r.Start(context.Background(), sandbox.Cmd{Args: []string{"cat"}, Stdin: strings.NewReader("fed via stdin")})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p.Output())
	p.Output().Close()
	if code, _ := p.Wait(); code != 0 || string(out) != "fed via stdin" {
		t.Fatalf("got %q exit %d", out, code)
	}
}

// treeScript starts sleepers that escape the process group in every usual
// way, prints their pids and then waits.
const treeScript = `
sleep 1001 & echo $!
setsid sleep 1002 & echo $!
( sleep 1003 & echo $! )
( setsid bash -c 'sleep 1004 & echo $!; wait' & )
nohup sleep 1005 >/dev/null 2>&1 & echo $!
echo ready
wait`

// readPids reads pids from out until "ready".
func readPids(t *testing.T, out io.Reader) []int {
	t.Helper()
	var pids []int
	buf := make([]byte, 0, 256)
	one := make([]byte, 1)
	for {
		n, err := out.Read(one)
		if n == 1 && one[0] != '\n' {
			buf = append(buf, one[0])
			continue
		}
		if err != nil {
			t.Fatalf("output ended early: %v (%q)", err, buf)
		}
		line := string(buf)
		buf = buf[:0]
		if line == "ready" {
			return pids
		}
		pid, err := strconv.Atoi(line)
		if err != nil {
			t.Fatalf("bad line %q", line)
		}
		pids = append(pids, pid)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}

func TestKillTree(t *testing.T) {
	for cfgName, cfg := range configs {
		t.Run(cfgName, func(t *testing.T) {
			r := newRunner(t, cfg)
			p, err := r.Start(context.Background(), sandbox.Cmd{Args: []string{"/bin/bash", "-c", treeScript}})
			if err != nil {
				t.Fatal(err)
			}
			pids := readPids(t, p.Output())
			if len(pids) < 4 {
				t.Fatalf("pids %v", pids)
			}
			p.Kill()
			p.Kill() // idempotent
			if _, err := io.ReadAll(p.Output()); err != nil {
				t.Fatal(err)
			}
			p.Output().Close()
			for _, pid := range pids {
				if alive(pid) {
					t.Errorf("pid %d survived Kill", pid)
				}
			}
			if code, _ := p.Wait(); code != 137 {
				t.Errorf("exit %d, want 137", code)
			}
			if left := sandboxtest.WaitNoDescendants(5 * time.Second); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

// Calls of a runner reuse the cgroups of calls before them that ended on
// their own; a call killed through its cgroup must not pass anything on to
// the calls after it (the kernel may kill processes cloned into a cgroup
// that was killed before).
func TestCallsAfterKilledCallsRun(t *testing.T) {
	for cfgName, cfg := range configs {
		t.Run(cfgName, func(t *testing.T) {
			r := newRunner(t, cfg)
			for i := range 12 {
				switch i % 3 {
				case 0: // killed while its tree runs
					p, err := r.Start(context.Background(), sandbox.Cmd{Args: []string{"/bin/bash", "-c", "sleep 30 & sleep 30"}})
					if err != nil {
						t.Fatal(err)
					}
					p.Kill()
					if code, _ := p.Wait(); code != 137 {
						t.Fatalf("call %d: killed call exited %d, want 137", i, code)
					}
					p.Output().Close()
				case 1: // leaves a child behind, which dies with it
					if out, code := run(t, r, "sleep 30 & echo left"); out != "left\n" || code != 0 {
						t.Fatalf("call %d: got %q exit %d", i, out, code)
					}
				default:
					if out, code := run(t, r, fmt.Sprintf("echo %d", i)); out != fmt.Sprintf("%d\n", i) || code != 0 {
						t.Fatalf("call %d: got %q exit %d", i, out, code)
					}
				}
			}
			if left := sandboxtest.WaitNoDescendants(5 * time.Second); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

func TestWaitEndsLeftovers(t *testing.T) {
	r := newRunner(t, sandbox.Config{})
	out, code := run(t, r, "sleep 1000 & setsid sleep 1000 & echo started")
	if out != "started\n" || code != 0 {
		t.Fatalf("got %q exit %d", out, code)
	}
	if left := sandboxtest.WaitNoDescendants(5 * time.Second); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
}

func TestCloseKillsEverything(t *testing.T) {
	r, err := sandbox.NewRunner(sandbox.Config{}, sandboxtest.Dir(t), sandboxtest.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	var procs []*sandbox.Process
	for range 5 {
		p, err := r.Start(context.Background(), sandbox.Cmd{Args: []string{"/bin/bash", "-c", treeScript}})
		if err != nil {
			t.Fatal(err)
		}
		readPids(t, p.Output())
		procs = append(procs, p)
	}
	r.Close()
	r.Close()
	for _, p := range procs {
		p.Output().Close()
		if code, _ := p.Wait(); code != 137 {
			t.Errorf("exit %d", code)
		}
	}
	if _, err := r.Start(context.Background(), sandbox.Cmd{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("start after close: %v", err)
	}
	if left := sandboxtest.WaitNoDescendants(5 * time.Second); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// TestReaperLeavesOtherChildren runs plain os/exec children while sandboxed
// calls leave orphans for the reaper: every exec child must still get its
// own exit status.
func TestReaperLeavesOtherChildren(t *testing.T) {
	r := newRunner(t, sandbox.Config{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range 20 {
			run(t, r, "( sleep 0.01 & ); ( setsid sleep 0.01 & ); sleep 0.005")
		}
	}()
	go func() {
		defer wg.Done()
		for range 40 {
			err := exec.Command("/bin/sh", "-c", "sleep 0.003; exit 7").Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 7 {
				t.Errorf("os/exec child: %v", err)
			}
		}
	}()
	wg.Wait()
	if left := sandboxtest.WaitNoDescendants(5 * time.Second); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// TestOrphanReapedWhileItsCallRuns leaves an orphan that ends while its
// call still runs. SIGCHLD is not watched while no orphan is about, so a
// check of the running call must find the orphan, turn the watch on and
// reap it when it ends, not when the call does; once the call is gone
// the watch goes off again, and a call that leaves no orphan does not
// turn it on.
func TestOrphanReapedWhileItsCallRuns(t *testing.T) {
	sandbox.SetWatchLinger(t, 5*time.Second)
	r := newRunner(t, sandbox.Config{})
	p, err := r.Start(context.Background(), sandbox.Cmd{Args: []string{"/bin/bash", "-c", "( sleep 0.3 & echo $! ); exec sleep 60"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.Kill()
		p.Output().Close()
	}()
	line, err := bufio.NewReader(p.Output()).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the orphan to be reaped", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", orphan))
		return errors.Is(err, os.ErrNotExist)
	})
	if !sandbox.WatchingChildren() {
		t.Error("SIGCHLD not watched with an orphan seen moments ago")
	}
	if err := unix.Kill(p.Pid(), 0); err != nil {
		t.Fatalf("the call ended before its orphan was reaped: %v", err)
	}

	sandbox.SetWatchLinger(t, 10*time.Millisecond)
	p.Kill()
	if code, _ := p.Wait(); code != 137 {
		t.Errorf("killed call exited %d, want 137", code)
	}
	testkit.WaitFor(t, 10*time.Second, "SIGCHLD to be unwatched", func() bool { return !sandbox.WatchingChildren() })
	if out, code := run(t, r, "echo done"); out != "done\n" || code != 0 {
		t.Fatalf("got %q exit %d", out, code)
	}
	if sandbox.WatchingChildren() {
		t.Error("a call without orphans turned SIGCHLD watching on")
	}
}

func TestLandlock(t *testing.T) {
	outside := t.TempDir()
	os.Chmod(outside, 0o777)
	os.Chmod(filepath.Dir(outside), 0o755)
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("top secret"), 0o644)
	ws := sandboxtest.Dir(t)
	r, err := sandbox.NewRunner(sandbox.Config{}, ws, filepath.Join(sandboxtest.Dir(t), "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cases := []struct {
		name, script, want string
		code               int
	}{
		{"write workspace", "echo hi > f && cat f", "hi\n", 0},
		{"write temp dir", `echo hi > "$TMPDIR/f" && cat "$TMPDIR/f"`, "hi\n", 0},
		{"write outside", "echo hi > " + outside + "/new", "Permission denied", 1},
		{"read outside", "cat " + outside + "/secret.txt", "Permission denied", 1},
		{"list outside", "ls " + outside, "Permission denied", 2},
		{"read system", "head -c 4 /etc/passwd", "root", 0},
		{"shadow not listed", "cat /etc/shadow", "Permission denied", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, code := run(t, r, c.script)
			if !strings.Contains(out, c.want) || code != c.code {
				t.Errorf("got %q exit %d, want %q exit %d", out, code, c.want, c.code)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Error("file written outside the workspace")
	}
}

func TestNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello from host\n"))
			c.Close()
		}
	}()
	defer wg.Wait()
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && cat <&3", port)
	cases := map[string]struct {
		cfg  sandbox.Config
		want string
		code int
	}{
		// Loopback is up in the private namespace, but nobody listens there.
		"none": {sandbox.Config{}, "Connection refused", 1},
		"host": {sandbox.Config{Network: sandbox.NetworkHost}, "hello from host", 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			out, code := run(t, newRunner(t, c.cfg), script)
			if !strings.Contains(out, c.want) || code != c.code {
				t.Errorf("got %q exit %d, want %q exit %d", out, code, c.want, c.code)
			}
		})
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("TOOLWIRE_TEST_SECRET", "s3cr3t-value")
	t.Setenv("LC_TOOLWIRE_TEST", "kept")
	t.Setenv("SHELL", "/usr/bin/zsh") // not in the allowlist: the runner's own SHELL
	r := newRunner(t, sandbox.Config{})
	out, _ := run(t, r, "env", "EXTRA=given")
	if strings.Contains(out, "s3cr3t") {
		t.Errorf("secret leaked into %q", out)
	}
	for _, want := range []string{"EXTRA=given", "LC_TOOLWIRE_TEST=kept", "HOME=" + r.TempDir(), "TMPDIR=" + r.TempDir(), "PATH=", "SHELL=/bin/bash\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("env lacks %q:\n%s", want, out)
		}
	}
}

func TestUnprivilegedUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	r := newRunner(t, sandbox.Config{})
	out, _ := run(t, r, "id -u; id -G")
	if out != "65534\n65534\n" {
		t.Errorf("ids %q", out)
	}
	if r.User() != "nobody" {
		t.Errorf("user %q", r.User())
	}
}

func TestLimits(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 needed")
	}
	r := newRunner(t, sandbox.Config{Limits: sandbox.Limits{
		OpenFiles: 64, FileSize: 4096, Processes: 16, Memory: 64 << 20, CPUTime: time.Second,
	}})
	cases := []struct {
		name, script, want string
		code               int
	}{
		{"open files", "ulimit -n; ulimit -Hn", "64\n64\n", 0},
		// bash reports the SIGXFSZ of head itself; the size is what counts.
		{"file size", "head -c 10000 /dev/zero > big; echo $?; stat -c %s big", "153\n4096\n", 0},
		{"processes", `python3 -c '
import os, time
n = 0
try:
    for _ in range(100):
        if os.fork() == 0:
            time.sleep(3); os._exit(0)
        n += 1
except OSError:
    pass
print("forked", "under" if n < 16 else "over")'`, "forked under\n", 0},
		{"memory", "python3 -c 'b = bytearray(512 << 20); print(len(b))'", "", -1},
		{"cpu time", "while :; do :; done", "", 152}, // SIGXCPU
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, code := run(t, r, c.script)
			if c.code == -1 {
				if code == 0 {
					t.Errorf("over the memory limit but exit 0: %q", out)
				}
				return
			}
			if !strings.HasSuffix(out, c.want) || code != c.code {
				t.Errorf("got %q exit %d, want %q exit %d", out, code, c.want, c.code)
			}
		})
	}
}

// A limit a child could only get by raising its hard limit would make every
// call fail; Check says so at start instead.
func TestCheckRefusesLimitsAboveTheHardLimit(t *testing.T) {
	var own unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &own); err != nil {
		t.Fatal(err)
	}
	if own.Max == unix.RLIM_INFINITY || own.Max >= 1<<30 {
		t.Skipf("open files hard limit %d leaves nothing above it to ask for", own.Max)
	}
	err := sandbox.Check(sandbox.Config{Limits: sandbox.Limits{OpenFiles: int(own.Max) + 1}})
	if err == nil || !strings.Contains(err.Error(), "open files limit") || !strings.Contains(err.Error(), fmt.Sprint(own.Max)) {
		t.Fatalf("Check with an open files limit over the hard limit %d: %v", own.Max, err)
	}
	if err := sandbox.Check(sandbox.Config{Limits: sandbox.Limits{OpenFiles: int(own.Max)}}); err != nil {
		t.Fatalf("Check with the hard limit itself: %v", err)
	}
}

func TestDenials(t *testing.T) {
	r := newRunner(t, sandbox.Config{})
	outside := t.TempDir()
	cases := map[string]sandbox.Cmd{
		"dir outside":     {Args: []string{"true"}, Dir: outside},
		"program outside": {Args: []string{filepath.Join(outside, "prog")}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := r.Start(context.Background(), c)
			var pe *sandbox.PolicyError
			if !errors.As(err, &pe) || !strings.Contains(pe.Msg, outside) {
				t.Fatalf("got %v, want a policy error naming %s", err, outside)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	cases := map[string]struct {
		cfg     sandbox.Config
		want    string
		setting sandbox.Setting // the setting the error names, for the flag hint
	}{
		"defaults":         {sandbox.Config{}, "", ""},
		"bad backend":      {sandbox.Config{Backend: "chroot"}, "unknown backend", sandbox.SettingBackend},
		"bad network":      {sandbox.Config{Network: "bridge"}, "unknown network", sandbox.SettingNetwork},
		"missing path":     {sandbox.Config{ReadWritePaths: []string{"/does/not/exist"}}, "/does/not/exist", sandbox.SettingPaths},
		"unknown user":     {sandbox.Config{RunAsUser: "no-such-user-xyz"}, "no-such-user-xyz", sandbox.SettingUser},
		"negative limit":   {sandbox.Config{Limits: sandbox.Limits{OpenFiles: -1}}, "open files limit is negative", sandbox.SettingLimits},
		"one process":      {sandbox.Config{Limits: sandbox.Limits{Processes: 1}}, "processes limit of 1", ""},
		"no landlock asks": {sandbox.Config{Backend: sandbox.BackendNone, Network: sandbox.NetworkHost}, "", ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := sandbox.Check(c.cfg)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if c.setting == sandbox.SettingUser && os.Geteuid() != 0 {
				if err != nil {
					t.Fatalf("run-as is ignored without root, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			got := sandbox.SettingsOf(err)
			switch {
			case c.setting == "" && len(got) > 0:
				t.Errorf("error %q is about settings %q, want none", err, got)
			case c.setting != "" && !slices.Contains(got, c.setting):
				t.Errorf("error %q is about settings %q, want %q among them", err, got, c.setting)
			}
		})
	}
}

func TestEnforced(t *testing.T) {
	cases := map[string]struct {
		cfg       sandbox.Config
		want, not []string
	}{
		"landlock": {sandbox.Config{Limits: sandbox.Limits{OpenFiles: 100}},
			[]string{"landlock_fs", "network_isolation", "process_tree", "resource_limits", "clean_environment", "no_new_privs"}, nil},
		"none": {sandbox.Config{Backend: sandbox.BackendNone, Network: sandbox.NetworkHost},
			[]string{"process_tree", "clean_environment"}, []string{"landlock_fs", "network_isolation", "resource_limits"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := strings.Join(newRunner(t, c.cfg).Enforced(), " ")
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %s", got, w)
				}
			}
			for _, w := range c.not {
				if strings.Contains(got, w) {
					t.Errorf("%q has %s", got, w)
				}
			}
		})
	}
}

func TestConcurrentStarts(t *testing.T) {
	r := newRunner(t, sandbox.Config{})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, code := run(t, r, fmt.Sprintf("echo %d", i))
			if out != fmt.Sprintf("%d\n", i) || code != 0 {
				t.Errorf("got %q exit %d", out, code)
			}
		}()
	}
	wg.Wait()
}

func BenchmarkBashTrue(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/bash", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range []struct {
		name string
		cfg  sandbox.Config
	}{
		{"sandbox-off", sandbox.Config{Backend: sandbox.BackendNone, Network: sandbox.NetworkHost}},
		{"sandbox-on", sandbox.Config{}},
		{"sandbox-on-limits", sandbox.Config{Limits: sandbox.Limits{OpenFiles: 1024, FileSize: 1 << 30, Processes: 256, Memory: 1 << 30}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := newRunner(b, c.cfg)
			for b.Loop() {
				if _, code := run(b, r, "true"); code != 0 {
					b.Fatal(code)
				}
			}
		})
	}
}

// TestSpawnerFileTableStaysSmall: the thread that starts a session's
// processes keeps a file table of its own, so that starting a process
// does not copy and close every descriptor the service holds open for its
// other sessions.
func TestSpawnerFileTableStaysSmall(t *testing.T) {
	var held []*os.File
	defer func() {
		for _, f := range held {
			f.Close()
		}
	}()
	for range 300 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, f)
	}
	for cfgName, cfg := range configs {
		t.Run(cfgName, func(t *testing.T) {
			r := newRunner(t, cfg)
			// The descriptors a call needs reach it, from the service's table.
			if out, code := run(t, r, "echo out; echo err >&2; ls /proc/self/fd"); out != "out\nerr\n0\n1\n2\n3\n" || code != 0 {
				t.Fatalf("got %q exit %d, want the two lines and descriptors 0-3 (3: ls's directory)", out, code)
			}
			ents, err := sandbox.SpawnerFiles(r)
			if err != nil {
				t.Fatal(err)
			}
			// 0-2, the runtime's poller (2) and the socket to the service,
			// all low: fork copies the table up to its highest descriptor.
			if len(ents) > 8 {
				t.Fatalf("the spawner thread holds %d descriptors with 300 more open in the service; want its own few", len(ents))
			}
			for _, e := range ents {
				if n, _ := strconv.Atoi(e.Name()); n > 64 {
					t.Fatalf("the spawner thread holds descriptor %d; want only low ones", n)
				}
			}
		})
	}
	// Where the spawner may not have a table of its own, it shares the
	// service's, and processes still start with their own descriptors.
	t.Run("shared", func(t *testing.T) {
		sandbox.ShareSpawnerFiles(t)
		r := newRunner(t, sandbox.Config{})
		if out, code := run(t, r, "echo out; echo err >&2"); out != "out\nerr\n" || code != 0 {
			t.Fatalf("got %q exit %d", out, code)
		}
		ents, err := sandbox.SpawnerFiles(r)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) < 300 {
			t.Fatalf("the spawner thread holds %d descriptors; want the service's table", len(ents))
		}
	})
}

// After a burst of calls at once a runner keeps a call directory for each,
// so that the next burst makes and removes none; once the burst is over it
// keeps its usual two again.
func TestCallDirectoriesOfABurstAreKept(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("call cgroups need root")
	}
	r := newRunner(t, sandbox.Config{})
	if _, _, ok := sandbox.CallDirs(r); !ok {
		t.Fatal("the runner has no cgroup as root")
	}
	const burst = 8
	runBurst := func() {
		t.Helper()
		// All of them run at once: each waits for its stdin to end, which
		// comes once all have started.
		procs := make([]*sandbox.Process, burst)
		writers := make([]*io.PipeWriter, burst)
		defer func() {
			for _, w := range writers {
				w.Close()
			}
		}()
		for i := range procs {
			var pr *io.PipeReader
			pr, writers[i] = io.Pipe()
			p, err := r.Start(context.Background(), sandbox.Cmd{Args: []string{"/bin/sh", "-c", "read x"}, Stdin: pr})
			if err != nil {
				t.Fatal(err)
			}
			procs[i] = p
		}
		for _, w := range writers {
			w.Close()
		}
		for _, p := range procs {
			io.Copy(io.Discard, p.Output())
			p.Output().Close()
			if code, err := p.Wait(); code != 1 || err != nil {
				t.Fatalf("exit %d, %v", code, err)
			}
		}
	}
	// Wait returns before the directories are taken back.
	sparesAfter := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			spares, _, _ := sandbox.CallDirs(r)
			if spares == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d spare call directories, want %d", spares, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	runBurst()
	sparesAfter(burst)
	_, made, _ := sandbox.CallDirs(r)
	runBurst()
	sparesAfter(burst)
	if _, again, _ := sandbox.CallDirs(r); again != made {
		t.Fatalf("the second burst made %d call directories, want none", again-made)
	}
	sandbox.EndBurst(r)
	sparesAfter(2)
}

// A call killed while its process-limit watcher runs: the call's counter
// files are closed only once the watcher has stopped reading them (the
// race detector checks it).
func TestAbortWhileWatchingProcesses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("call cgroups need root")
	}
	r := newRunner(t, sandbox.Config{Session: sandbox.SessionBounds{Processes: 64}})
	if r.Bounds().Processes != 64 {
		t.Fatalf("session bounds %+v, want a process bound as root", r.Bounds())
	}
	for range 3 {
		p, err := r.Start(context.Background(), sandbox.Cmd{Args: []string{"sleep", "5"}})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(120 * time.Millisecond) // past the watcher's first read
		p.Abort()
		io.Copy(io.Discard, p.Output())
		p.Output().Close()
		if code, _ := p.Wait(); code != 137 {
			t.Fatalf("exit %d, want 137", code)
		}
	}
	r.Close() // waits for the calls' directories to be taken back
}

// v1Cgroups returns the pids and memory paths of a /proc cgroup listing.
func v1Cgroups(listing []byte) map[string]string {
	all := sandbox.CgroupPaths(listing)
	dirs := map[string]string{}
	for _, c := range []string{"pids", "memory"} {
		if p, ok := all[c]; ok {
			dirs[c] = p
		}
	}
	return dirs
}

// A call's process is in the call's cgroup v1 directories from its first
// instruction, with no stop at its exec (none of the limits is an rlimit):
// the spawner thread forks it from inside them, and is back in the
// service's own directories once the process has started.
func TestCallsStartInTheirV1Cgroups(t *testing.T) {
	needRoot(t)
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	own := v1Cgroups(self)
	if len(own) == 0 {
		t.Skip("no cgroup v1 pids or memory hierarchy")
	}
	pool := newPool(t, testIDs)
	cfg := sandbox.Config{Limits: sandbox.Limits{Processes: 64, Memory: 256 << 20}}
	runners := map[string]func() *sandbox.Runner{
		"service user": func() *sandbox.Runner { return newRunner(t, cfg) },
		"session user": func() *sandbox.Runner { return sessionRunner(t, pool, cfg, true) },
	}
	for name, newR := range runners {
		t.Run(name, func(t *testing.T) {
			r := newR()
			for range 4 {
				out, code := run(t, r, "cat /proc/self/cgroup")
				if code != 0 {
					t.Fatalf("exit %d: %s", code, out)
				}
				got := v1Cgroups([]byte(out))
				for c, dir := range own {
					call := got[c]
					rel, ok := strings.CutPrefix(call, strings.TrimSuffix(dir, "/")+"/toolwire-")
					if !ok || !strings.HasPrefix(filepath.Base(rel), "c") {
						t.Fatalf("the process is in %s cgroup %q, want a call directory under %q", c, call, dir)
					}
				}
				spawner, err := sandbox.SpawnerCgroups(r)
				if err != nil {
					t.Fatal(err)
				}
				if back := v1Cgroups(spawner); !maps.Equal(back, own) {
					t.Fatalf("the spawner thread is in %v after the start, want the service's %v", back, own)
				}
			}
		})
	}
}

// TestNoSubvolumes runs btrfs-progs in a workspace on btrfs: with
// NoSubvolumes, making a subvolume or a snapshot fails with EPERM, under
// either backend, while directories are still made; without it, the same
// command makes the subvolume.
func TestNoSubvolumes(t *testing.T) {
	fs := sandboxtest.Btrfs(t, 256<<20, false)
	for name, base := range configs {
		t.Run(name, func(t *testing.T) {
			ws := filepath.Join(fs, name)
			if err := os.Mkdir(ws, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(ws, 0o777); err != nil {
				t.Fatal(err)
			}
			newIn := func(cfg sandbox.Config) *sandbox.Runner {
				r, err := sandbox.NewRunner(cfg, ws, filepath.Join(sandboxtest.Dir(t), "tmp"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(r.Close)
				return r
			}
			cfg := base
			cfg.NoSubvolumes = true
			out, code := run(t, newIn(cfg), "mkdir d && btrfs subvolume create sub; echo create=$?; btrfs subvolume snapshot . snap; echo snapshot=$?; ls")
			if !strings.Contains(out, "create=1") || !strings.Contains(out, "snapshot=1") ||
				!strings.Contains(out, "Operation not permitted") || strings.Contains(out, "sub\n") || !strings.Contains(out, "d\n") || code != 0 {
				t.Fatalf("with NoSubvolumes:\n%s(exit %d)", out, code)
			}
			out, _ = run(t, newIn(base), "btrfs subvolume create sub; echo create=$?")
			if !strings.Contains(out, "create=0") {
				t.Fatalf("without NoSubvolumes:\n%s", out)
			}
		})
	}
}

// TestWaitingHoldsNoThread: a running command costs no thread blocked in
// waitid; the poller tells when it ends. Each thread's current system
// call is in /proc/self/task/TID/syscall.
func TestWaitingHoldsNoThread(t *testing.T) {
	if fd, err := unix.PidfdOpen(os.Getpid(), 0); err != nil {
		t.Skipf("no pidfds here (%v): the wait blocks, by design", err)
	} else {
		unix.Close(fd)
	}
	r := newRunner(t, configs["none"])
	const n = 16
	var procs []*sandbox.Process
	for range n {
		p, err := r.Start(context.Background(), sandbox.Cmd{Args: []string{"sleep", "30"}})
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	// Every process's wait has begun well within this; a blocking wait
	// would show up at once and stay.
	most := 0
	for range 50 {
		most = max(most, threadsIn(t, unix.SYS_WAITID))
		time.Sleep(10 * time.Millisecond)
	}
	for _, p := range procs {
		p.Abort()
		p.Output().Close()
		if code, err := p.Wait(); err != nil || code != 128+int(unix.SIGKILL) {
			t.Errorf("aborted sleep: exit %d, %v; want %d", code, err, 128+int(unix.SIGKILL))
		}
	}
	if most > 0 {
		t.Errorf("%d threads sat in waitid while %d commands ran, want none", most, n)
	}
}

// threadsIn counts this process's threads that are in system call nr.
func threadsIn(t *testing.T, nr int) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	in := 0
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/syscall")
		if err != nil {
			continue // the thread ended
		}
		if f := strings.Fields(string(b)); len(f) > 0 && f[0] == strconv.Itoa(nr) {
			in++
		}
	}
	return in
}
