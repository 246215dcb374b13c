package procs

import (
	"context"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
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
		if got := s.step(t0.Add(time.Duration(st.ms)*time.Millisecond), st.waits, st.late); got != st.want || s.hold != st.hold {
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
		if got := s.step(now, waits, late); got != want || s.interval() != every {
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
		d = s.step(now, 0, 0)
	}
	step(0, 0, stay, fast, "trying one P")
	step(0, 0, stay, fast, "")
	step(0, 0, stay, slow, "the try lasted: idle again")
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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Config{}, nil)
	}()
	defer func() {
		cancel()
		<-done
		if n := runtime.GOMAXPROCS(0); n != def {
			t.Errorf("GOMAXPROCS %d after Run ended, want the default %d", n, def)
		}
	}()
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
