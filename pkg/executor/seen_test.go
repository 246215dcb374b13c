package executor

import (
	"fmt"
	"testing"
)

// The ids of old calls take a fixed amount of memory: the window forgets
// the oldest once full, and remembers the rest with their tool.
func TestSeenIDsWindow(t *testing.T) {
	w := newSeenIDs()
	const total = seenCalls + 500
	for i := range total {
		w.add(fmt.Sprintf("toolu_%024d", i), fmt.Sprint("Tool", i%3))
	}
	if len(w.names) != seenCalls || len(w.ring) != seenCalls {
		t.Fatalf("window holds %d names and %d hashes, want %d", len(w.names), len(w.ring), seenCalls)
	}
	for i := range total {
		name, ok := w.lookup(fmt.Sprintf("toolu_%024d", i))
		if forgotten := i < total-seenCalls; ok == forgotten {
			t.Fatalf("id %d: remembered %v, want %v", i, ok, !forgotten)
		}
		if ok && name != fmt.Sprint("Tool", i%3) {
			t.Fatalf("id %d: tool %q", i, name)
		}
	}
	if _, ok := w.lookup("toolu_never"); ok {
		t.Fatal("an id never added is remembered")
	}
}
