package faults_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testkit"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "test/faults needs root: it makes network namespaces and veth pairs (run it with scripts/test, or as root)")
		os.Exit(1)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		fmt.Fprintln(os.Stderr, "test/faults needs the ip command (Debian package iproute2)")
		os.Exit(1)
	}
	code := m.Run()
	tally.Lock()
	fmt.Printf("ledger: %d tool_uses, %d tool_results, %d Bash runs recorded, %d interrupted\n",
		tally.uses, tally.results, tally.ran, tally.interrupted)
	tally.Unlock()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// workspace makes an executor root holding a README to read and a ledger
// directory the sandboxed tools can write to.
func workspace(t *testing.T) string {
	t.Helper()
	root := sandboxtest.Dir(t)
	if err := os.WriteFile(filepath.Join(root, "README"), []byte("fault injection\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ledger := filepath.Join(root, "ledger")
	if err := os.Mkdir(ledger, 0o755); err != nil {
		t.Fatal(err)
	}
	// Like the workspace, the ledger belongs to the root's owner: each
	// session sees the root through a mapping to its own user.
	if err := os.Chown(ledger, sandboxtest.NobodyUID, sandboxtest.NobodyGID); err != nil {
		t.Fatal(err)
	}
	return root
}

// started reports whether the Bash call id has begun (written its ledger
// line).
func started(root, id string) func() bool {
	return func() bool {
		_, err := os.Stat(filepath.Join(root, "ledger", id))
		return err == nil
	}
}

// scenario is one conversation against executors on separate hosts.
type scenario struct {
	t        *testing.T
	root     string
	sessions string
	api      string
	model    *model
}

func newScenario(t *testing.T) *scenario {
	t.Helper()
	build(t)
	srv, m := newModel(t)
	sc := &scenario{t: t, root: workspace(t), sessions: t.TempDir(), api: srv.URL, model: m}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("ls", "-laR", sc.root).CombinedOutput()
			t.Logf("workspace:\n%s", out)
			tr, _ := exec.Command("sh", "-c", "cat "+sc.sessions+"/*.jsonl").CombinedOutput()
			t.Logf("transcripts:\n%s", testkit.Tail(string(tr), 4000))
		}
	})
	return sc
}

// run starts the conversation of s on executor addr.
func (sc *scenario) run(s *script, id, executor string, args ...string) *conversation {
	sc.model.add(s)
	return converse(sc.t, sc.api, sc.sessions, s.prompt(),
		append([]string{"--executor", executor, "--session-id", id}, args...)...)
}

// finalText returns the result text of a finished stream-json run.
func (c *conversation) finalText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.lines) - 1; i >= 0; i-- {
		if c.lines[i].line["type"] == "result" {
			b, _ := json.Marshal(c.lines[i].line)
			return string(b)
		}
	}
	return ""
}

// An executor killed with SIGKILL in the middle of a call, and never back:
// the call gets an interrupted result once the resume window closes, no
// call runs twice, and the turn ends with an error instead of hanging.
func TestExecutorKilledForGood(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	ex := startExecutor(t, newHost(t), sc.root)
	s := newScript("kill", 2, 2, 2)
	conv := sc.run(s, "kill", ex.addr(), "--resume-window", "3s")
	testkit.WaitFor(t, 30*time.Second, "the first Bash call to start", started(sc.root, s.rounds[0][2].id))
	ex.proc.signal(syscall.SIGKILL)
	if code := conv.proc.wait(t, 60*time.Second); code == 0 {
		t.Errorf("the conversation ended well without its executor: %s", conv.finalText())
	}
	l := readLedger(t, sc.sessions, "kill")
	if n := l.check(t, sc.root, s); n == 0 {
		t.Errorf("no call was reported interrupted; ledger %+v", l.calls)
	}
	if _, ok := logTime(conv.proc.logs.String(), "resuming"); !ok {
		t.Errorf("the orchestrator did not try to resume; log:\n%s", conv.proc.logs.String())
	}
}

