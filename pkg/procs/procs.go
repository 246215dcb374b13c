// Package procs fits the number of Ps the Go scheduler runs (GOMAXPROCS)
// to the load: one while goroutines find it free when they become
// runnable, all the CPUs the process may use while they queue for it.
//
// A request served over gRPC passes from goroutine to goroutine (the
// connection's reader, the handler, the writer). With more than one P,
// each hand-off also wakes an idle thread, which spins looking for work and
// parks again: on a small machine, or a VM where a system call and a thread
// wake-up are costly, that work competes with the request for the same
// CPUs and makes a short request markedly slower. With one P a hand-off
// is a switch on the same thread. One P cannot serve a heavy load, so the
// controller watches the scheduling latencies the runtime measures (how
// long runnable goroutines wait for a P) and the CPU time the process
// uses: when, over a window of recent intervals, many waits with one P are
// long, or the process used most of a CPU, it gives the process all its
// Ps; when a window with all of them has no long wait and its last
// interval used less, it tries one P again. A try that fails at once
// makes the next wait longer. While the process is idle on one P it looks
// rarely, so that an idle process stays idle.
//
// The CPU rule is for throughput. With one P, a goroutine in a system call
// holds the only P until the call returns or the runtime takes the P back,
// so a process that spends its time moving data (a command's output read
// from a pipe, written to a file and sent on) runs its goroutines one after
// another and its system calls in between, while no goroutine waits long
// enough to count. A window is longer than many such bursts, so the part
// of the process that sees one start (a command's output filling the
// reads of its pipe) asks for all Ps at once with Demand.
package procs

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"runtime/metrics"
	"syscall"
	"time"
)

// latencies is the runtime's histogram of the time goroutines spent
// runnable before they ran. It samples every eighth goroutine transition.
const latencies = "/sched/latencies:seconds"

// Config tunes the controller. Zero fields take their defaults.
type Config struct {
	// Interval is how often the scheduling latencies are read (default
	// 10 ms).
	Interval time.Duration
	// Window is how many of the last intervals each decision looks at
	// (default 5): the runtime samples one goroutine transition in eight,
	// too few in one interval to tell a load from a chance.
	Window int
	// Wait is how long a goroutine may wait for a P before its wait counts
	// as long (default 300 µs). On a busy machine a wait that long also
	// comes from the operating system running another process on the P's
	// thread, now and then.
	Wait time.Duration
	// Late and Share say when a window with one P shows too few Ps: at
	// least Late long waits (default 8), making at least Share of its waits
	// (default 0.1).
	Late  uint64
	Share float64
	// Busy is the share of one CPU's time the process may use over a
	// window with one P and keep it (default 0.6): a window that used more
	// gives the process all its Ps, and with all of them one P is tried
	// only after an interval that used less. Serving one call at a time
	// uses well under it (a Read, a Bash command: a fifth to a third of a
	// CPU); streaming output uses most of a CPU.
	Busy float64
	// Quiet is the most long waits a window with all Ps may have for one
	// P to be tried again (default 1).
	Quiet uint64
	// Hold is the least time all Ps are kept before a try of one P
	// (default 100 ms). A try that ends within Probe doubles it, up to
	// MaxHold (default 5 s); a try that lasts resets it.
	Hold, MaxHold time.Duration
	// Probe is how long a try of one P must last to count as kept
	// (default 5 intervals).
	Probe time.Duration
	// IdleInterval is how often the latencies are read while the process
	// is idle on one P (default 250 ms): a window with at most one wait
	// makes the reads this rare, an idle interval with more than Window
	// waits makes them frequent again. An idle executor then wakes four
	// times a second for it, not a hundred.
	IdleInterval time.Duration
}

func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = 10 * time.Millisecond
	}
	if c.Window <= 0 {
		c.Window = 5
	}
	if c.Wait <= 0 {
		c.Wait = 300 * time.Microsecond
	}
	if c.Late == 0 {
		c.Late = 8
	}
	if c.Share <= 0 {
		c.Share = 0.1
	}
	if c.Busy <= 0 {
		c.Busy = 0.6
	}
	if c.Quiet == 0 {
		c.Quiet = 1
	}
	if c.Hold <= 0 {
		c.Hold = 100 * time.Millisecond
	}
	if c.MaxHold <= 0 {
		c.MaxHold = 5 * time.Second
	}
	c.MaxHold = max(c.MaxHold, c.Hold)
	if c.Probe <= 0 {
		c.Probe = time.Duration(c.Window) * c.Interval
	}
	if c.IdleInterval <= 0 {
		c.IdleInterval = 250 * time.Millisecond
	}
	c.IdleInterval = max(c.IdleInterval, c.Interval)
	return c
}

