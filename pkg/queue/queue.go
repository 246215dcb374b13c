// Package queue schedules the tool calls of one session with Claude Code's
// concurrency rules: a call starts as soon as it is added if nothing runs, or
// if it and everything running are concurrency-safe (up to a maximum);
// a call that is not safe waits for everything before it and holds back
// everything after it.
//
// The queue knows nothing about tools: a Job is an id, a group (the assistant
// message), a safety verdict and a function to run. Aborting a queued job
// still runs its function, at once and with a cancelled context, so that the
// caller has exactly one place where every job ends.
package queue

import (
	"context"
	"slices"
	"sync"
	"time"
)

// workerIdle is how long a worker that finished a job waits for the next
// one before it ends.
const workerIdle = 5 * time.Second

// Job is one unit of work.
type Job struct {
	// ID identifies the job (the tool_use id).
	ID string
	// Group ties sibling jobs together (the assistant message id).
	Group string
	// Safe jobs may run in parallel with other safe jobs.
	Safe bool
	// Run does the work. Its context is cancelled, with a cause, when the job
	// is aborted or the queue closes. Run is called exactly once per job.
	Run func(ctx context.Context)
}

type state int

const (
	queued state = iota
	running
)

// A worker is a goroutine that runs jobs one after another. A job that
// starts on a worker finds the stack the earlier ones grew, where a new
// goroutine per job grew its stack again on every call; and when a job's
// end lets the next one start, the same goroutine goes on with it.
type worker struct {
	next chan *entry // the next job, handed over under the queue's lock
}

type entry struct {
	job    Job
	state  state
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// Queue runs jobs in order under the concurrency rules. It is safe for
// concurrent use.
type Queue struct {
	max int

	mu      sync.Mutex // guards the fields below
	entries []*entry   // queued and running jobs, in the order they were added
	closed  error
	idle    []*worker     // workers waiting for a job, most recent last
	quit    chan struct{} // closed by Close: idle workers end
	wg      sync.WaitGroup
}

// New returns a queue that runs at most max safe jobs at once (at least 1).
func New(max int) *Queue {
	if max < 1 {
		max = 1
	}
	return &Queue{max: max, quit: make(chan struct{})}
}

// Add queues j and starts it if the rules allow. If the queue is closed, j
// runs at once with a context already cancelled by the close cause.
func (q *Queue) Add(j Job) {
	ctx, cancel := context.WithCancelCause(context.Background())
	e := &entry{job: j, ctx: ctx, cancel: cancel}
	q.mu.Lock()
	if q.closed != nil {
		cancel(q.closed)
	}
	q.entries = append(q.entries, e)
	q.scheduleLocked()
	q.mu.Unlock()
}

// Abort cancels, with cause, every unfinished job for which match returns
// true, and returns their ids. Running jobs see their context cancelled;
// queued ones are started at once with the cancelled context.
func (q *Queue) Abort(match func(id, group string) bool, cause error) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var ids []string
	for _, e := range q.entries {
		if e.ctx.Err() == nil && match(e.job.ID, e.job.Group) {
			e.cancel(cause)
			ids = append(ids, e.job.ID)
		}
	}
	q.scheduleLocked()
	return ids
}

// Close aborts every job with cause, makes later Adds fail the same way, and
// waits until every job's Run has returned.
func (q *Queue) Close(cause error) {
	q.mu.Lock()
	if q.closed == nil {
		q.closed = cause
		close(q.quit)
	}
	for _, e := range q.entries {
		e.cancel(cause)
	}
	q.scheduleLocked()
	q.mu.Unlock()
	q.wg.Wait()
}

// Len returns the number of queued and running jobs.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.entries)
}

// scheduleLocked starts every job the rules allow, in order. A cancelled job
// always starts (it only reports its end). A queued unsafe job that cannot
// start stops the scan: nothing after it may overtake it.
func (q *Queue) scheduleLocked() {
	for _, e := range q.entries {
		if e.state != queued {
			continue
		}
		switch {
		case e.ctx.Err() != nil:
			q.startLocked(e)
		case q.canStartLocked(e.job.Safe):
			q.startLocked(e)
		case !e.job.Safe:
			return
		}
	}
}

func (q *Queue) canStartLocked(safe bool) bool {
	n := 0
	for _, e := range q.entries {
		if e.state != running {
			continue
		}
		if !safe || !e.job.Safe {
			return false
		}
		n++
	}
	return n < q.max
}

func (q *Queue) startLocked(e *entry) {
	e.state = running
	if n := len(q.idle); n > 0 {
		w := q.idle[n-1]
		q.idle = q.idle[:n-1]
		w.next <- e
		return
	}
	q.wg.Add(1)
	go q.work(e)
}

// work runs e, then every job handed to it, until it has been idle for
// workerIdle or the queue closes.
func (q *Queue) work(e *entry) {
	defer q.wg.Done()
	w := &worker{next: make(chan *entry, 1)}
	timer := time.NewTimer(workerIdle)
	defer timer.Stop()
	var running *entry
	defer func() {
		// A Run that never returned (runtime.Goexit) still ends its job,
		// or it would hold back every job after it.
		if running != nil {
			q.finish(running, nil)
		}
	}()
	for e != nil {
		running = e
		e.job.Run(e.ctx)
		running = nil
		switch q.finish(e, w) {
		case handedOver:
			// The job's end started the next one here.
			e = <-w.next
			continue
		case retired:
			return
		}
		timer.Reset(workerIdle)
		select {
		case e = <-w.next:
		case <-timer.C:
			e = q.retire(w)
		case <-q.quit:
			e = q.retire(w)
		}
	}
}

// What a worker does after its job: run the next one it was handed, wait
// for one, or end.
const (
	handedOver = iota
	waiting
	retired
)

// finish removes a job that has run, offers w for the next one unless the
// queue is closed (or w is nil), and starts what the rules now allow. It
// returns what w does next.
func (q *Queue) finish(e *entry, w *worker) int {
	e.cancel(nil)
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, x := range q.entries {
		if x == e {
			// slices.Delete clears the slot the shift leaves: a finished job
			// (and all its call holds) is not kept there.
			q.entries = slices.Delete(q.entries, i, i+1)
			break
		}
	}
	if q.closed != nil || w == nil {
		q.scheduleLocked()
		return retired
	}
	q.idle = append(q.idle, w)
	q.scheduleLocked()
	if len(w.next) > 0 {
		return handedOver
	}
	return waiting
}

// retire takes idle worker w off the idle list so that it can end. If a
// job was handed to it meanwhile, it returns that job instead.
func (q *Queue) retire(w *worker) *entry {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, x := range q.idle {
		if x == w {
			q.idle = slices.Delete(q.idle, i, i+1)
			return nil
		}
	}
	return <-w.next
}
