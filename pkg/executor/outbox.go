package executor

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/toolwire/toolwire/pkg/tool"
)

// Outbox limits. Progress is the only event whose size grows with a call's
// output, so it is the only one that is merged, capped and dropped.
const (
	// maxPendingProgress caps the output one pending progress event holds:
	// what one of the tools' progress buffers has room for.
	maxPendingProgress = tool.ProgressBufferSize
	// maxLogEvents caps the events kept for replay after a reconnect.
	maxLogEvents = 20000
	// maxLogBytes caps the size of the events kept for replay (as
	// eventSize counts it). Replay is for what a broken stream took and
	// did not deliver, which the stream's window bounds (4 MiB by
	// default); progress goes first, and a Result trimmed from the log
	// can still be had again by repeating its tool_use id while its call
	// is among the session's last keepFinishedCalls.
	maxLogBytes = 4 << 20
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
//
// Accepted and Started are reported at the pace of progress: they wait for
// their call's next event, at most one progress interval (hold). Most calls
// end within that time, and then the reader wakes once and sends the three
// events together instead of waking three times, and so does the client;
// for a short call each of those wake-ups costs more than the call's own
// work, and a call sharing the CPUs with them runs slower. A call that
// waits or runs longer is reported that much later; the events carry the
// time they happened. A call's events keep their order; events of
// different calls may pass held ones. With fold, a call whose Result comes
// while its Accepted and Started are held gets the Result alone, whose
// timings say when they happened: one event instead of three.
type outbox struct {
	mu       sync.Mutex // guards the fields below
	pending  []queued
	progress map[string]*pendingProgress // the pending Progress event of each call
	stalled  map[string]bool             // calls dropping progress until their pending event is taken
	lastMove time.Time                   // when the reader last took an event, or an event became ready for it
	log      []logged                    // sent events, oldest first, for replay
	logBytes int                         // eventSize of the events in log
	// reader counts the readers attached so far; the one attached last is
	// the only one that takes events.
	reader uint64
	// logProgress counts the progress events in log.
	logProgress int
	seq         uint64
	lostUpTo    uint64 // highest sequence number of a trimmed non-progress event
	closed      bool
	wake        chan struct{}
	held        map[string]int // held events of each call
	timer       *time.Timer    // wakes the reader when a held event is due
	timerDue    time.Time      // when timer fires; zero when it is not armed

	stall   time.Duration // progressStall; tests change it
	maxWait time.Duration // maxProgressWait
	hold    time.Duration // how long Accepted and Started wait for their call's next event
	// fold leaves out the held Accepted and Started of a call whose Result
	// comes while they are held (LIFECYCLE_FOLDED).
	fold bool
}

// logged is an event in the log and the reader that took it.
type logged struct {
	ev     *Event
	reader uint64
}

// queued is a pending event. An event with a due time is held until then
// or until its call's next event comes.
type queued struct {
	ev  *Event
	due time.Time
}

// callOf returns the call an event belongs to, "" for session events.
func callOf(ev *Event) string {
	switch {
	case ev.Accepted != nil:
		return ev.Accepted.ToolUseID
	case ev.Started != nil:
		return ev.Started.ToolUseID
	case ev.Progress != nil:
		return ev.Progress.ToolUseID
	case ev.PermissionRequest != nil:
		return ev.PermissionRequest.ToolUseID
	case ev.Result != nil:
		return ev.Result.ToolUseID
	}
	return ""
}

// pendingProgress is a call's Progress event waiting to be sent.
type pendingProgress struct {
	ev    *Event
	taken chan struct{} // closed when the reader takes ev; made by the first waiter
}

// newOutbox returns an outbox that holds Accepted and Started for up to
// hold (none when hold is 0), and with fold leaves them out of a call whose
// Result comes within the hold.
func newOutbox(hold time.Duration, fold bool) *outbox {
	return &outbox{progress: make(map[string]*pendingProgress), stalled: make(map[string]bool), wake: make(chan struct{}, 1),
		held: make(map[string]int), stall: progressStall, maxWait: maxProgressWait, hold: hold, fold: fold}
}

// appendLocked queues ev. Accepted and Started are held; any other event
// of a call first releases what is held of it, and an AbortAck releases
// everything held, so that it never overtakes what it acknowledges. An
// AbortAck that stops calls is held in turn, until the first event of one
// of them (their Result, as a rule): the two then reach the client in one
// wake-up, and the Result is not sent behind a send of its own
// acknowledgement while the calls are being stopped.
func (o *outbox) appendLocked(ev *Event) {
	now := time.Now()
	if ev.AbortAck != nil {
		o.releaseLocked(func(string) bool { return true })
	}
	if ids := heldCalls(ev); len(ids) > 0 && o.hold > 0 && (ev.Accepted != nil || ev.Started != nil || ev.AbortAck != nil) {
		due := now.Add(o.hold)
		o.pending = append(o.pending, queued{ev: ev, due: due})
		for _, id := range ids {
			o.held[id]++
		}
		o.armLocked(due)
		return
	}
	// The reader has been idle, not slow, until now if nothing waited for
	// it: held events do not count.
	if !o.anyReadyLocked() {
		o.lastMove = now
	}
	if id := callOf(ev); id != "" && o.held[id] > 0 {
		if o.fold && ev.Result != nil {
			o.foldLocked(id)
		}
		o.releaseLocked(func(held string) bool { return held == id })
	}
	o.pending = append(o.pending, queued{ev: ev})
	o.signalLocked()
}

// heldCalls returns the calls whose next event releases ev when it is
// held: its own call, or those an AbortAck stops.
func heldCalls(ev *Event) []string {
	if ev.AbortAck != nil {
		return ev.AbortAck.ToolUseIDs
	}
	if id := callOf(ev); id != "" {
		return []string{id}
	}
	return nil
}

// anyReadyLocked reports whether a pending event may go at once.
func (o *outbox) anyReadyLocked() bool {
	for _, q := range o.pending {
		if q.due.IsZero() {
			return true
		}
	}
	return false
}

// releaseLocked ends the hold of the held events of every call match
// accepts.
func (o *outbox) releaseLocked(match func(id string) bool) {
	for i := range o.pending {
		q := &o.pending[i]
		if q.due.IsZero() {
			continue
		}
		if ids := heldCalls(q.ev); slices.ContainsFunc(ids, match) {
			q.due = time.Time{}
			for _, id := range ids {
				delete(o.held, id)
			}
		}
	}
}

// foldLocked drops call id's held Accepted and Started: its Result, which
// comes now, says when they happened. A duplicate's Accepted stays, and so
// does an AbortAck held for the call.
func (o *outbox) foldLocked(id string) {
	o.pending = slices.DeleteFunc(o.pending, func(q queued) bool {
		ev := q.ev
		drop := !q.due.IsZero() && callOf(ev) == id &&
			(ev.Started != nil || ev.Accepted != nil && !ev.Accepted.Duplicate)
		if drop {
			o.held[id]--
		}
		return drop
	})
	if o.held[id] <= 0 {
		delete(o.held, id)
	}
}

// armLocked makes sure the reader is woken by due.
func (o *outbox) armLocked(due time.Time) {
	if !o.timerDue.IsZero() && !o.timerDue.After(due) {
		return
	}
	o.timerDue = due
	d := time.Until(due)
	if o.timer == nil {
		o.timer = time.AfterFunc(d, o.timerFired)
		return
	}
	o.timer.Reset(d)
}

func (o *outbox) timerFired() {
	o.mu.Lock()
	o.timerDue = time.Time{}
	o.signalLocked()
	o.mu.Unlock()
}

// takeLocked removes and returns the first pending event that may go: not
// held, or held past its due time (which also releases the rest of its
// call). After close nothing is held. It arms the timer for the earliest
// held event when none may go.
func (o *outbox) takeLocked() *Event {
	now := time.Now()
	for i, q := range o.pending {
		if !q.due.IsZero() && !o.closed && now.Before(q.due) {
			continue
		}
		if !q.due.IsZero() {
			ids := heldCalls(q.ev)
			o.releaseLocked(func(held string) bool { return slices.Contains(ids, held) })
		}
		copy(o.pending[i:], o.pending[i+1:])
		o.pending[len(o.pending)-1] = queued{}
		o.pending = o.pending[:len(o.pending)-1]
		return q.ev
	}
	if len(o.pending) > 0 {
		o.armLocked(o.pending[0].due) // all held; the first is due first
	}
	return nil
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
		// p goes no further: its buffer, the writer's until now, is free.
		tool.RecycleProgressBuffer(p.Output)
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
		if ctx.Err() != nil {
			// A reader that is gone (its stream broke, or another resumed
			// the session) takes nothing: an event it numbered and could
			// not send would be lost to the reader after it, whose replay
			// ended before. A wake-up it took goes on to that reader.
			o.signalLocked()
			o.mu.Unlock()
			return nil, context.Cause(ctx)
		}
		if ev := o.takeLocked(); ev != nil {
			o.lastMove = time.Now()
			if ev.Progress != nil {
				id := ev.Progress.ToolUseID
				if pp := o.progress[id]; pp != nil && pp.taken != nil {
					close(pp.taken)
				}
				delete(o.progress, id)
				delete(o.stalled, id)
				compact(ev.Progress)
			}
			o.numberLocked(ev)
			o.mu.Unlock()
			return ev, nil
		}
		closed := o.closed && len(o.pending) == 0
		if closed {
			o.emptyLogLocked()
		}
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

// compact moves output that fills less than half of a progress buffer
// to a slice of its own size and gives the buffer back: the log keeps
// what was sent, and a call that prints a line now and then would
// otherwise keep a whole buffer for each.
func compact(p *Progress) {
	if tool.IsProgressBuffer(p.Output) && len(p.Output) < tool.ProgressBufferSize/2 {
		small := append([]byte(nil), p.Output...)
		tool.RecycleProgressBuffer(p.Output)
		p.Output = small
	}
}

// attach makes the next reader the current one, the only one that takes
// events from then on (the one before has been cancelled).
func (o *outbox) attach() {
	o.mu.Lock()
	o.reader++
	o.mu.Unlock()
}

// numberLocked gives ev the next sequence number and logs it for replay.
func (o *outbox) numberLocked(ev *Event) {
	o.seq++
	ev.Seq = o.seq
	o.log = append(o.log, logged{ev: ev, reader: o.reader})
	o.logBytes += eventSize(ev)
	if ev.Progress != nil {
		o.logProgress++
	}
	for len(o.log) > maxLogEvents || o.logBytes > maxLogBytes {
		o.trimLocked()
	}
}

// eventSize is what an event is counted as against maxLogBytes: its
// output (the memory that holds it) and content, and a fixed share for
// the rest.
func eventSize(ev *Event) int {
	n := 256
	switch {
	case ev.Progress != nil:
		n += cap(ev.Progress.Output)
	case ev.Result != nil && ev.Result.Result != nil:
		for _, c := range ev.Result.Result.Content {
			n += len(c.Text) + len(c.Data)
		}
		n += len(ev.Result.Result.Structured)
	}
	return n
}

// trimLocked drops the oldest progress event from the log while the log
// is over its size and holds progress, or else the oldest event.
func (o *outbox) trimLocked() {
	if o.logBytes > maxLogBytes && o.logProgress > 0 {
		for i, l := range o.log {
			if l.ev.Progress != nil {
				o.logBytes -= eventSize(l.ev)
				o.logProgress--
				o.log = append(o.log[:i], o.log[i+1:]...)
				o.recycleLocked(l)
				return
			}
		}
	}
	l := o.log[0]
	o.logBytes -= eventSize(l.ev)
	if l.ev.Progress != nil {
		o.logProgress--
		o.recycleLocked(l)
	} else {
		o.lostUpTo = l.ev.Seq
	}
	o.log[0] = logged{}
	o.log = o.log[1:]
}

// recycleLocked gives back the output buffer of a progress event that
// has left the log, when the current reader took it: that reader sends
// one event at a time and trims only while it takes the next, so it is
// done with the event. A reader before it may still be sending the
// event, or a later reader replaying it; either way its buffer is left
// to the garbage collector.
func (o *outbox) recycleLocked(l logged) {
	if l.reader == o.reader {
		tool.RecycleProgressBuffer(l.ev.Progress.Output)
		l.ev.Progress.Output = nil
	}
}

// emptyLogLocked drops the log of a closed outbox whose last event has
// been taken: nothing is replayed after the end, and the reader asking
// for more has sent what it took.
func (o *outbox) emptyLogLocked() {
	for _, l := range o.log {
		if l.ev.Progress != nil {
			o.recycleLocked(l)
		}
	}
	o.log, o.logBytes, o.logProgress = nil, 0, 0
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
	for _, l := range o.log {
		if l.ev.Seq > after {
			out = append(out, l.ev)
		}
	}
	return out, after >= o.lostUpTo
}

// close stops accepting events; next drains what is pending, then fails.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	if o.timer != nil {
		o.timer.Stop()
		o.timerDue = time.Time{}
	}
	for _, pp := range o.progress {
		if pp.taken != nil {
			close(pp.taken)
			pp.taken = nil
		}
	}
	o.signalLocked()
	o.mu.Unlock()
}
