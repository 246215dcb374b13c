package rpcserver

import (
	"bytes"
	"testing"
	"unsafe"
)

// TestBufferPoolHandsBuffersBackAsTheyWere checks the pool's sizes and
// that a buffer it gives again is not cleared, which is what it is for.
func TestBufferPoolHandsBuffersBackAsTheyWere(t *testing.T) {
	for _, c := range []struct{ size, cap int }{
		{1 << 10, 1 << 10}, {1<<10 + 1, 2 << 10}, {256<<10 + 40, 512 << 10}, {MaxMessageBytes, MaxMessageBytes},
	} {
		b := buffers.Get(c.size)
		if len(*b) != c.size || cap(*b) != c.cap {
			t.Errorf("Get(%d): len %d cap %d, want len %d cap %d", c.size, len(*b), cap(*b), c.size, c.cap)
		}
	}
	if b := buffers.Get(MaxMessageBytes + 1); len(*b) != MaxMessageBytes+1 {
		t.Errorf("Get(MaxMessageBytes+1): len %d", len(*b))
	}
	if b := buffers.Get(0); len(*b) != 0 {
		t.Errorf("Get(0): len %d", len(*b))
	}

	// sync.Pool may drop what it is given (it does at random under the
	// race detector, and at a garbage collection): try until a buffer
	// comes back.
	for range 1000 {
		b := buffers.Get(300 << 10)
		full := (*b)[:cap(*b)]
		for i := range full {
			full[i] = 0xa5
		}
		first := unsafe.SliceData(full)
		buffers.Put(b)
		again := buffers.Get(260 << 10)
		if unsafe.SliceData(*again) != first {
			continue
		}
		if len(*again) != 260<<10 {
			t.Fatalf("reused buffer has len %d, want %d", len(*again), 260<<10)
		}
		if !bytes.Equal((*again)[:cap(*again)], bytes.Repeat([]byte{0xa5}, 512<<10)) {
			t.Fatal("the pool cleared a buffer it gave again")
		}
		return
	}
	t.Fatal("the pool never gave a buffer back in 1000 tries")
}
