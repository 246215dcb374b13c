package shell

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

func TestAppendUpTo(t *testing.T) {
	var buf []byte
	chunk := bytes.Repeat([]byte("x"), 1000)
	grows := 0
	for range 1000 {
		before := cap(buf)
		buf = appendUpTo(buf, chunk, 1<<20)
		if cap(buf) != before {
			grows++
		}
		if cap(buf) > 1<<20 {
			t.Fatalf("capacity %d past the limit", cap(buf))
		}
	}
	// 4 KiB doubling to 1 MiB: 9 allocations, where append's growth by a
	// quarter for large slices takes about twice as many.
	if len(buf) != 1000*1000 || grows > 10 {
		t.Errorf("%d bytes after %d allocations", len(buf), grows)
	}
	if !bytes.Equal(buf, bytes.Repeat([]byte("x"), 1000*1000)) {
		t.Error("content lost while growing")
	}
}

// TestOutputSpillsOnceTooLongToInline checks that output that can no
// longer be returned inline goes to the file at once instead of filling
// the memory the limits allow first.
func TestOutputSpillsOnceTooLongToInline(t *testing.T) {
	var files int
	dir := t.TempDir()
	c := newCapture(64<<20, 100<<10, func() (*os.File, error) {
		files++
		return os.CreateTemp(dir, "out")
	})
	defer c.closeFile()
	c.write(bytes.Repeat([]byte("a"), readChunk))
	if files != 0 {
		t.Fatalf("output of one pipe read spilled")
	}
	c.write([]byte("b"))
	if files != 1 || len(c.head) != readChunk || cap(c.head) > readChunk {
		t.Errorf("after %d bytes: %d files, head of %d bytes (capacity %d)", readChunk+1, files, len(c.head), cap(c.head))
	}
	out, dropped, _, total := c.next(1 << 30)
	for len(out) < int(total) && dropped == 0 {
		more, d, _, _ := c.next(1 << 30)
		if len(more) == 0 {
			break
		}
		out, dropped = append(out, more...), d
	}
	if dropped != 0 || len(out) != readChunk+1 || out[len(out)-1] != 'b' {
		t.Errorf("progress read back %d bytes (%d dropped), want all %d", len(out), dropped, readChunk+1)
	}
}

// TestProgressWithoutFile checks that when the output file cannot be made,
// progress still carries the output the memory limit allows (half of it,
// the head), and only the rest is reported as dropped.
func TestProgressWithoutFile(t *testing.T) {
	const memory = 4 << 20
	c := newCapture(memory, 100<<10, func() (*os.File, error) { return nil, errors.New("no space left on device") })
	for range 4 {
		c.write(bytes.Repeat([]byte("x"), readChunk))
	}
	var got, dropped uint64
	for {
		out, d, _, _ := c.next(1 << 30)
		if len(out) == 0 && d == 0 {
			break
		}
		got, dropped = got+uint64(len(out)), dropped+d
	}
	if got != 4*readChunk || dropped != 0 {
		t.Errorf("progress carried %d bytes and dropped %d of %d, want all of it (within %d bytes of memory)", got, dropped, 4*readChunk, memory/2)
	}
}
