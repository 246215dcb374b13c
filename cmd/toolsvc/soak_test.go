package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/rpcserver"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// soakSessions is how many sessions TestSoakManySessions holds at once.
var soakSessions = envInt("TOOLWIRE_SOAK_SESSIONS", 1000)

// idleThreads is how many threads the Go runtime may keep after a burst
// of work beyond those it had (it does not end idle ones).
const idleThreads = 64

// soakUsage is what the service holds, counted from outside the executor's
// code: what must come back to where it was once every session is over.
type soakUsage struct {
	fds, goroutines, threads, cgroups, mounts, tempDirs, children int
}

func (u soakUsage) String() string {
	return fmt.Sprintf("fds %d, goroutines %d, threads %d, cgroup dirs %d, session mounts %d, temp dirs %d, child processes %d",
		u.fds, u.goroutines, u.threads, u.cgroups, u.mounts, u.tempDirs, u.children)
}

// same reports whether u is back at was. The Go runtime keeps the threads
// it made for bursts of work (it does not end idle ones), so a few more
// threads than before count as the same; a session's spawner thread ends
// with the session, and those of sessions just closed may still have
// been ending when was was measured, so fewer count as the same too.
func (u soakUsage) same(was soakUsage) bool {
	if u.threads <= was.threads+idleThreads {
		u.threads = was.threads
	}
	return u == was
}

func measure(tmp string) soakUsage {
	var u soakUsage
	fds, _ := os.ReadDir("/proc/self/fd")
	u.fds = len(fds)
	u.goroutines = runtime.NumGoroutine()
	tasks, _ := os.ReadDir("/proc/self/task")
	u.threads = len(tasks)
	for _, h := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory", "/sys/fs/cgroup"} {
		matches, _ := filepath.Glob(filepath.Join(h, "*", fmt.Sprintf("toolwire-%d", os.Getpid()), "*"))
		more, _ := filepath.Glob(filepath.Join(h, fmt.Sprintf("toolwire-%d", os.Getpid()), "*"))
		for _, m := range append(matches, more...) {
			if fi, err := os.Stat(m); err == nil && fi.IsDir() {
				u.cgroups++
			}
		}
	}
	u.mounts = sessionMountsUnder(tmp)
	roots, _ := filepath.Glob(filepath.Join(tmp, "toolwire-sessions-*"))
	for _, d := range append(roots, tmp) {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "toolwire-") && !strings.HasPrefix(e.Name(), "toolwire-sessions-") {
				u.tempDirs++
			}
		}
	}
	for _, t := range tasks {
		c, _ := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "children"))
		u.children += len(strings.Fields(string(c)))
	}
	return u
}

// sessionMountsUnder counts the session temp file systems mounted under
// dir in this process's mount namespace (other toolsvc of the machine may
// have theirs elsewhere).
func sessionMountsUnder(dir string) int {
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

// soakSession is one open session of the soak.
type soakSession struct {
	stream executorv1.ExecutorService_ExecuteClient
	cancel context.CancelFunc
}

// openSoak opens a session in workspace ("" for one of its own).
func openSoak(conn *grpc.ClientConn, workspace string) (*soakSession, error) {
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := executorv1.NewExecutorServiceClient(conn).Execute(ctx)
	if err == nil {
		err = stream.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{ClientName: "soak", Workspace: workspace}}})
	}
	if err == nil {
		_, err = stream.Recv() // Hello
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return &soakSession{stream: stream, cancel: cancel}, nil
}

func (s *soakSession) bash(id, command string) (string, error) {
	use := &executorv1.ToolUse{Id: id, Name: "Bash", InputJson: strconv.Quote(command), AssistantMessageId: "m" + id}
	use.InputJson = `{"command":` + strconv.Quote(command) + `}`
	if err := s.stream.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: use}}); err != nil {
		return "", err
	}
	for {
		ev, err := s.stream.Recv()
		if err != nil {
			return "", err
		}
		if r := ev.GetResult(); r != nil && r.GetToolUseId() == id {
			var text strings.Builder
			for _, c := range r.GetContent() {
				text.WriteString(c.GetText().GetText())
			}
			return text.String(), nil
		}
	}
}

func (s *soakSession) close() {
	_ = s.stream.CloseSend()
	for {
		if _, err := s.stream.Recv(); err != nil {
			break
		}
	}
	s.cancel()
}

