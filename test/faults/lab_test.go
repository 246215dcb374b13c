package faults_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/internal/testkit"
	"github.com/toolwire/toolwire/pkg/rpcserver"
)

// binaries are the programs under test, built once.
var bins struct {
	once                  sync.Once
	err                   error
	toolsvc, orchestrator string
}

func build(t *testing.T) {
	t.Helper()
	bins.once.Do(func() {
		dir, err := os.MkdirTemp("", "toolwire-faults-bin-")
		if err != nil {
			bins.err = err
			return
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			bins.err = err
			return
		}
		for _, b := range []struct {
			out  *string
			name string
		}{{&bins.toolsvc, "toolsvc"}, {&bins.orchestrator, "orchestrator"}} {
			*b.out = filepath.Join(dir, b.name)
			cmd := exec.Command("go", "build", "-o", *b.out, "./cmd/"+b.name)
			cmd.Dir = "../.."
			if out, err := cmd.CombinedOutput(); err != nil {
				bins.err = fmt.Errorf("build %s: %v\n%s", b.name, err, out)
				return
			}
		}
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
}

// netSeq numbers the hosts of this test process; labTag tells them apart
// from those of another run.
var (
	netSeq atomic.Int32
	labTag = func() string {
		var b [2]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}()
)

// host is a network namespace with its own address, linked to the test's
// namespace by a veth pair whose host end can be cut.
type host struct {
	t       *testing.T
	ns      string // namespace name
	outside string // veth end in the test's namespace
	addr    string // the host's address (inside the namespace)
}

// ip runs the ip command and fails the test on error.
func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newHost makes a namespace at 10.213.<n>.2, reachable from the test's
// namespace through 10.213.<n>.1, and removes it when the test ends.
func newHost(t *testing.T) *host {
	t.Helper()
	n := netSeq.Add(1)
	if n > 250 {
		t.Fatal("too many hosts")
	}
	h := &host{t: t,
		ns:      fmt.Sprintf("twf-%s-%d", labTag, n),
		outside: fmt.Sprintf("twf%s%do", labTag, n),
		addr:    fmt.Sprintf("10.213.%d.2", n),
	}
	inside := fmt.Sprintf("twf%s%di", labTag, n)
	ip(t, "netns", "add", h.ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", h.ns).Run() })
	ip(t, "link", "add", h.outside, "type", "veth", "peer", "name", inside)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", h.outside).Run() })
	ip(t, "link", "set", inside, "netns", h.ns)
	ip(t, "addr", "add", fmt.Sprintf("10.213.%d.1/30", n), "dev", h.outside)
	ip(t, "link", "set", h.outside, "up")
	ip(t, "-n", h.ns, "addr", "add", h.addr+"/30", "dev", inside)
	ip(t, "-n", h.ns, "link", "set", inside, "up")
	ip(t, "-n", h.ns, "link", "set", "lo", "up")
	// While the link is down its connected route is gone; this route, below
	// it in preference, drops what would otherwise leave by the default
	// route for whatever answers there, as a partition does.
	subnet := fmt.Sprintf("10.213.%d.0/30", n)
	ip(t, "route", "add", "blackhole", subnet, "metric", "4000")
	t.Cleanup(func() { _ = exec.Command("ip", "route", "del", "blackhole", subnet, "metric", "4000").Run() })
	return h
}

// cut breaks the link: packets in both directions are lost, no connection
// is reset, as when a network partitions.
func (h *host) cut() { ip(h.t, "link", "set", h.outside, "down") }

// restore mends the link.
func (h *host) restore() { ip(h.t, "link", "set", h.outside, "up") }

// proc is a process started by a test; stopped with SIGKILL at cleanup if
// still running.
type proc struct {
	cmd  *exec.Cmd
	logs *testkit.Buffer
	done chan struct{}
	err  error
}

func startProc(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, logs: &testkit.Buffer{}, done: make(chan struct{})}
	if cmd.Stderr == nil {
		cmd.Stderr = p.logs
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.signal(syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("log of %s:\n%s", strings.Join(cmd.Args, " "), testkit.Tail(p.logs.String(), 6000))
		}
	})
	return p
}

func (p *proc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		t.Fatalf("%s still running after %s; its log:\n%s", filepath.Base(p.cmd.Path), limit, p.logs.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// executor is a toolsvc serving on a host.
type executor struct {
	host *host
	root string
	args []string
	proc *proc
}

// addr is the executor's gRPC address.
func (e *executor) addr() string { return e.host.addr + ":7070" }

// startExecutor starts toolsvc in h's namespace with workspace root and
// waits until it serves.
func startExecutor(t *testing.T, h *host, root string, args ...string) *executor {
	t.Helper()
	e := &executor{host: h, root: root, args: args}
	e.start(t)
	return e
}

func (e *executor) start(t *testing.T) {
	t.Helper()
	// Executors of one machine need session user ranges of their own: a
	// session's end kills every process of its user.
	n, _ := strconv.Atoi(strings.Split(e.host.addr, ".")[2])
	// Ranges are claimed in blocks of 1024 ids.
	uids := fmt.Sprintf("%d-%d", 307200+n*1024, 307200+n*1024+1023)
	args := append([]string{"netns", "exec", e.host.ns, bins.toolsvc, "serve",
		"--listen", e.addr(), "--insecure", "--root", e.root, "--log-format", "json", "--session-uids", uids}, e.args...)
	e.proc = startProc(t, exec.Command("ip", args...))
	conn, err := grpc.NewClient("passthrough:///"+e.addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rpcserver.WaitServing(ctx, conn, executorv1.ExecutorService_ServiceDesc.ServiceName); err != nil {
		t.Fatalf("toolsvc on %s: %v\n%s", e.addr(), err, e.proc.logs.String())
	}
}

// conversation is one `orchestrator -p` run, its stream-json output read
// line by line as it comes.
type conversation struct {
	proc  *proc
	mu    sync.Mutex
	lines []timedLine
	seen  chan struct{} // receives a token per line
}

type timedLine struct {
	at   time.Time
	line map[string]any
}

// converse starts `orchestrator -p prompt` against the fake model at
// apiURL, on executor addr, with transcripts in sessions.
func converse(t *testing.T, apiURL, sessions, prompt string, args ...string) *conversation {
	t.Helper()
	all := append([]string{"-p", prompt, "--sessions-dir", sessions, "--executor-insecure",
		"--allowedTools", "Bash,Read,Glob", "--output-format", "stream-json", "--log-format", "json", "--log-level", "info"}, args...)
	cmd := exec.Command(bins.orchestrator, all...)
	cmd.Env = append(os.Environ(), "ANTHROPIC_API_KEY=test-key", "ANTHROPIC_BASE_URL="+apiURL)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &conversation{seen: make(chan struct{}, 1024)}
	c.proc = startProc(t, cmd)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			c.mu.Lock()
			c.lines = append(c.lines, timedLine{at: time.Now(), line: m})
			c.mu.Unlock()
			select {
			case c.seen <- struct{}{}:
			default:
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	return c
}

// logTime returns when a JSON log line whose msg contains text was
// written, and whether there is one.
func logTime(logs, text string) (time.Time, bool) {
	for _, line := range strings.Split(logs, "\n") {
		var rec struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && strings.Contains(rec.Msg, text) {
			return rec.Time, true
		}
	}
	return time.Time{}, false
}

// waitFor polls cond every 20 ms until it holds or limit passes.
// waitLog waits up to limit for a log record of p whose message contains
// text and returns its time.
func waitLog(t *testing.T, limit time.Duration, p *proc, text string) time.Time {
	t.Helper()
	var at time.Time
	testkit.WaitFor(t, limit, fmt.Sprintf("%q in the log", text), func() bool {
		var ok bool
		at, ok = logTime(p.logs.String(), text)
		return ok
	})
	return at
}