// An executor killed and restarted on the same address: its sessions are
// gone, so the calls that were running get interrupted results; the
// conversation goes on with a new executor session and ends well.
func TestExecutorRestart(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	ex := startExecutor(t, newHost(t), sc.root)
	s := newScript("restart", 3, 2, 1)
	conv := sc.run(s, "restart", ex.addr(), "--resume-window", "20s")
	testkit.WaitFor(t, 30*time.Second, "the first Bash call to start", started(sc.root, s.rounds[0][2].id))
	ex.proc.signal(syscall.SIGKILL)
	ex.proc.wait(t, 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	ex.start(t)
	if code := conv.proc.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, conv.finalText(), conv.proc.logs.String())
	}
	l := readLedger(t, sc.sessions, "restart")
	if n := l.check(t, sc.root, s); n == 0 {
		t.Error("no call was reported interrupted")
	}
	// The last round ran whole on the restarted executor.
	for _, c := range s.rounds[2] {
		if o := l.calls[c.id]; o == nil || o.isError {
			t.Errorf("%s after the restart: %+v", c.id, o)
		}
	}
}

// A link cut shorter than the keepalive: the connection survives, calls
// finish during the cut, and every result arrives once the link is back.
// The time from restoring the link to the next event is logged: it is the
// "resume after a 2-second cut" figure of docs/benchmarks.md.
func TestShortLinkCut(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	h := newHost(t)
	ex := startExecutor(t, h, sc.root)
	s := newScript("short", 2, 2, 1)
	conv := sc.run(s, "short", ex.addr())
	testkit.WaitFor(t, 30*time.Second, "the first Bash call to start", started(sc.root, s.rounds[0][2].id))
	h.cut()
	time.Sleep(2 * time.Second)
	before := len(conv.snapshot())
	h.restore()
	restored := time.Now()
	testkit.WaitFor(t, 30*time.Second, "an event after the cut", func() bool { return len(conv.snapshot()) > before })
	t.Logf("2 s cut: first event %v after the link came back", conv.snapshot()[before].at.Sub(restored).Round(time.Millisecond))
	if code := conv.proc.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, conv.finalText(), conv.proc.logs.String())
	}
	l := readLedger(t, sc.sessions, "short")
	if n := l.check(t, sc.root, s); n != 0 {
		t.Errorf("%d calls interrupted by a short cut", n)
	}
}

// A cut long enough for both ends' keepalive to drop the connection but
// within the executor's retention: the orchestrator resumes the session,
// the calls that finished meanwhile are replayed, none runs twice, none is
// interrupted. The time the orchestrator took to notice is logged.
func TestLinkCutWithinRetention(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	h := newHost(t)
	ex := startExecutor(t, h, sc.root, "--retention", "2m")
	s := newScript("within", 2, 2, 1)
	conv := sc.run(s, "within", ex.addr(), "--resume-window", "2m")
	testkit.WaitFor(t, 30*time.Second, "the first Bash call to start", started(sc.root, s.rounds[0][2].id))
	h.cut()
	cutAt := time.Now()
	noticed := waitLog(t, 60*time.Second, conv.proc, "executor stream broke")
	t.Logf("dead link noticed after %v", noticed.Sub(cutAt).Round(100*time.Millisecond))
	time.Sleep(time.Second)
	h.restore()
	if code := conv.proc.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, conv.finalText(), conv.proc.logs.String())
	}
	if _, ok := logTime(conv.proc.logs.String(), "executor session resumed"); !ok {
		t.Errorf("no resume logged:\n%s", conv.proc.logs.String())
	}
	l := readLedger(t, sc.sessions, "within")
	if n := l.check(t, sc.root, s); n != 0 {
		t.Errorf("%d calls interrupted although the session was resumed", n)
	}
}

// A cut longer than the executor's retention: the executor ends the
// session and kills its calls; when the link is back the resume finds no
// session, so the open calls get interrupted results, reported to the
// model, and the conversation continues in a new executor session.
func TestLinkCutBeyondRetention(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	h := newHost(t)
	ex := startExecutor(t, h, sc.root, "--retention", "1s")
	s := newScript("beyond", 2, 1, 30)
	conv := sc.run(s, "beyond", ex.addr(), "--resume-window", "2m")
	testkit.WaitFor(t, 30*time.Second, "the first Bash call to start", started(sc.root, s.rounds[0][2].id))
	h.cut()
	waitLog(t, 60*time.Second, ex.proc, "session expired")
	h.restore()
	if code := conv.proc.wait(t, 120*time.Second); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, conv.finalText(), conv.proc.logs.String())
	}
	l := readLedger(t, sc.sessions, "beyond")
	if n := l.check(t, sc.root, s); n == 0 {
		t.Error("no call was reported interrupted although the session expired")
	}
	o := l.calls[s.rounds[0][2].id]
	if o == nil || !o.isError || !strings.Contains(o.text, "Interrupted") {
		t.Errorf("the call that outlived its session: %+v", o)
	}
}

