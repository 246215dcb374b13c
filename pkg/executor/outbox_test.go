package executor

import (
	"context"
	"testing"
	"time"
)

func progress(id string, n int) *Event {
	return &Event{Time: time.Now(), Progress: &Progress{ToolUseID: id, Output: make([]byte, n), TotalBytes: uint64(n)}}
}

func TestOutboxMergesPendingProgressAndCountsDrops(t *testing.T) {
	o := newOutbox()
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
	o := newOutbox()
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
	o := newOutbox()
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
