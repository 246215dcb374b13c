// Package testkit holds small helpers that many of the repository's tests
// share: a buffer that a child process or logger may write while the test
// reads it, the end of a long log for a failure message, random ids, and
// a home in which the go command leaves nothing running, and a poll for a
// condition.
package testkit

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer safe for concurrent writers and readers.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Tail returns the last n bytes of s, marked as cut when it is longer.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// RandomHex returns n random bytes in hex, for names that must not collide
// with another run's.
func RandomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// GoTelemetryOff turns Go telemetry off for go commands run with HOME set
// to home. With it on (local, the default), a go command leaves a process
// behind that may still be writing counters under home when the test
// removes it.
func GoTelemetryOff(t testing.TB, home string) {
	t.Helper()
	dir := filepath.Join(home, ".config", "go", "telemetry")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mode"), []byte("off"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// WaitFor polls cond until it holds, every millisecond at first and every
// 20 ms after a while, and fails the test if it does not within limit.
// what says what was awaited.
func WaitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	delay := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(delay)
		delay = min(2*delay, 20*time.Millisecond)
	}
}
