package main_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/rpcerr"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// containerCgroup is a cgroup the test makes to run toolsvc in, with a
// pids and a memory limit as a container runtime would give it: cgroup v1
// directories in the pids and memory hierarchies, or one cgroup v2
// directory.
type containerCgroup struct {
	dirs []string // the directories toolsvc joins
}

// newContainerCgroup makes the cgroup, or skips the test where this
// process cannot.
func newContainerCgroup(t *testing.T, tasks int, memory int64) *containerCgroup {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a cgroup needs root")
	}
	name := fmt.Sprintf("toolwire-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "_"))
	c := &containerCgroup{}
	var fs syscall.Statfs_t
	if syscall.Statfs("/sys/fs/cgroup", &fs) == nil && fs.Type == 0x63677270 { // cgroup2 at the top: v2 only
		d := filepath.Join("/sys/fs/cgroup", name)
		ctrl, _ := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control")
		if !bytes.Contains(ctrl, []byte("pids")) || !bytes.Contains(ctrl, []byte("memory")) {
			t.Skip("the cgroup v2 root does not pass the pids and memory controllers on")
		}
		c.make(t, d)
		c.write(t, d, "pids.max", strconv.Itoa(tasks))
		c.write(t, d, "memory.max", strconv.FormatInt(memory, 10))
		c.write(t, d, "cgroup.subtree_control", "+pids +memory")
		return c
	}
	for _, h := range []string{"pids", "memory"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", h, "cgroup.procs")); err != nil {
			t.Skipf("no cgroup v1 %s hierarchy at /sys/fs/cgroup/%s", h, h)
		}
	}
	p, m := filepath.Join("/sys/fs/cgroup/pids", name), filepath.Join("/sys/fs/cgroup/memory", name)
	c.make(t, p)
	c.make(t, m)
	c.write(t, p, "pids.max", strconv.Itoa(tasks))
	c.write(t, m, "memory.limit_in_bytes", strconv.FormatInt(memory, 10))
	return c
}

func (c *containerCgroup) make(t *testing.T, d string) {
	t.Helper()
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Skipf("cannot make a cgroup: %v", err)
	}
	c.dirs = append(c.dirs, d)
	t.Cleanup(func() {
		// What the test left (it should be nothing) is killed first.
		for i := 0; i < 100; i++ {
			if len(c.procs()) == 0 {
				break
			}
			for _, pid := range c.procs() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(20 * time.Millisecond)
		}
		removeCgroupTree(d)
	})
}

func (c *containerCgroup) write(t *testing.T, d, file, value string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(d, file), []byte(value), 0); err != nil {
		t.Fatalf("cgroup %s/%s: %v", d, file, err)
	}
}

// procs lists every process in the cgroup and below it.
func (c *containerCgroup) procs() []int {
	seen := map[int]bool{}
	var out []int
	for _, d := range c.dirs {
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
					seen[pid] = true
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	return out
}

// command returns a command that runs toolsvc with args inside the cgroup.
func (c *containerCgroup) command(args ...string) *exec.Cmd {
	var join strings.Builder
	for _, d := range c.dirs {
		fmt.Fprintf(&join, "echo $$ > %q/cgroup.procs && ", d)
	}
	return exec.Command("/bin/sh", append([]string{"-c", join.String() + `exec "$0" "$@"`, toolsvcBin}, args...)...)
}

func removeCgroupTree(d string) {
	subs, _ := os.ReadDir(d)
	for _, s := range subs {
		if s.IsDir() {
			removeCgroupTree(filepath.Join(d, s.Name()))
		}
	}
	for i := 0; i < 100 && syscall.Rmdir(d) == syscall.EBUSY; i++ {
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeBoundsAForkAndAMemoryBombToItsSession runs toolsvc serve in a
// cgroup with a pids and a memory limit, as a container would, and sets
// off a fork bomb and then a memory bomb in one session while another
// session keeps running calls: each bomb ends in its own call with a
// result that names the session's limit, toolsvc keeps serving, the other
// session's calls all succeed, and no process of the bombs is left.
func TestServeBoundsAForkAndAMemoryBombToItsSession(t *testing.T) {
	cg := newContainerCgroup(t, 1200, 1<<30)
	root := sandboxtest.Dir(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := cg.command("serve", "--listen", addr, "--insecure", "--root", root, "--log-format", "text",
		"--session-processes", "300", "--session-memory", "256M", "--max-sessions", "50")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		if t.Failed() {
			t.Logf("toolsvc logs:\n%s", logs.String())
		}
	})
	waitServing(t, addr)

	call := func(id, command string) toolResult {
		in := fmt.Sprintf(`{"type":"tool_use","id":%q,"name":"Bash","input":{"command":%q,"timeout":60000}}`, id, command)
		rs := runCall(t, in, "--insecure", "--addr", addr)
		if len(rs) != 1 {
			t.Fatalf("%s: %d results", id, len(rs))
		}
		return rs[0]
	}

	// The other session: calls one after another until the bombs are over.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var others []toolResult
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			others = append(others, call(fmt.Sprintf("other%d", i), fmt.Sprintf("echo call %d", i)))
		}
	}()

	bombs := []struct {
		name, command, want string
	}{
		{"fork", `f() { f | f; }; f`, "The session's process limit (300) was reached; the command and every process it started were killed."},
		{"memory", `tail /dev/zero`, "The session's memory limit (256 MiB) was reached: the kernel killed a process for lack of memory."},
	}
	for _, b := range bombs {
		r := call(b.name, b.command)
		text, _ := r.Content.(string)
		t.Logf("%s bomb: %q", b.name, text)
		if r.IsError == nil || !*r.IsError || !strings.Contains(text, b.want) {
			t.Errorf("%s bomb: is_error %v, content %q; want an error that says %q", b.name, deref(r.IsError), text, b.want)
		}
	}
	close(stop)
	wg.Wait()

	select {
	case err := <-exited:
		t.Fatalf("toolsvc exited during the bombs: %v", err)
	default:
	}
	t.Logf("the other session ran %d calls meanwhile", len(others))
	if len(others) == 0 {
		t.Fatal("the other session ran no call")
	}
	for i, r := range others {
		if want := fmt.Sprintf("call %d", i); r.Content != want || (r.IsError != nil && *r.IsError) {
			t.Errorf("other session's call %d: %+v, want %q", i, r, want)
		}
	}
	if r := call("after", "echo still serving"); r.Content != "still serving" {
		t.Errorf("after the bombs: %+v", r)
	}
	// Only toolsvc itself is left in its cgroup.
	if procs := cg.procs(); len(procs) != 1 || procs[0] != cmd.Process.Pid {
		var left []string
		for _, pid := range procs {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			left = append(left, fmt.Sprintf("%d %s", pid, strings.TrimSpace(string(comm))))
		}
		t.Errorf("processes in toolsvc's cgroup after the bombs: %v, want only toolsvc (%d)", left, cmd.Process.Pid)
	}
}

