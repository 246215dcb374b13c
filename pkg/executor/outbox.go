package executor

import (
	"context"
	"sync"
	"time"
)

// Outbox limits. Progress is the only event whose size grows with a call's
// output, so it is the only one that is merged, capped and dropped.
const (
	// maxPendingProgress caps the output one pending progress event holds.
	maxPendingProgress = 256 << 10
	// maxLogEvents caps the events kept for replay after a reconnect.
	maxLogEvents = 20000
	// maxLogProgressBytes caps the progress output kept for replay.
	maxLogProgressBytes = 8 << 20
	// progressStall is how long the reader may take no event at all before
	// progress that does not fit is dropped instead of waited for.
	progressStall = 50 * time.Millisecond
	// maxProgressWait bounds one wait for room, however the reader moves.
	maxProgressWait = time.Second
)

// outbox numbers a session's events and hands them to one reader at a time.
// Only progress writers ever wait, and only for their own call: pending
// progress of a call is merged into one event, and output that does not fit
// waits while the reader keeps taking events (so a client that keeps up
// gets every byte) but is dropped and counted once the reader stalls (so a
// slow client never makes memory grow or the call wait long).
type outbox struct {
	mu       sync.Mutex // guards the fields below
	pending  []*Event
	progress map[string]*pendingProgress // the pending Progress event of each call
	stalled  map[string]bool             // calls dropping progress until their pending event is taken
	lastMove time.Time                   // when the reader last took an event, or events became pending
	log      []*Event                    // sent events, oldest first, for replay
	logBytes int
	seq      uint64
	lostUpTo uint64 // highest sequence number of a trimmed non-progress event
	closed   bool
	wake     chan struct{}

	stall   time.Duration // progressStall; tests change it
	maxWait time.Duration // maxProgressWait
}

// pendingProgress is a call's Progress event waiting to be sent.
type pendingProgress struct {
	ev    *Event
	taken chan struct{} // closed when the reader takes ev; made by the first waiter
}

func newOutbox() *outbox {
	return &outbox{progress: make(map[string]*pendingProgress), stalled: make(map[string]bool), wake: make(chan struct{}, 1),
		stall: progressStall, maxWait: maxProgressWait}
}

// appendLocked queues ev.
func (o *outbox) appendLocked(ev *Event) {
	if len(o.pending) == 0 {
		o.lastMove = time.Now()
	}
	o.pending = append(o.pending, ev)
	o.signalLocked()
}

func (o *outbox) signalLocked() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// push queues ev. Events pushed after close are dropped.
func (o *outbox) push(ev *Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	o.appendLocked(ev)
}

// pushProgress queues p, merging it into the call's pending progress event
// if one waits. When the merged output would exceed maxPendingProgress it
// waits for the reader to take the pending event, as long as the reader
// keeps taking events (progressStall) and at most maxProgressWait; past
// that the call's progress is dropped, and counted, until the reader takes
// its pending event.
func (o *outbox) pushProgress(ev *Event) {
	p := ev.Progress
	o.mu.Lock()
	defer o.mu.Unlock()
	var deadline time.Time
	for !o.closed {
		prev, ok := o.progress[p.ToolUseID]
		if !ok {
			if len(p.Output) > maxPendingProgress {
				p.Dropped += uint64(len(p.Output) - maxPendingProgress)
				p.Output = p.Output[:maxPendingProgress]
			}
			o.progress[p.ToolUseID] = &pendingProgress{ev: ev}
			o.appendLocked(ev)
			return
		}
		q := prev.ev.Progress
		room := maxPendingProgress - len(q.Output)
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(o.maxWait)
		}
		if room < len(p.Output) && !o.stalled[p.ToolUseID] {
			if now.Sub(o.lastMove) < o.stall && now.Before(deadline) {
				o.waitTakenLocked(prev, min(o.lastMove.Add(o.stall).Sub(now), deadline.Sub(now)))
				continue
			}
			o.stalled[p.ToolUseID] = true
		}
		if room >= len(p.Output) {
			q.Output = append(q.Output, p.Output...)
		} else {
			q.Output = append(q.Output, p.Output[:max(room, 0)]...)
			q.Dropped += uint64(len(p.Output) - max(room, 0))
		}
		q.Elapsed, q.TotalLines, q.TotalBytes = p.Elapsed, p.TotalLines, p.TotalBytes
		q.Dropped += p.Dropped
		prev.ev.Time = ev.Time
		return
	}
}

