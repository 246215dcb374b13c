package tool

import (
	"fmt"
	"sync"
)

// ByteQuota is a number of bytes a session may write somewhere, taken
// from as it writes and never given back: the output files the executor
// saves for it (whole outputs of shortened results, background commands'
// output). It is safe for concurrent use; a nil ByteQuota is unlimited.
type ByteQuota struct {
	// What names the quota in messages, e.g. "saved-output quota".
	what  string
	limit int64

	mu   sync.Mutex
	used int64
}

// NewByteQuota returns a quota of limit bytes; limit 0 or less gives nil
// (unlimited).
func NewByteQuota(what string, limit int64) *ByteQuota {
	if limit <= 0 {
		return nil
	}
	return &ByteQuota{what: what, limit: limit}
}

// Take takes n bytes, all or none: it returns a *QuotaError when fewer
// than n are left.
func (q *ByteQuota) Take(n int64) error {
	if q == nil || n <= 0 {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.used+n > q.limit {
		q.used = q.limit // what is left is too little to be of use
		return &QuotaError{What: q.what, Limit: q.limit}
	}
	q.used += n
	return nil
}

// Used returns the bytes taken so far.
func (q *ByteQuota) Used() int64 {
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.used
}

// QuotaError is a write refused because a session's quota was used up.
type QuotaError struct {
	What  string
	Limit int64
}

// Error names the quota and its size.
func (e *QuotaError) Error() string {
	return fmt.Sprintf("the session's %s (%s) was reached", e.What, FormatBytes(e.Limit))
}

// FormatBytes writes n in the largest binary unit that divides it: "512
// MiB", "3 GiB", "100 bytes".
func FormatBytes(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