// openStream sends Open on a new Execute stream and returns the first
// event or the error that ends the stream.
func openStream(t *testing.T, conn *grpc.ClientConn) (executorv1.ExecutorService_ExecuteClient, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := executorv1.NewExecutorServiceClient(conn).Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{ClientName: "test"}}}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	return stream, err
}

// Past --max-sessions-per-client and --max-sessions, Open gets
// RESOURCE_EXHAUSTED with the reason; a closed session makes room again.
func TestServeSessionLimits(t *testing.T) {
	for _, tc := range []struct {
		name, flag, reason string
	}{
		{"per executor", "--max-sessions", "SESSION_LIMIT"},
		{"per client", "--max-sessions-per-client", "CLIENT_SESSION_LIMIT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := startServe(t, sandboxtest.Dir(t), tc.flag, "2")
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			first, err := openStream(t, conn)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := openStream(t, conn); err != nil {
				t.Fatal(err)
			}
			_, err = openStream(t, conn)
			if status.Code(err) != codes.ResourceExhausted || rpcerr.Reason(err) != tc.reason {
				t.Fatalf("third open: %v (reason %q), want ResourceExhausted with reason %s", err, rpcerr.Reason(err), tc.reason)
			}
			// Closing the first session makes room.
			if err := first.CloseSend(); err != nil {
				t.Fatal(err)
			}
			for {
				if _, err := first.Recv(); err != nil {
					break
				}
			}
			if _, err := openStream(t, conn); err != nil {
				t.Fatalf("open after a close: %v", err)
			}
		})
	}
}

// toolsvc raises its open-file limit to what --max-sessions needs, and
// refuses to start, saying what to change, when it cannot.
func TestServeSizesOpenFilesFromMaxSessions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("raising the hard limit needs root")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("no setpriv to drop CAP_SYS_RESOURCE with")
	}
	root := sandboxtest.Dir(t)
	_, cmd := startServe(t, root, "--max-sessions", "1000")
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var soft int
	for _, line := range strings.Split(string(limits), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			fmt.Sscan(rest, &soft)
		}
	}
	if want := 1024 + 18*1000; soft < want {
		t.Errorf("toolsvc's open-file limit is %d, want at least %d for 1000 sessions", soft, want)
	}
	out, err := exec.Command("/bin/sh", "-c", `ulimit -n 2000 && ulimit -Hn 2000 && exec "$0" --inh-caps=-sys_resource --bounding-set=-sys_resource "$@"`,
		setpriv, toolsvcBin, "serve", "--listen", "127.0.0.1:0", "--insecure", "--root", root, "--max-sessions", "1000").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--max-sessions 1000 needs about 19024 open files, and the limit is 2000") {
		t.Errorf("toolsvc with too few open files: %v\n%s", err, out)
	}
}

// TestServeFitsSessionsToTheUIDRange: a --session-uids range given without
// --max-sessions bounds the sessions (toolsvc starts, serving fewer than
// the default); with an explicit --max-sessions it cannot hold, toolsvc
// refuses to start and says what to change.
func TestServeFitsSessionsToTheUIDRange(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("session users need root")
	}
	root := sandboxtest.Dir(t)
	const uids = "3320000-3321023" // 1,024 ids: for 480 sessions
	startServe(t, root, "--session-uids", uids, "--grace", "0s")

	out, err := exec.Command(toolsvcBin, "serve", "--listen", "127.0.0.1:0", "--insecure", "--root", root,
		"--session-uids", uids, "--max-sessions", "1000").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "holds 1024 ids; the executor needs 2064") || !strings.Contains(string(out), "--session-uids") {
		t.Errorf("--max-sessions 1000 with 1,024 ids: %v\n%s", err, out)
	}
}
