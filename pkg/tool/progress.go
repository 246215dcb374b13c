package tool

import "sync"

// ProgressBufferSize is the capacity of the buffers ProgressBuffer
// returns: the most output one Progress carries.
const ProgressBufferSize = 256 << 10

// progressBuffers holds buffers whose output has been sent and is no
// longer kept for replay.
var progressBuffers = sync.Pool{New: func() any { return new([ProgressBufferSize]byte) }}

// ProgressBuffer returns an empty buffer with room for ProgressBufferSize
// bytes, for the Output of a Progress. A tool that streams much output
// takes its chunks from here: the executor gives each buffer back once
// its bytes are sent and no longer kept for replay, so a long stream
// reuses a few buffers instead of making the garbage collector clear, and
// the kernel map, fresh memory for every chunk.
func ProgressBuffer() []byte { return progressBuffers.Get().(*[ProgressBufferSize]byte)[:0] }

// IsProgressBuffer reports whether b may be one of ProgressBuffer's
// buffers: a slice of exactly its capacity.
func IsProgressBuffer(b []byte) bool { return cap(b) == ProgressBufferSize }

// RecycleProgressBuffer gives b back for ProgressBuffer to hand out again,
// when IsProgressBuffer(b); other slices are left to the garbage
// collector. Nothing may use b afterwards.
func RecycleProgressBuffer(b []byte) {
	if IsProgressBuffer(b) {
		progressBuffers.Put((*[ProgressBufferSize]byte)(b[:ProgressBufferSize]))
	}
}
