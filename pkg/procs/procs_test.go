package procs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStateFollowsTheLoad walks the decisions through a load that comes,
// outlasts two tries of one P, and goes.
func TestStateFollowsTheLoad(t *testing.T) {
	const h = 100 * time.Millisecond
	cfg := Config{Interval: 10 * time.Millisecond, Window: 3, Late: 6, Hold: h, MaxHold: 3 * h}.withDefaults()
	t0 := time.Unix(1000, 0)
	s := newState(cfg, t0)
	type step struct {
		ms          int // the interval's end
		waits, late uint64
		want        decision
		hold        time.Duration
		why         string
	}
	steps := []step{
		{10, 20, 0, stay, h, "quiet start on one P"},
		{20, 20, 5, stay, h, "five long waits: a window needs six"},
		{30, 100, 1, stay, h, "six long waits, but under a tenth of the window's 140"},
		{40, 10, 8, toAll, h, "fourteen of 130: a load (the start-up try had lasted: the hold stays)"},
		{50, 100, 40, stay, h, "with all Ps, busy"},
		{60, 100, 0, stay, h, "two intervals are not a window"},
		{70, 100, 0, stay, h, "a window with long waits"},
		{80, 100, 0, stay, h, "a quiet window, but within the hold"},
	}
	for ms := 90; ms < 140; ms += 10 {
		steps = append(steps, step{ms, 100, 0, stay, h, "within the hold"})
	}
	steps = append(steps,
		step{140, 100, 0, toOne, h, "quiet, past the hold: one P is tried"},
		step{150, 50, 9, toAll, 2 * h, "the try fails at once: the hold doubles"})
	for ms := 160; ms < 350; ms += 10 {
		steps = append(steps, step{ms, 50, 0, stay, 2 * h, "within the hold"})
	}
	steps = append(steps,
		step{350, 50, 0, toOne, 2 * h, "quiet, past the hold"},
		step{360, 50, 9, toAll, 3 * h, "failed again: the hold doubles, capped"})
	for ms := 370; ms < 660; ms += 10 {
		steps = append(steps, step{ms, 50, 0, stay, 3 * h, "within the hold"})
	}
	steps = append(steps,
		step{660, 50, 1, toOne, 3 * h, "one long wait still counts as quiet"},
		step{670, 50, 4, stay, 3 * h, "a few long waits with one P"},
		step{680, 50, 1, stay, 3 * h, ""},
		step{690, 50, 0, stay, h, "the try lasted: the hold is back to its start"},
		step{700, 10, 10, toAll, h, "a new load gets all Ps, for the first hold"})
	for _, st := range steps {
		if got := s.step(t0.Add(time.Duration(st.ms)*time.Millisecond), counts{waits: st.waits, late: st.late}); got != st.want || s.hold != st.hold {
			t.Fatalf("at %d ms (%s): got %v with hold %s, want %v with hold %s", st.ms, st.why, got, s.hold, st.want, st.hold)
		}
	}
}

// TestStateIdles: a process with nothing to do on one P is looked at
// rarely, and closely again as soon as something happens.
func TestStateIdles(t *testing.T) {
	cfg := Config{Interval: 10 * time.Millisecond, Window: 3, Late: 6, IdleInterval: 200 * time.Millisecond}.withDefaults()
	t0 := time.Unix(1000, 0)
	s := newState(cfg, t0)
	now := t0
	step := func(waits, late uint64, want decision, every time.Duration, why string) {
		t.Helper()
		now = now.Add(s.interval())
		if got := s.step(now, counts{waits: waits, late: late}); got != want || s.interval() != every {
			t.Fatalf("at %s (%s): got %v, next interval %s; want %v, %s", now.Sub(t0), why, got, s.interval(), want, every)
		}
	}
	fast, slow := cfg.Interval, cfg.IdleInterval
	step(0, 0, stay, fast, "nothing, but within the start-up try")
	step(1, 0, stay, fast, "")
	step(0, 0, stay, slow, "the try lasted, and the window holds one wait: idle")
	step(3, 0, stay, slow, "three waits in a long interval: still idle")
	step(4, 1, stay, fast, "more waits than a window has intervals: look closely")
	step(10, 1, stay, fast, "")
	step(10, 7, toAll, fast, "a load")
	var d decision
	for n := 0; d != toOne; n++ {
		if n == 100 {
			t.Fatal("all Ps kept through a second of quiet windows")
		}
		if s.interval() != fast {
			t.Fatalf("with all Ps the intervals are %s, want %s", s.interval(), fast)
		}
		now = now.Add(fast)
		d = s.step(now, counts{})
	}
	step(0, 0, stay, fast, "trying one P")
	step(0, 0, stay, fast, "")
	step(0, 0, stay, slow, "the try lasted: idle again")
}

