package executor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/tool"
)

func progress(id string, n int) *Event {
	return &Event{Time: time.Now(), Progress: &Progress{ToolUseID: id, Output: make([]byte, n), TotalBytes: uint64(n)}}
}

func TestOutboxMergesPendingProgressAndCountsDrops(t *testing.T) {
	o := newOutbox(0, false)
	o.pushProgress(progress("a", 100))
	o.push(&Event{Accepted: &Accepted{ToolUseID: "b"}})
	o.pushProgress(progress("a", maxPendingProgress)) // merged into the first; overflows
	ctx := context.Background()
	ev, _ := o.next(ctx)
	p := ev.Progress
	if p == nil || len(p.Output) != maxPendingProgress || p.Dropped != 100 {
		t.Fatalf("merged progress: len %d dropped %d", len(p.Output), p.Dropped)
	}
	if ev, _ := o.next(ctx); ev.Accepted == nil {
		t.Fatalf("second event %+v, want the Accepted in its original place", ev)
	}
	// Once sent, a new progress event starts afresh.
	o.pushProgress(progress("a", 10))
	if ev, _ := o.next(ctx); len(ev.Progress.Output) != 10 || ev.Seq != 3 {
		t.Fatalf("fresh progress %+v", ev)
	}
}

func TestOutboxReplay(t *testing.T) {
	o := newOutbox(0, false)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		o.push(&Event{Accepted: &Accepted{}})
		if _, err := o.next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	hello := o.numbered(&Event{Hello: &Hello{}})
	evs, complete := o.replay(2)
	if !complete || len(evs) != 3 || evs[0].Seq != 3 || evs[2].Seq != 5 {
		t.Fatalf("replay after 2: %d events, complete %v", len(evs), complete)
	}
	if hello.Seq != 6 {
		t.Fatalf("hello seq %d", hello.Seq)
	}
	// Trimming non-progress events makes an old replay incomplete.
	o.mu.Lock()
	o.trimLocked()
	o.mu.Unlock()
	if _, complete := o.replay(0); complete {
		t.Fatal("replay from 0 claims completeness after the first event was trimmed")
	}
	if _, complete := o.replay(1); !complete {
		t.Fatal("replay from 1 should be complete")
	}
}

func TestOutboxCloseDrainsThenEnds(t *testing.T) {
	o := newOutbox(0, false)
	o.push(&Event{Accepted: &Accepted{}})
	o.close()
	o.push(&Event{Accepted: &Accepted{}}) // dropped: closed
	ctx := context.Background()
	if _, err := o.next(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := o.next(ctx); err != ErrSessionClosed {
		t.Fatalf("after drain: %v", err)
	}
}

// A reader that keeps taking events gets every byte: the writer waits for
// room instead of dropping.
func TestOutboxProgressWaitsForAReaderThatKeepsUp(t *testing.T) {
	o := newOutbox(0, false)
	o.stall = time.Hour // the reader below never stalls, however loaded the machine
	o.pushProgress(progress("a", maxPendingProgress))
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.pushProgress(progress("a", maxPendingProgress)) // waits: the pending event is full
	}()
	ctx := context.Background()
	for i := range 2 {
		ev, err := o.next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p := ev.Progress; len(p.Output) != maxPendingProgress || p.Dropped != 0 {
			t.Fatalf("event %d: %d bytes, %d dropped; want all %d bytes", i, len(p.Output), p.Dropped, maxPendingProgress)
		}
	}
	<-done
}