// Applies reports whether the controller has anything to do in this
// process, and if not why: GOMAXPROCS was set in the environment (the
// operator's choice stands), or the process may use one CPU only.
func Applies() (bool, string) {
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		return false, "GOMAXPROCS is set in the environment"
	}
	if runtime.GOMAXPROCS(0) < 2 {
		return false, "the process may use one CPU only"
	}
	return true, ""
}

// demands holds a Demand not yet taken by Run.
var demands = make(chan struct{}, 1)

// Demand asks the running controller for all Ps at once, without waiting
// for its next look: a part of the process that finds itself moving data
// as fast as it can (a command's output filling every read) knows before
// any window shows it, and a window (50 ms, after up to 250 ms of an idle
// interval) can be longer than the whole burst. The Ps are kept a window
// at the least and two intervals past the last Demand (see state.demand),
// then the usual rules apply. Without a running controller, or
// with all Ps already, it does nothing. It never blocks.
func Demand() {
	select {
	case demands <- struct{}{}:
	default:
	}
}

// Run adapts GOMAXPROCS until ctx ends, then gives the process the
// runtime's default again. Call it only where Applies says so; it changes
// a setting of the whole process, so run one at a time.
func Run(ctx context.Context, cfg Config, log *slog.Logger) {
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	defer runtime.SetDefaultGOMAXPROCS()
	w := newWatcher(cfg.Wait)
	s := newState(cfg, time.Now())
	runtime.GOMAXPROCS(1)
	log.Debug("scheduler Ps", "procs", 1)
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	every := cfg.Interval
	for {
		select {
		case <-ctx.Done():
			return
		case <-demands:
			if s.demand(time.Now()) == toAll {
				runtime.SetDefaultGOMAXPROCS()
				log.Debug("scheduler Ps", "procs", runtime.GOMAXPROCS(0), "demanded", true)
			}
		case now := <-t.C:
			d := s.step(now, w.read())
			switch d {
			case toOne:
				runtime.GOMAXPROCS(1)
			case toAll:
				// The runtime's default follows the CPU limit of the
				// process's cgroup as it is now.
				runtime.SetDefaultGOMAXPROCS()
			}
			if d != stay {
				log.Debug("scheduler Ps", "procs", runtime.GOMAXPROCS(0), "window_waits", s.window.waits, "window_late", s.window.late,
					"window_cpu", s.window.cpu, "window", s.window.wall, "hold", s.hold)
			}
		}
		if next := s.interval(); next != every {
			every = next
			t.Reset(every)
		}
	}
}

// watcher reads the runtime's scheduling latencies and the process's CPU
// time, and counts, since its last read, the waits, those longer than its
// threshold, and the CPU time used.
type watcher struct {
	sample  []metrics.Sample
	prev    []uint64
	over    int // index of the first bucket whose waits all exceed the threshold
	prevCPU time.Duration
}

func newWatcher(wait time.Duration) *watcher {
	w := &watcher{sample: []metrics.Sample{{Name: latencies}}}
	metrics.Read(w.sample)
	h := w.sample[0].Value.Float64Histogram()
	w.prev = append([]uint64(nil), h.Counts...)
	w.over = len(h.Counts)
	for i := range h.Counts {
		if h.Buckets[i] >= wait.Seconds() {
			w.over = i
			break
		}
	}
	w.prevCPU = processCPU()
	return w
}

func (w *watcher) read() counts {
	var c counts
	metrics.Read(w.sample)
	h := w.sample[0].Value.Float64Histogram()
	for i, n := range h.Counts {
		d := n - w.prev[i]
		c.waits += d
		if i >= w.over {
			c.late += d
		}
		w.prev[i] = n
	}
	cpu := processCPU()
	c.cpu, w.prevCPU = max(cpu-w.prevCPU, 0), cpu
	return c
}