// TestStateGivesAllPsToABusyProcess: a process that uses most of a CPU
// gets all its Ps though its goroutines never wait long for the one P,
// keeps them while it stays busy, and tries one P once it is not.
func TestStateGivesAllPsToABusyProcess(t *testing.T) {
	const iv = 10 * time.Millisecond
	cfg := Config{Interval: iv, Window: 3, Hold: 50 * time.Millisecond, IdleInterval: 200 * time.Millisecond}.withDefaults()
	t0 := time.Unix(1000, 0)
	s := newState(cfg, t0)
	now := t0
	step := func(cpu time.Duration, want decision, why string) {
		t.Helper()
		now = now.Add(s.interval())
		if got := s.step(now, counts{waits: 40, cpu: cpu}); got != want {
			t.Fatalf("at %s (%s): got %v, want %v", now.Sub(t0), why, got, want)
		}
	}
	step(5*time.Millisecond, stay, "half a CPU")
	step(5*time.Millisecond, stay, "")
	step(5*time.Millisecond, stay, "a window at half a CPU: one P keeps up")
	step(6*time.Millisecond, stay, "16 of 30 ms")
	step(7*time.Millisecond, stay, "18 of 30 ms: six tenths is not past them")
	step(9*time.Millisecond, toAll, "22 of 30 ms, with no long wait")
	for range 20 {
		step(9*time.Millisecond, stay, "busy: all Ps kept past their hold")
	}
	step(time.Millisecond, toOne, "the window used 19 of 30 ms, but its last interval 1 of 10: the burst is over")
	step(time.Millisecond, stay, "trying one P")

	// An idle process is looked at rarely; a busy interval is enough to
	// look closely again.
	s = newState(cfg, t0)
	now = t0
	for range 3 {
		now = now.Add(s.interval())
		s.step(now, counts{})
	}
	if s.interval() != cfg.IdleInterval {
		t.Fatalf("not idle after a quiet window: next interval %s", s.interval())
	}
	now = now.Add(s.interval())
	if s.step(now, counts{cpu: 190 * time.Millisecond}); s.interval() != iv {
		t.Fatalf("a busy interval of an idle process: next interval %s, want %s", s.interval(), iv)
	}
}

// TestStateTakesADemand: a Demand gives an idle process on one P all its
// Ps at once; they are kept while Demands go on and given back within a
// few intervals of the last.
func TestStateTakesADemand(t *testing.T) {
	const iv = 10 * time.Millisecond
	cfg := Config{Interval: iv, Window: 3, IdleInterval: 200 * time.Millisecond}.withDefaults()
	t0 := time.Unix(1000, 0)
	s := newState(cfg, t0)
	now := t0
	for range 3 {
		now = now.Add(s.interval())
		s.step(now, counts{})
	}
	if s.interval() != cfg.IdleInterval {
		t.Fatalf("not idle after a quiet window: next interval %s", s.interval())
	}
	now = now.Add(70 * time.Millisecond)
	if d := s.demand(now); d != toAll || s.interval() != iv {
		t.Fatalf("a demand while idle on one P: %v, next interval %s; want %v, %s", d, s.interval(), toAll, iv)
	}
	// A burst demands with every read it fills: all Ps are kept while
	// the demands go on, and given back soon after they stop.
	last := now
	for range 10 {
		now = now.Add(iv)
		last = now.Add(-iv / 2)
		if d := s.demand(last); d != stay {
			t.Fatalf("a demand with all Ps: %v, want %v", d, stay)
		}
		if d := s.step(now, counts{waits: 30}); d != stay {
			t.Fatalf("%s after the first demand, while the demands go on: %v, want %v", now.Sub(t0)-70*time.Millisecond, d, stay)
		}
	}
	var d decision
	for d != toOne {
		now = now.Add(iv)
		if d = s.step(now, counts{waits: 30}); d == toOne && now.Sub(last) < 2*iv {
			t.Fatalf("one P tried %s after the last demand, sooner than two intervals", now.Sub(last))
		}
		if now.Sub(last) > 5*iv {
			t.Fatalf("all Ps kept %s after the last demand", now.Sub(last))
		}
	}
}