// A reader that takes nothing makes progress drop, counted, instead of
// holding up the writer.
func TestOutboxProgressDropsForAStalledReader(t *testing.T) {
	o := newOutbox(0, false)
	o.stall = 0
	o.pushProgress(progress("a", maxPendingProgress))
	o.pushProgress(progress("a", 100))
	o.pushProgress(progress("b", 10)) // another call's progress is unaffected
	ctx := context.Background()
	ev, _ := o.next(ctx)
	if p := ev.Progress; p.ToolUseID != "a" || len(p.Output) != maxPendingProgress || p.Dropped != 100 {
		t.Fatalf("stalled progress: %+v", p)
	}
	if ev, _ := o.next(ctx); ev.Progress.ToolUseID != "b" || len(ev.Progress.Output) != 10 {
		t.Fatalf("other call's progress: %+v", ev.Progress)
	}
	// Once the reader took it, the call's progress is queued afresh.
	o.pushProgress(progress("a", 10))
	if ev, _ := o.next(ctx); len(ev.Progress.Output) != 10 || ev.Progress.Dropped != 0 {
		t.Fatalf("after the stall: %+v", ev.Progress)
	}
}

// Closing the outbox releases a writer waiting for room.
func TestOutboxCloseReleasesProgressWriter(t *testing.T) {
	o := newOutbox(0, false)
	o.stall, o.maxWait = time.Hour, time.Hour
	o.pushProgress(progress("a", maxPendingProgress))
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.pushProgress(progress("a", 1))
		o.pushProgress(progress("a", maxPendingProgress))
	}()
	o.close()
	<-done
}