// processCPU returns the CPU time the process's threads have used, in user
// and kernel mode (its children's not counted); zero when it cannot be
// read, which leaves the decisions to the waits.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A decision of state.step.
type decision int

const (
	stay  decision = iota
	toOne          // run one P
	toAll          // run all the Ps the process may use
)

// counts are one interval's waits for a P, how many of them were long, and
// the CPU time the process used; with wall, the interval's length, once in
// a state's window.
type counts struct {
	waits, late uint64
	cpu, wall   time.Duration
}

// state decides, interval by interval, whether the process runs one P or
// all of them.
type state struct {
	cfg     Config
	one     bool
	idle    bool          // with one P: nothing happens, intervals are IdleInterval long
	recent  []counts      // the last intervals since the last change, oldest first
	window  counts        // the sums over recent
	last    time.Time     // the end of the interval before
	hold    time.Duration // the least time all Ps are kept, next time they are given
	until   time.Time     // with all Ps: the earliest time one P is tried again
	probing time.Time     // with one P: when the try began; zero once it lasted
}

// newState starts with one P, as a try: a process under load at start-up
// gets all its Ps within a window.
func newState(cfg Config, now time.Time) *state {
	return &state{cfg: cfg, one: true, hold: cfg.Hold, probing: now, last: now}
}

// interval returns how long the next interval is.
func (s *state) interval() time.Duration {
	if s.idle {
		return s.cfg.IdleInterval
	}
	return s.cfg.Interval
}

// demand takes a Demand made at now: with one P it gives all of them, and
// looks closely from then on. All Ps are kept a window at the least and
// two intervals past the last Demand: a burst demands again with every
// read that it fills, so that once it ends the process goes back to one P
// within a few intervals rather than after a hold.
func (s *state) demand(now time.Time) decision {
	until := now.Add(2 * s.cfg.Interval)
	if !s.one {
		if until.After(s.until) {
			s.until = until
		}
		return stay
	}
	s.one, s.idle, s.until, s.probing, s.recent = false, false, until, time.Time{}, s.recent[:0]
	return toAll
}

// busy reports whether c, over the time it covers, used more than the
// share of a CPU that one P may keep.
func (s *state) busy(c counts) bool {
	return c.wall > 0 && float64(c.cpu) > s.cfg.Busy*float64(c.wall)
}

// step takes the counts of the interval that ended at now (the waits, the
// long waits and the CPU time; its length is the time since the step
// before).
func (s *state) step(now time.Time, c counts) decision {
	c.wall, s.last = now.Sub(s.last), now
	if s.idle {
		if c.waits <= uint64(s.cfg.Window) && !s.busy(c) {
			return stay
		}
		s.idle = false // something started: look closely again
	}
	s.recent = append(s.recent, c)
	if len(s.recent) > s.cfg.Window {
		s.recent = s.recent[1:]
	}
	s.window = counts{}
	for _, c := range s.recent {
		s.window.waits += c.waits
		s.window.late += c.late
		s.window.cpu += c.cpu
		s.window.wall += c.wall
	}
	full := len(s.recent) == s.cfg.Window
	if !s.one {
		// The last interval alone says whether the process is still busy:
		// the end of a burst gives back the Ps at once.
		if now.Before(s.until) || !full || s.window.late > s.cfg.Quiet || s.busy(c) {
			return stay
		}
		s.one, s.probing, s.recent = true, now, s.recent[:0]
		return toOne
	}
	if !s.probing.IsZero() && now.Sub(s.probing) >= s.cfg.Probe {
		s.probing = time.Time{}
		s.hold = s.cfg.Hold // the try lasted: the next load starts afresh
	}
	late := s.window.late >= s.cfg.Late && float64(s.window.late) >= s.cfg.Share*float64(s.window.waits)
	busy := full && s.busy(s.window)
	if !late && !busy {
		if full && s.window.waits <= 1 && s.probing.IsZero() {
			s.idle, s.recent = true, s.recent[:0]
		}
		return stay
	}
	if !s.probing.IsZero() {
		s.hold = min(2*s.hold, s.cfg.MaxHold) // the try failed at once
	}
	s.one, s.until, s.probing, s.recent = false, now.Add(s.hold), time.Time{}, s.recent[:0]
	return toAll
}
