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
	"sync"
)

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
	wg      sync.WaitGroup
}

// New returns a queue that runs at most max safe jobs at once (at least 1).
func New(max int) *Queue {
	if max < 1 {
		max = 1
	}
	return &Queue{max: max}
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
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		defer q.finish(e)
		e.job.Run(e.ctx)
	}()
}

func (q *Queue) finish(e *entry) {
	e.cancel(nil)
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, x := range q.entries {
		if x == e {
			q.entries = append(q.entries[:i], q.entries[i+1:]...)
			break
		}
	}
	q.scheduleLocked()
}
