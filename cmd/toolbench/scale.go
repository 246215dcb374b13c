package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// scaleOptions are the figures of toolbench --scale: how one executor
// copes with many sessions.
type scaleOptions struct {
	duration   time.Duration // of each throughput figure
	busy       int           // busy sessions of the first figures
	idle       int           // idle sessions held open beside them
	many       int           // busy sessions against as many direct bash loops
	calls      int           // calls of the one session whose RSS is read
	maxSession int           // toolsvc --max-sessions
}

// scaleReport is what --scale measures.
type scaleReport struct {
	busyAlone, busyWithIdle float64 // Bash calls/s of opts.busy sessions
	many, direct            float64 // calls/s of opts.many sessions and as many bash loops
	rssBefore, rssAfter     int64   // toolsvc RSS around opts.calls calls in one session
	rssCalls                int
}

// runScale starts toolsvc (landlock sandbox) and measures the scale
// figures, printing them to stdout.
func runScale(ctx context.Context, o options, so scaleOptions, stdout, progress io.Writer) (err error) {
	w, err := newWorkDir()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, w.cleanup()) }()
	root, err := w.workspace("root-scale")
	if err != nil {
		return err
	}
	svc, _, err := startToolsvc(ctx, o.toolsvc, "landlock", root, w, o.grpcDefaults, "--max-sessions", strconv.Itoa(so.maxSession))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, svc.stop()) }()
	var rep scaleReport
	note := func(format string, args ...any) { fmt.Fprintf(progress, "toolbench: "+format+"\n", args...) }

	// First, while toolsvc is fresh: the Go heap the later figures grow
	// is not returned to the system at once.
	note("%d Read calls in one session", so.calls)
	if rep.rssBefore, rep.rssAfter, err = rssAfterCalls(ctx, svc, root, so.calls); err != nil {
		return err
	}
	rep.rssCalls = so.calls
	note("%d busy Bash sessions alone for %v", so.busy, so.duration)
	if rep.busyAlone, err = busyBash(ctx, svc, so.busy, so.duration); err != nil {
		return err
	}
	note("opening %d idle sessions", so.idle)
	idle, err := openMany(ctx, svc, so.idle)
	closeIdle := func() {
		for _, s := range idle {
			_ = s.close()
		}
		idle = nil
	}
	defer closeIdle()
	if err != nil {
		return err
	}
	note("%d busy Bash sessions beside %d idle ones for %v", so.busy, so.idle, so.duration)
	if rep.busyWithIdle, err = busyBash(ctx, svc, so.busy, so.duration); err != nil {
		return err
	}
	closeIdle()
	note("%d busy Bash sessions for %v", so.many, so.duration)
	if rep.many, err = busyBash(ctx, svc, so.many, so.duration); err != nil {
		return err
	}
	note("%d direct `bash -c true` loops for %v", so.many, so.duration)
	rep.direct = directBash(ctx, so.many, so.duration)

	fmt.Fprintf(stdout, "toolbench --scale (toolsvc --sandbox landlock, %s each, load before %s)\n", so.duration, loadAvg())
	fmt.Fprintf(stdout, "  %3d busy Bash sessions, alone:               %8.1f calls/s\n", so.busy, rep.busyAlone)
	fmt.Fprintf(stdout, "  %3d busy Bash sessions, %d idle open:      %8.1f calls/s  (%.2fx of alone; goal within 1.2x)\n",
		so.busy, so.idle, rep.busyWithIdle, rep.busyWithIdle/rep.busyAlone)
	fmt.Fprintf(stdout, "  %3d busy Bash sessions:                      %8.1f calls/s\n", so.many, rep.many)
	fmt.Fprintf(stdout, "  %3d direct `bash -c true` loops:             %8.1f calls/s  (sessions: %.2fx of direct; goal >= 0.7x)\n",
		so.many, rep.direct, rep.many/rep.direct)
	fmt.Fprintf(stdout, "  toolsvc RSS: %.1f MiB before, %.1f MiB after %d Read calls in one session (goal under 64 MiB)\n",
		float64(rep.rssBefore)/(1<<20), float64(rep.rssAfter)/(1<<20), rep.rssCalls)
	return nil
}

// openMany opens n sessions, 16 at a time.
func openMany(ctx context.Context, svc *toolsvcProc, n int) ([]*session, error) {
	out := make([]*session, n)
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		mu   sync.Mutex
		errs []error
	)
	for range min(16, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				s, err := openSession(ctx, svc)
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("session %d: %w", i, err))
					mu.Unlock()
					return
				}
				out[i] = s
			}
		}()
	}
	wg.Wait()
	var open []*session
	for _, s := range out {
		if s != nil {
			open = append(open, s)
		}
	}
	return open, errors.Join(errs...)
}

// busyBash runs n sessions that each send Bash "true" calls one after
// another for d, and returns the calls per second they completed
// together.
func busyBash(ctx context.Context, svc *toolsvcProc, n int, d time.Duration) (float64, error) {
	sessions, err := openMany(ctx, svc, n)
	defer func() {
		for _, s := range sessions {
			_ = s.close()
		}
	}()
	if err != nil {
		return 0, err
	}
	var (
		done atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	start := time.Now()
	deadline := start.Add(d)
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				id, err := s.send(s.newMessageID(), "Bash", `{"command":"true"}`)
				if err == nil {
					var r interface{ GetIsError() bool }
					r, err = s.result(id, nil)
					if err == nil && r.GetIsError() {
						err = errors.New("a Bash call of true failed")
					}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(done.Load()) / time.Since(start).Seconds(), errors.Join(errs...)
}

// directBash runs n goroutines that each run `bash -c true` one after
// another for d, and returns the runs per second: the floor the sessions
// are compared with.
func directBash(ctx context.Context, n int, d time.Duration) float64 {
	var (
		done atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if exec.Command("bash", "-c", "true").Run() == nil {
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(done.Load()) / time.Since(start).Seconds()
}

// rssAfterCalls runs calls Read calls of a small file in one session and
// returns toolsvc's resident memory before and after.
func rssAfterCalls(ctx context.Context, svc *toolsvcProc, root string, calls int) (before, after int64, err error) {
	s, err := openSession(ctx, svc)
	if err != nil {
		return 0, 0, err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	file, err := writeKiBFile(root)
	if err != nil {
		return 0, 0, err
	}
	// Two ranges in turn, so that no read is answered with the
	// "unchanged" stub.
	inputs := []string{
		`{"file_path":` + strconv.Quote(file) + `,"offset":1,"limit":8}`,
		`{"file_path":` + strconv.Quote(file) + `,"offset":2,"limit":8}`,
	}
	pid := svc.child.cmd.Process.Pid
	before = rss(pid)
	for i := 0; i < calls && ctx.Err() == nil; i++ {
		id, err := s.send(s.newMessageID(), "Read", inputs[i%2])
		if err != nil {
			return before, 0, err
		}
		if _, err := s.result(id, nil); err != nil {
			return before, 0, err
		}
	}
	return before, rss(pid), nil
}

// rss reads a process's resident set size in bytes (0 if unknown).
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