// The replay log is bounded by size, not only by count: large Results
// leave it once it holds more than maxLogBytes, progress before them.
func TestOutboxReplayLogIsBoundedBySize(t *testing.T) {
	o := newOutbox(0, false)
	ctx := context.Background()
	big := strings.Repeat("x", 100<<10)
	send := func(ev *Event) {
		t.Helper()
		o.push(ev)
		if _, err := o.next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	send(progress("p", 1<<20)) // the oldest event, and progress
	const results = 100        // 10 MiB of output in all
	for i := range results {
		send(&Event{Result: &CallResult{ToolUseID: fmt.Sprint("r", i), Result: tool.Text(big)}})
	}
	o.mu.Lock()
	logged, bytes, progressLeft := len(o.log), o.logBytes, o.logProgress
	o.mu.Unlock()
	if bytes > maxLogBytes || bytes < maxLogBytes-(110<<10) {
		t.Fatalf("log holds %d bytes, want just under %d", bytes, maxLogBytes)
	}
	if progressLeft != 0 {
		t.Fatal("the progress event outlived Results in the log")
	}
	evs, complete := o.replay(0)
	if complete || len(evs) != logged || logged >= results {
		t.Fatalf("replay from 0: %d events, complete %v; want an incomplete replay of the %d logged", len(evs), complete, logged)
	}
	last := evs[len(evs)-1]
	if last.Result == nil || last.Result.ToolUseID != fmt.Sprint("r", results-1) {
		t.Fatalf("the newest Result is not the last event logged: %s", describe(last))
	}
	if _, complete := o.replay(evs[0].Seq - 1); !complete {
		t.Fatal("replay from just before the oldest logged event should be complete")
	}
}

func accepted(id string) *Event { return &Event{Accepted: &Accepted{ToolUseID: id}} }
func started(id string) *Event  { return &Event{Started: &Started{ToolUseID: id}} }
func result(id string) *Event   { return &Event{Result: &CallResult{ToolUseID: id}} }

// describe names an event for failure messages: kind and call.
func describe(ev *Event) string {
	switch {
	case ev == nil:
		return "none"
	case ev.Accepted != nil:
		return "accepted " + ev.Accepted.ToolUseID
	case ev.Started != nil:
		return "started " + ev.Started.ToolUseID
	case ev.Progress != nil:
		return "progress " + ev.Progress.ToolUseID
	case ev.Result != nil:
		return "result " + ev.Result.ToolUseID
	case ev.AbortAck != nil:
		return "abort ack"
	}
	return "other"
}

// expectEvents takes len(want) events and compares them with want, then
// checks that nothing else may go yet.
func expectEvents(t *testing.T, o *outbox, want ...string) {
	t.Helper()
	for i, w := range want {
		ev, err := o.next(context.Background())
		if err != nil {
			t.Fatalf("event %d: %v, want %s", i, err, w)
		}
		if got := describe(ev); got != w {
			t.Fatalf("event %d is %s, want %s", i, got, w)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ev, err := o.next(ctx); err == nil {
		t.Fatalf("after %v: %s may go too, want it held", want, describe(ev))
	}
}

// Accepted and Started wait for their call's next event and then go out
// with it, in order; other calls' events pass them meanwhile.
func TestOutboxHoldsLifecycleEventsForTheCallsNextEvent(t *testing.T) {
	o := newOutbox(time.Hour, false)
	o.push(accepted("a"))
	o.push(started("a"))
	o.push(accepted("b"))
	o.push(started("b"))
	expectEvents(t, o) // all held
	o.push(result("a"))
	expectEvents(t, o, "accepted a", "started a", "result a")
	o.pushProgress(progress("b", 10))
	expectEvents(t, o, "accepted b", "started b", "progress b")
	o.push(accepted("c"))
	o.push(accepted("d"))
	o.push(&Event{AbortAck: &AbortAck{ToolUseIDs: []string{"c"}}})
	expectEvents(t, o, "accepted c", "accepted d") // the ack waits for c
	o.push(result("c"))
	expectEvents(t, o, "abort ack", "result c")
}

// With fold, a call whose Result comes while its Accepted and Started are
// held gets the Result alone. Whatever else releases them (progress, the
// hold's end, an AbortAck) sends them as without fold, and a duplicate's
// Accepted and an AbortAck held for the call are never left out.
func TestOutboxFoldsTheLifecycleOfShortCalls(t *testing.T) {
	o := newOutbox(time.Hour, true)
	o.push(accepted("a"))
	o.push(started("a"))
	o.push(accepted("b"))
	expectEvents(t, o) // all held
	o.push(result("a"))
	expectEvents(t, o, "result a")
	if len(o.held) != 1 || o.held["b"] != 1 {
		t.Fatalf("held = %v, want only b's Accepted", o.held)
	}
	o.push(started("b"))
	o.pushProgress(progress("b", 10))
	o.push(result("b"))
	expectEvents(t, o, "accepted b", "started b", "progress b", "result b")

	o.push(&Event{Accepted: &Accepted{ToolUseID: "c", Duplicate: true}})
	o.push(result("c"))
	expectEvents(t, o, "accepted c", "result c")

	o.push(accepted("d"))
	o.push(started("d"))
	o.push(&Event{AbortAck: &AbortAck{ToolUseIDs: []string{"d"}}}) // sends what is held first
	o.push(result("d"))
	expectEvents(t, o, "accepted d", "started d", "abort ack", "result d")

	o.push(accepted("e"))
	o.push(&Event{AbortAck: &AbortAck{ToolUseIDs: []string{"e", "f"}}})
	o.push(started("f"))
	o.push(result("f"))
	expectEvents(t, o, "accepted e", "abort ack", "result f")
	if len(o.held) != 0 {
		t.Fatalf("held = %v after every call's Result, want none", o.held)
	}

	o = newOutbox(5*time.Millisecond, true)
	o.push(accepted("slow"))
	o.push(started("slow"))
	expectEvents(t, o, "accepted slow", "started slow") // after the hold
	o.push(result("slow"))
	expectEvents(t, o, "result slow")
}

// An AbortAck waits for the first event of a call it stops, whichever of
// them that is, and never overtakes events pushed before it; one that
// stops nothing goes at once.
func TestOutboxHoldsAnAbortAckForTheStoppedCalls(t *testing.T) {
	o := newOutbox(time.Hour, false)
	o.push(&Event{AbortAck: &AbortAck{}})
	expectEvents(t, o, "abort ack")
	o.push(result("x"))
	o.push(&Event{AbortAck: &AbortAck{ToolUseIDs: []string{"a", "b"}}})
	o.push(result("other"))
	expectEvents(t, o, "result x", "result other")
	o.push(result("b"))
	o.push(result("a"))
	expectEvents(t, o, "abort ack", "result b", "result a")

	o = newOutbox(5*time.Millisecond, false)
	o.push(&Event{AbortAck: &AbortAck{ToolUseIDs: []string{"slow"}}})
	expectEvents(t, o, "abort ack") // after its hold
}

// A held event goes out on its own once the hold ends, and at once when the
// outbox closes.
func TestOutboxReleasesHeldEventsInTime(t *testing.T) {
	o := newOutbox(5*time.Millisecond, false)
	o.push(accepted("a"))
	o.push(started("a"))
	expectEvents(t, o, "accepted a", "started a")

	o = newOutbox(time.Hour, false)
	o.push(accepted("b"))
	o.close()
	expectEvents(t, o, "accepted b")
	if _, err := o.next(context.Background()); err != ErrSessionClosed {
		t.Fatalf("after the drain: %v, want ErrSessionClosed", err)
	}
}

// Events held back do not count as waiting for the reader: a call's first
// progress after a long hold finds a reader that was idle, not stalled, and
// its output waits for it instead of being dropped.
func TestOutboxHeldEventsDoNotMakeTheReaderLookStalled(t *testing.T) {
	o := newOutbox(time.Hour, false)
	o.stall, o.maxWait = time.Minute, time.Minute
	o.push(accepted("a"))
	o.mu.Lock()
	o.lastMove = time.Now().Add(-time.Hour) // held that long
	o.mu.Unlock()
	o.pushProgress(progress("a", maxPendingProgress))
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.pushProgress(progress("a", maxPendingProgress)) // waits: the pending event is full
	}()
	// Read only once the writer waits for room, or has given up waiting.
	for waiting := false; !waiting; {
		select {
		case <-done:
			waiting = true
		default:
			o.mu.Lock()
			pp := o.progress["a"]
			waiting = pp != nil && pp.taken != nil
			o.mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}
	if ev, _ := o.next(context.Background()); ev.Accepted == nil {
		t.Fatalf("first event %s, want the Accepted released by the progress", describe(ev))
	}
	for i := range 2 {
		ev, err := o.next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		p := ev.Progress
		if p == nil {
			t.Fatalf("event %d is %s, want progress", i, describe(ev))
		}
		if len(p.Output) != maxPendingProgress || p.Dropped != 0 {
			t.Fatalf("progress %d: %d bytes, %d dropped; want all %d bytes", i, len(p.Output), p.Dropped, maxPendingProgress)
		}
	}
	<-done
}

// A reader whose context ended (a stream that broke, or one another
// stream superseded) takes no event: the next reader gets it.
func TestOutboxReaderThatIsGoneTakesNothing(t *testing.T) {
	o := newOutbox(0, false)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	o.push(&Event{Accepted: &Accepted{ToolUseID: "a"}})
	if ev, err := o.next(gone); err == nil {
		t.Fatalf("a reader that is gone took %+v", ev)
	}
	ev, err := o.next(context.Background())
	if err != nil || ev.Accepted == nil || ev.Seq != 1 {
		t.Fatalf("the next reader got %+v, %v; want the event, numbered 1", ev, err)
	}
}

// fullProgress is a progress event whose output fills one of the tools'
// progress buffers, each byte set to fill.
func fullProgress(id string, fill byte) *Event {
	b := tool.ProgressBuffer()[:tool.ProgressBufferSize]
	for i := range b {
		b[i] = fill
	}
	return &Event{Time: time.Now(), Progress: &Progress{ToolUseID: id, Output: b}}
}

// takeProgress pushes and takes n full progress events of call id; the
// taken events are returned.
func takeProgress(t *testing.T, o *outbox, id string, n int) []*Event {
	t.Helper()
	var evs []*Event
	for i := range n {
		o.pushProgress(fullProgress(id, byte(i)))
		ev, err := o.next(context.Background())
		if err != nil || ev.Progress == nil {
			t.Fatalf("progress %d: %s, %v", i, describe(ev), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// A progress buffer goes back to the tools once its event has left the
// log, when the reader that took the event is still the one taking
// events; events another reader took keep their output.
func TestOutboxRecyclesTheBuffersOfItsReader(t *testing.T) {
	o := newOutbox(0, false)
	perLog := maxLogBytes / (tool.ProgressBufferSize + 256) // events the log holds
	o.attach()
	first := takeProgress(t, o, "a", 4) // taken by the first reader
	o.attach()                          // a second one: the first is gone
	second := takeProgress(t, o, "a", 2*perLog)
	o.mu.Lock()
	logged, bytes := len(o.log), o.logBytes
	o.mu.Unlock()
	if logged != perLog || bytes > maxLogBytes {
		t.Fatalf("log holds %d events (%d bytes), want %d within %d bytes", logged, bytes, perLog, maxLogBytes)
	}
	for i, ev := range first {
		if len(ev.Progress.Output) != tool.ProgressBufferSize || ev.Progress.Output[0] != byte(i) {
			t.Fatalf("event %d of the first reader lost its output when trimmed: it may still be sending it", i)
		}
	}
	for i, ev := range second {
		trimmed := i < len(second)-perLog
		if recycled := ev.Progress.Output == nil; recycled != trimmed {
			t.Fatalf("event %d of %d of the current reader: recycled %v, want %v (trimmed from the log)", i, len(second), recycled, trimmed)
		}
		if !trimmed && ev.Progress.Output[tool.ProgressBufferSize-1] != byte(i) {
			t.Fatalf("event %d, still logged, holds another event's bytes", i)
		}
	}
	// Once the outbox is closed and drained, nothing is replayed any more:
	// the reader's buffers go back too.
	o.close()
	if _, err := o.next(context.Background()); err != ErrSessionClosed {
		t.Fatalf("next after close: %v", err)
	}
	for i, ev := range second[len(second)-perLog:] {
		if ev.Progress.Output != nil {
			t.Fatalf("logged event %d kept its buffer after the end", i)
		}
	}
	if evs, _ := o.replay(0); len(evs) != 0 {
		t.Fatalf("replay after the end: %d events", len(evs))
	}
}

// Output that fills less than half of its progress buffer is logged in
// a slice of its own size, so that a call printing a line now and then
// does not keep a whole buffer in the log for each line.
func TestOutboxLogsSmallOutputCompactly(t *testing.T) {
	o := newOutbox(0, false)
	out := append(tool.ProgressBuffer(), "line 1\n"...)
	o.pushProgress(&Event{Progress: &Progress{ToolUseID: "a", Output: out}})
	ev, err := o.next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := ev.Progress.Output; string(got) != "line 1\n" || tool.IsProgressBuffer(got) {
		t.Fatalf("logged output %q with capacity %d, want %q in a slice of its own", got, cap(got), "line 1\n")
	}
	o.mu.Lock()
	bytes := o.logBytes
	o.mu.Unlock()
	if bytes > 256+64 {
		t.Fatalf("the log counts %d bytes for one line of progress", bytes)
	}
	// Output that fills most of its buffer stays in it, uncopied, and the
	// log counts the whole buffer: that is the memory it keeps.
	most := tool.ProgressBuffer()[:3*tool.ProgressBufferSize/4]
	o.pushProgress(&Event{Progress: &Progress{ToolUseID: "a", Output: most}})
	if ev, err = o.next(context.Background()); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	added := o.logBytes - bytes
	o.mu.Unlock()
	if !tool.IsProgressBuffer(ev.Progress.Output) || added != 256+tool.ProgressBufferSize {
		t.Fatalf("three quarters of a buffer: logged in a buffer %v, counted as %d bytes; want the buffer, counted whole (%d)",
			tool.IsProgressBuffer(ev.Progress.Output), added, 256+tool.ProgressBufferSize)
	}
}
