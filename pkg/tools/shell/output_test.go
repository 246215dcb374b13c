package shell

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
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

// patternReader yields size bytes, byte i being i%251, in reads of sizes
// that vary from 1 byte to the whole buffer.
type patternReader struct {
	off, size int
	rng       *rand.Rand
}

func (r *patternReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	n := min(len(p), r.size-r.off)
	if r.rng.IntN(3) > 0 {
		n = 1 + r.rng.IntN(n)
	}
	for i := range n {
		p[i] = byte((r.off + i) % 251)
	}
	r.off += n
	return n, nil
}

// TestProgressKeepsPipeReads reads output through readFrom while progress
// takes it, keeping the slices progress got (which may be the pipe reads
// themselves): every byte arrives once, in order, and none is overwritten
// by a later read; the file holds the whole output.
func TestProgressKeepsPipeReads(t *testing.T) {
	for seed := range uint64(8) {
		const size = 8 << 20
		f, err := os.CreateTemp(t.TempDir(), "out")
		if err != nil {
			t.Fatal(err)
		}
		c := newCapture(64<<20, 100<<10, func() (*os.File, error) { return f, nil })
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.readFrom(&patternReader{size: size, rng: rand.New(rand.NewPCG(seed, 1))})
		}()
		var got [][]byte
		var n, dropped uint64
		take := func() bool {
			out, d, _, _ := c.next(progressChunk)
			got, n, dropped = append(got, out), n+uint64(len(out)), dropped+d
			return len(out) > 0 || d > 0
		}
		for running := true; running; {
			select {
			case <-done:
				running = false
			default:
				take()
			}
		}
		for take() {
		}
		if n != size || dropped != 0 {
			t.Fatalf("seed %d: progress got %d bytes, %d dropped, want %d", seed, n, dropped, size)
		}
		off := 0
		for _, b := range got {
			for i, v := range b {
				if v != byte((off+i)%251) {
					t.Fatalf("seed %d: byte %d is %d, want %d (overwritten after it was handed on?)", seed, off+i, v, (off+i)%251)
				}
			}
			off += len(b)
		}
		data, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range data {
			if v != byte(i%251) {
				t.Fatalf("seed %d: file byte %d is %d", seed, i, v)
			}
		}
		if len(data) != size {
			t.Fatalf("seed %d: file holds %d bytes", seed, len(data))
		}
		c.closeFile()
	}
}

// TestSnapshotKeepsTheEnd checks the end of a long output the result
// gets beside the head: the last tailKeep bytes, from the output file or,
// when there is none, from the ring kept in memory, whatever the sizes of
// the reads that filled it.
func TestSnapshotKeepsTheEnd(t *testing.T) {
	for _, withFile := range []bool{true, false} {
		const memory = 1 << 20
		dir := t.TempDir()
		c := newCapture(memory, 100<<10, func() (*os.File, error) {
			if !withFile {
				return nil, errors.New("no space left on device")
			}
			return os.CreateTemp(dir, "out")
		})
		r := &patternReader{size: 3*memory + 12345, rng: rand.New(rand.NewPCG(1, 2))}
		data := make([]byte, 0, r.size)
		buf := make([]byte, 100<<10)
		for {
			n, err := r.Read(buf)
			c.write(buf[:n])
			data = append(data, buf[:n]...)
			if err != nil {
				break
			}
		}
		s := c.snapshot()
		switch {
		case !s.gap || s.total != uint64(len(data)):
			t.Errorf("file %v: gap %v, total %d; want a gap in %d bytes", withFile, s.gap, s.total, len(data))
		case !bytes.Equal(s.head, data[:len(s.head)]):
			t.Errorf("file %v: the head is not the start of the output", withFile)
		case len(s.tail) != tailKeep || !bytes.Equal(s.tail, data[len(data)-tailKeep:]):
			t.Errorf("file %v: a tail of %d bytes that is not the end of the output, want its last %d", withFile, len(s.tail), tailKeep)
		}
		c.closeFile()
	}
}