// TestSoakManySessions runs toolsvc serve (in this process, so that its
// goroutines and threads can be counted) with its default flags, holds
// 1,000 sessions open at once (half of them in one shared workspace, half
// in workspaces of their own), runs a Bash call in each, closes them all,
// and checks that file descriptors, goroutines, threads, cgroup
// directories, session mounts, temp directories and child processes are
// back where they were.
func TestSoakManySessions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the soak runs toolsvc as root, as a deployment does")
	}
	if testing.Short() {
		t.Skip("the soak takes a while")
	}
	dir := sandboxtest.Dir(t)
	tmp, root := filepath.Join(dir, "tmp"), filepath.Join(dir, "root")
	for _, d := range []string{tmp, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(root, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(shared, sandboxtest.NobodyUID, sandboxtest.NobodyGID); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	sock := "unix://" + filepath.Join(dir, "toolsvc.sock")
	ctx, stop := context.WithCancel(context.Background())
	var logs bytes.Buffer
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, []string{"--listen", sock, "--root", root, "--session-dirs", "--log-level", "warn",
			"--max-sessions", strconv.Itoa(soakSessions), "--output-dir", filepath.Join(dir, "outputs")}, &logs)
	}()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) > 0 {
			t.Errorf("toolsvc left %v in its temp dir after it stopped", left)
		}
		if t.Failed() {
			t.Logf("toolsvc logs:\n%s", logs.String())
		}
	}()
	conn, err := grpc.NewClient(sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rpcserver.WaitServing(wctx, conn, "toolwire.executor.v1.ExecutorService"); err != nil {
		t.Fatalf("toolsvc not serving: %v", err)
	}
	// One session first, so that what lives as long as the service
	// (reaper, cgroup group directories, pools) is in the baseline.
	warm, err := openSoak(conn, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := warm.bash("warm", "true"); err != nil {
		t.Fatal(err)
	}
	warm.close()
	before := settle(tmp, soakUsage{}, 2*time.Second)
	start := time.Now()

	sessions := make([]*soakSession, soakSessions)
	run := func(what string, fn func(i int) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, soakSessions)
		next := make(chan int)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					if err := fn(i); err != nil {
						errs <- fmt.Errorf("%s %d: %w", what, i, err)
					}
				}
			}()
		}
		for i := range soakSessions {
			next <- i
		}
		close(next)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	// Half the sessions share a workspace of another owner, which each
	// session's user gets through an id-mapped mount of its own: opens
	// of one shared workspace, 16 at a time, must never fail.
	run("open", func(i int) (err error) {
		sessions[i], err = openSoak(conn, []string{"", "shared"}[i%2])
		return err
	})
	opened := time.Since(start)
	held := measure(tmp)
	run("call", func(i int) error {
		// Each session's mount namespace holds its own temp file system
		// only, not the copies of the others' it was made with.
		out, err := sessions[i].bash(fmt.Sprintf("c%d", i), fmt.Sprintf("echo session %d: $(grep -c ' toolwire-session-tmp ' /proc/self/mountinfo) temp mounts", i))
		if err == nil && out != fmt.Sprintf("session %d: 1 temp mounts", i) {
			err = fmt.Errorf("result %q", out)
		}
		return err
	})
	called := time.Since(start)
	run("close", func(i int) error {
		sessions[i].close()
		return nil
	})
	after := settle(tmp, before, 30*time.Second)
	t.Logf("%d sessions: opened in %v, called by %v, closed by %v", soakSessions, opened.Round(time.Millisecond), called.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	t.Logf("before: %v", before)
	t.Logf("with %d sessions open: %v", soakSessions, held)
	if held.mounts-before.mounts != soakSessions || held.threads-before.threads < soakSessions-idleThreads {
		t.Errorf("with %d sessions open: %v; want a temp mount and a spawner thread each", soakSessions, held)
	}
	if !after.same(before) {
		t.Errorf("after the sessions: %v\nwant what it was before: %v", after, before)
	}
}

// settle waits up to timeout for the usage to come back to want (the
// closing goroutines and threads take a moment) and returns the last one
// measured; a zero want just lets the service settle a moment.
func settle(tmp string, want soakUsage, timeout time.Duration) soakUsage {
	deadline := time.Now().Add(timeout)
	var last soakUsage
	for {
		u := measure(tmp)
		if want == (soakUsage{}) {
			if u == last {
				return u
			}
		} else if u.same(want) {
			return u
		}
		last = u
		if time.Now().After(deadline) {
			return u
		}
		time.Sleep(100 * time.Millisecond)
	}
}
