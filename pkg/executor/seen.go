package executor

import "hash/maphash"

// seenCalls is how many calls past the finished window a session still
// recognises by id.
const seenCalls = 16384

// seenIDs remembers the ids of a session's older calls, and their tools,
// in a fixed amount of memory: a 64-bit hash of each of the last seenCalls
// ids. A repeated tool_use id is almost always a client's retry after a
// reconnect, which comes soon after the first; an id older than the window
// counts as new. Two ids share a hash with a chance of about one in 10^15
// per call over a full window.
type seenIDs struct {
	seed  maphash.Seed
	ring  []uint64 // hashes, oldest at next once full
	next  int
	names map[uint64]string // hash → tool name
}

func newSeenIDs() *seenIDs {
	return &seenIDs{seed: maphash.MakeSeed(), names: make(map[uint64]string)}
}

// add remembers id, forgetting the oldest id past seenCalls.
func (w *seenIDs) add(id, toolName string) {
	h := maphash.String(w.seed, id)
	if _, ok := w.names[h]; ok {
		return
	}
	if len(w.ring) < seenCalls {
		w.ring = append(w.ring, h)
	} else {
		delete(w.names, w.ring[w.next])
		w.ring[w.next] = h
		w.next = (w.next + 1) % seenCalls
	}
	w.names[h] = toolName
}

// lookup returns the tool of a remembered id.
func (w *seenIDs) lookup(id string) (toolName string, ok bool) {
	toolName, ok = w.names[maphash.String(w.seed, id)]
	return toolName, ok
}