// waitTakenLocked waits, without the lock, until the reader takes pp, the
// outbox closes or d passes.
func (o *outbox) waitTakenLocked(pp *pendingProgress, d time.Duration) {
	if pp.taken == nil {
		pp.taken = make(chan struct{})
	}
	ch := pp.taken
	o.mu.Unlock()
	t := time.NewTimer(d)
	select {
	case <-ch:
	case <-t.C:
	}
	t.Stop()
	o.mu.Lock()
}

// next returns the next event, numbered and logged, waiting until one is
// pending, ctx ends, or the outbox is closed and empty.
func (o *outbox) next(ctx context.Context) (*Event, error) {
	for {
		o.mu.Lock()
		if len(o.pending) > 0 {
			ev := o.pending[0]
			o.pending[0] = nil
			o.pending = o.pending[1:]
			o.lastMove = time.Now()
			if ev.Progress != nil {
				id := ev.Progress.ToolUseID
				if pp := o.progress[id]; pp != nil && pp.taken != nil {
					close(pp.taken)
				}
				delete(o.progress, id)
				delete(o.stalled, id)
			}
			o.numberLocked(ev)
			o.mu.Unlock()
			return ev, nil
		}
		closed := o.closed
		o.mu.Unlock()
		if closed {
			return nil, ErrSessionClosed
		}
		select {
		case <-o.wake:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// numberLocked gives ev the next sequence number and logs it for replay.
func (o *outbox) numberLocked(ev *Event) {
	o.seq++
	ev.Seq = o.seq
	o.log = append(o.log, ev)
	if ev.Progress != nil {
		o.logBytes += len(ev.Progress.Output)
	}
	for len(o.log) > maxLogEvents || o.logBytes > maxLogProgressBytes {
		o.trimLocked()
	}
}

// trimLocked drops the oldest progress event from the log, or the oldest
// event if there is no progress left.
func (o *outbox) trimLocked() {
	for i, ev := range o.log {
		if ev.Progress != nil && o.logBytes > maxLogProgressBytes {
			o.logBytes -= len(ev.Progress.Output)
			o.log = append(o.log[:i], o.log[i+1:]...)
			return
		}
	}
	if o.log[0].Progress != nil {
		o.logBytes -= len(o.log[0].Progress.Output)
	} else {
		o.lostUpTo = o.log[0].Seq
	}
	o.log = o.log[1:]
}

// numbered assigns ev the next sequence number at once, bypassing pending
// events, without logging it for replay (a stream's Hello, which comes
// first on its own stream only).
func (o *outbox) numbered(ev *Event) *Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seq++
	ev.Seq = o.seq
	return ev
}

// replay returns the logged events numbered above after, and whether every
// non-progress event among them was still held (trimmed progress is not a
// loss: Results carry the whole output).
func (o *outbox) replay(after uint64) ([]*Event, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*Event
	for _, ev := range o.log {
		if ev.Seq > after {
			out = append(out, ev)
		}
	}
	return out, after >= o.lostUpTo
}

// lastSeq returns the highest sequence number assigned.
func (o *outbox) lastSeq() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seq
}

// close stops accepting events; next drains what is pending, then fails.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	for _, pp := range o.progress {
		if pp.taken != nil {
			close(pp.taken)
			pp.taken = nil
		}
	}
	o.signalLocked()
	o.mu.Unlock()
}