// The orchestrator killed with SIGKILL in the middle of a call and run
// again on the same transcript: the call gets an interrupted result, the
// executor's session is reattached and its stale call stopped, and the
// conversation continues from the transcript.
func TestOrchestratorRestart(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	ex := startExecutor(t, newHost(t), sc.root)
	s := newScript("orch", 2, 1, 20)
	conv := sc.run(s, "orch", ex.addr())
	testkit.WaitFor(t, 30*time.Second, "the first Bash call to start", started(sc.root, s.rounds[0][2].id))
	conv.proc.signal(syscall.SIGKILL)
	conv.proc.wait(t, 10*time.Second)

	again := converse(t, sc.api, sc.sessions, "go on", "--executor", ex.addr(), "--resume", "orch")
	if code := again.proc.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, again.finalText(), again.proc.logs.String())
	}
	l := readLedger(t, sc.sessions, "orch")
	if n := l.check(t, sc.root, s); n == 0 {
		t.Error("the call cut off by the restart was not reported interrupted")
	}
}

// A draining executor of a pool: SIGTERM while a call runs. The running
// call finishes within the grace period and its result arrives; a session
// created after the SIGTERM goes to the other executor; the draining
// session moves there for its next round.
func TestDrainingExecutorOfPool(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	a := startExecutor(t, newHost(t), sc.root, "--grace", "20s")
	b := startExecutor(t, newHost(t), sc.root, "--grace", "20s")
	pool := a.addr() + "," + b.addr()

	first := newScript("drainA", 2, 1, 2)
	convA := sc.run(first, "drainA", pool)
	testkit.WaitFor(t, 30*time.Second, "the first Bash call to start", started(sc.root, first.rounds[0][2].id))
	placed := placement(t, sc.sessions, "drainA")
	draining, other := a, b
	if placed == b.addr() {
		draining, other = b, a
	}
	draining.proc.signal(syscall.SIGTERM)
	waitLog(t, 10*time.Second, draining.proc, "draining")

	second := newScript("drainB", 1, 1, 0.1)
	convB := sc.run(second, "drainB", pool)
	for _, c := range []*conversation{convA, convB} {
		if code := c.proc.wait(t, 90*time.Second); code != 0 {
			t.Fatalf("exit %d: %s\n%s", code, c.finalText(), c.proc.logs.String())
		}
	}
	if got := placement(t, sc.sessions, "drainB"); got != other.addr() {
		t.Errorf("a session created while %s drained went to %s", draining.addr(), got)
	}
	if got := placement(t, sc.sessions, "drainA"); got != other.addr() {
		t.Errorf("the draining executor's session ended on %s, want it moved to %s", got, other.addr())
	}
	l := readLedger(t, sc.sessions, "drainA", "drainB")
	if n := l.check(t, sc.root, first, second); n != 0 {
		t.Errorf("%d calls interrupted by a drain with a long enough grace", n)
	}
	if code := draining.proc.wait(t, 30*time.Second); code != 0 {
		t.Errorf("draining toolsvc exited %d", code)
	}
}

// placement returns the executor a session runs on, from its transcript.
func placement(t *testing.T, sessions, id string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sessions, id+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	addr := ""
	for _, line := range strings.Split(string(b), "\n") {
		var rec struct {
			Type     string `json:"type"`
			Executor string `json:"executor"`
			Config   struct {
				Executor string `json:"executor"`
			} `json:"config"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch rec.Type {
		case "session":
			addr = rec.Config.Executor
		case "placed":
			addr = rec.Executor
		}
	}
	return addr
}

func (c *conversation) snapshot() []timedLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]timedLine(nil), c.lines...)
}
