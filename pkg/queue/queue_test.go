package queue

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder logs job starts and ends and lets the test release each job.
type recorder struct {
	mu      sync.Mutex
	events  []string
	release map[string]chan struct{}
	started map[string]chan struct{}
}

func newRecorder(ids ...string) *recorder {
	r := &recorder{release: map[string]chan struct{}{}, started: map[string]chan struct{}{}}
	for _, id := range ids {
		r.release[id] = make(chan struct{})
		r.started[id] = make(chan struct{})
	}
	return r
}

func (r *recorder) log(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
}

func (r *recorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func (r *recorder) job(id string, safe bool) Job {
	return Job{ID: id, Group: "m1", Safe: safe, Run: func(ctx context.Context) {
		r.log("start " + id)
		close(r.started[id])
		select {
		case <-r.release[id]:
			r.log("end " + id)
		case <-ctx.Done():
			r.log(fmt.Sprintf("abort %s: %v", id, context.Cause(ctx)))
		}
	}}
}

// isStarted reports whether id has started, without waiting.
func (r *recorder) isStarted(id string) bool {
	select {
	case <-r.started[id]:
		return true
	default:
		return false
	}
}

func TestSafeJobsRunInParallelUnsafeIsBarrier(t *testing.T) {
	r := newRecorder("r1", "r2", "w", "r3")
	q := New(10)
	q.Add(r.job("r1", true))
	q.Add(r.job("r2", true))
	q.Add(r.job("w", false))
	q.Add(r.job("r3", true))
	<-r.started["r1"]
	<-r.started["r2"]
	if r.isStarted("w") || r.isStarted("r3") {
		t.Fatalf("unsafe job or job behind it started while safe jobs run: %v", r.snapshot())
	}
	close(r.release["r1"])
	close(r.release["r2"])
	<-r.started["w"]
	if r.isStarted("r3") {
		t.Fatalf("safe job overtook the unsafe barrier: %v", r.snapshot())
	}
	close(r.release["w"])
	<-r.started["r3"]
	close(r.release["r3"])
	q.Close(errors.New("done"))
	got := r.snapshot()
	// w must end before r3 starts.
	if idx(got, "end w") > idx(got, "start r3") {
		t.Fatalf("order: %v", got)
	}
}

func idx(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func TestMaxConcurrency(t *testing.T) {
	ids := []string{"a", "b", "c", "d"}
	r := newRecorder(ids...)
	q := New(2)
	for _, id := range ids {
		q.Add(r.job(id, true))
	}
	<-r.started["a"]
	<-r.started["b"]
	if r.isStarted("c") || r.isStarted("d") {
		t.Fatalf("more than 2 running: %v", r.snapshot())
	}
	close(r.release["a"])
	<-r.started["c"]
	if r.isStarted("d") {
		t.Fatalf("more than 2 running: %v", r.snapshot())
	}
	close(r.release["b"])
	close(r.release["c"])
	<-r.started["d"]
	close(r.release["d"])
	q.Close(errors.New("done"))
}

func TestUnsafeWaitsForRunningAndRunsAlone(t *testing.T) {
	r := newRecorder("w1", "w2")
	q := New(10)
	q.Add(r.job("w1", false))
	q.Add(r.job("w2", false))
	<-r.started["w1"]
	if r.isStarted("w2") {
		t.Fatal("two unsafe jobs ran together")
	}
	close(r.release["w1"])
	<-r.started["w2"]
	close(r.release["w2"])
	q.Close(errors.New("done"))
}

func TestAbortQueuedAndRunning(t *testing.T) {
	r := newRecorder("w", "r")
	q := New(10)
	q.Add(r.job("w", false))
	q.Add(r.job("r", true))
	<-r.started["w"]
	cause := errors.New("user interrupted")
	ids := q.Abort(func(id, group string) bool { return group == "m1" }, cause)
	if len(ids) != 2 {
		t.Fatalf("aborted %v, want both", ids)
	}
	q.Close(errors.New("closed"))
	got := r.snapshot()
	for _, want := range []string{"abort w: user interrupted", "abort r: user interrupted"} {
		if idx(got, want) < 0 {
			t.Fatalf("missing %q in %v", want, got)
		}
	}
}

func TestAbortUnknownIsHarmless(t *testing.T) {
	q := New(1)
	if ids := q.Abort(func(id, _ string) bool { return id == "nope" }, errors.New("x")); len(ids) != 0 {
		t.Fatalf("aborted %v", ids)
	}
	q.Close(errors.New("done"))
}

func TestAddAfterCloseRunsCancelled(t *testing.T) {
	q := New(1)
	cause := errors.New("closed")
	q.Close(cause)
	done := make(chan error, 1)
	q.Add(Job{ID: "x", Run: func(ctx context.Context) { done <- context.Cause(ctx) }})
	if err := <-done; !errors.Is(err, cause) {
		t.Fatalf("cause = %v", err)
	}
	q.Close(cause)
}

func TestEveryJobRunsExactlyOnce(t *testing.T) {
	q := New(3)
	var mu sync.Mutex
	count := map[string]int{}
	for i := range 200 {
		id := fmt.Sprint(i)
		q.Add(Job{ID: id, Group: fmt.Sprint(i % 7), Safe: i%3 != 0, Run: func(ctx context.Context) {
			mu.Lock()
			count[id]++
			mu.Unlock()
		}})
		if i%11 == 0 {
			q.Abort(func(_, g string) bool { return g == "3" }, errors.New("x"))
		}
	}
	q.Close(errors.New("done"))
	for i := range 200 {
		if c := count[fmt.Sprint(i)]; c != 1 {
			t.Fatalf("job %d ran %d times", i, c)
		}
	}
}

// goroutineID returns the id of the calling goroutine, from its stack
// header ("goroutine N [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// TestWorkersAreReused checks that jobs run one after another share a
// goroutine (whose stack the first job grew), that a job added after the
// worker went idle runs, and that Close ends the idle workers (goleak).
func TestWorkersAreReused(t *testing.T) {
	q := New(4)
	ran := make(chan string)
	for i := range 50 {
		q.Add(Job{ID: strconv.Itoa(i), Group: "m", Safe: i%3 != 0, Run: func(context.Context) { ran <- goroutineID() }})
		if id := <-ran; id == "" {
			t.Fatal("no goroutine id in the stack header")
		}
	}
	// A chain where each job's end starts the next: one goroutine for all.
	seen := map[string]bool{}
	var mu sync.Mutex
	done := make(chan struct{})
	for i := range 20 {
		q.Add(Job{ID: "c" + strconv.Itoa(i), Group: "m", Safe: false, Run: func(context.Context) {
			mu.Lock()
			seen[goroutineID()] = true
			mu.Unlock()
			if i == 19 {
				close(done)
			}
		}})
	}
	<-done
	q.Close(errors.New("done"))
	if len(seen) > 4 {
		t.Errorf("20 jobs in a row ran on %d goroutines, want them to share the queue's workers (at most 4)", len(seen))
	}
}

// TestEveryJobRunsOnceUnderChurn adds, aborts and closes from many
// goroutines at once and checks that every job ran exactly once.
func TestEveryJobRunsOnceUnderChurn(t *testing.T) {
	q := New(3)
	var mu sync.Mutex
	runs := map[string]int{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				id := fmt.Sprintf("%d-%d", g, i)
				q.Add(Job{ID: id, Group: strconv.Itoa(i % 5), Safe: i%4 != 0, Run: func(ctx context.Context) {
					mu.Lock()
					runs[id]++
					mu.Unlock()
				}})
				if i%7 == 0 {
					q.Abort(func(_, group string) bool { return group == strconv.Itoa(i%5) }, errors.New("abort"))
				}
			}
		}()
	}
	wg.Wait()
	q.Close(errors.New("done"))
	if len(runs) != 8*200 {
		t.Errorf("%d jobs ran, want %d", len(runs), 8*200)
	}
	for id, n := range runs {
		if n != 1 {
			t.Errorf("job %s ran %d times", id, n)
		}
	}
}

// TestJobThatNeverReturns checks that a Run ended by runtime.Goexit (as
// t.FailNow does) still ends its job: the unsafe job after it runs.
func TestJobThatNeverReturns(t *testing.T) {
	q := New(2)
	q.Add(Job{ID: "exits", Group: "m", Safe: false, Run: func(context.Context) { runtime.Goexit() }})
	ran := make(chan struct{})
	q.Add(Job{ID: "after", Group: "m", Safe: false, Run: func(context.Context) { close(ran) }})
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the job after one that never returned did not start")
	}
	q.Close(errors.New("done"))
}