// TestRunGivesPsToALoadAndTakesThemBack runs the controller on this
// process: eight goroutines that compute and yield in turn wait for the
// single P and get all of them; once they stop, a try of one P holds
// again. At the end the runtime's default is back.
func TestRunGivesPsToALoadAndTakesThemBack(t *testing.T) {
	def := runtime.GOMAXPROCS(0)
	if ok, why := Applies(); !ok {
		// Only a process that may use one CPU, or whose GOMAXPROCS the
		// environment sets, has no use for the controller.
		if def >= 2 && os.Getenv("GOMAXPROCS") == "" {
			t.Fatalf("Applies says no (%s) with GOMAXPROCS %d and none set", why, def)
		}
		t.Logf("the controller does not apply to this test process: %s", why)
		return
	}
	t.Cleanup(func() {
		if n := runtime.GOMAXPROCS(0); n != def {
			t.Errorf("GOMAXPROCS %d after Run ended, want the default %d", n, def)
		}
	})
	runController(t, Config{}, nil)
	waitProcs(t, 1, "at rest")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				spin(200 * time.Microsecond)
				runtime.Gosched() // to the back of the queue, behind the other seven
			}
		}()
	}
	waitProcs(t, def, "under load")
	close(stop)
	wg.Wait()
	waitProcs(t, 1, "after the load")
}

// TestRunGivesPsToABusyProcess runs the controller on this process while
// one goroutine writes to /dev/null in a loop: nothing waits for the P,
// yet the process uses most of a CPU and gets all its Ps, and one P again
// once the writes stop.
func TestRunGivesPsToABusyProcess(t *testing.T) {
	def := runtime.GOMAXPROCS(0)
	if !applies(t) {
		return
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	// A third of a CPU, not the default's six tenths: on a loaded machine
	// the writer gets a share of a CPU only.
	runController(t, Config{Busy: 0.3}, nil)
	waitProcs(t, 1, "at rest")

	stop := make(chan struct{})
	wrote := make(chan error, 1)
	go func() {
		b := []byte{0}
		for {
			select {
			case <-stop:
				wrote <- nil
				return
			default:
			}
			if _, err := null.Write(b); err != nil {
				wrote <- err
				return
			}
		}
	}()
	stopWriting := sync.OnceValue(func() error {
		close(stop)
		return <-wrote
	})
	defer stopWriting()
	waitProcs(t, def, "while writing")
	if err := stopWriting(); err != nil {
		t.Fatal(err)
	}
	waitProcs(t, 1, "after the writes")
}

// TestRunTakesADemand: Demand reaches the running controller, which gives
// all Ps at once and takes them back soon after; without a running
// controller a Demand waits for none and changes nothing.
func TestRunTakesADemand(t *testing.T) {
	def := runtime.GOMAXPROCS(0)
	if !applies(t) {
		return
	}
	Demand()
	Demand() // at most one waits; neither blocks
	if n := runtime.GOMAXPROCS(0); n != def {
		t.Fatalf("GOMAXPROCS %d after a Demand with no controller, want %d", n, def)
	}
	select {
	case <-demands: // the controller below starts with none waiting
	default:
		t.Fatal("no Demand waiting for a controller")
	}
	var logs testkit.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the controller's log:\n%s", logs.String())
		}
	})
	runController(t, Config{}, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	waitProcs(t, 1, "at rest")
	Demand()
	// All Ps are kept only a few intervals: the log, not a look at
	// GOMAXPROCS, shows they were given.
	want := fmt.Sprintf("procs=%d demanded=true", def)
	testkit.WaitFor(t, 20*time.Second, fmt.Sprintf("%q in the log after a Demand", want), func() bool {
		return strings.Contains(logs.String(), want)
	})
	waitProcs(t, 1, "after the demand")
}

// applies reports whether the controller applies to the test process, and
// logs why not.
func applies(t *testing.T) bool {
	ok, why := Applies()
	if !ok {
		t.Logf("the controller does not apply to this test process: %s", why)
	}
	return ok
}

// runController runs the controller on this process until the test ends.
func runController(t *testing.T, cfg Config, log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, cfg, log)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// spin computes for d.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

func waitProcs(t *testing.T, want int, when string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for runtime.GOMAXPROCS(0) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: GOMAXPROCS %d, want %d", when, runtime.GOMAXPROCS(0), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
