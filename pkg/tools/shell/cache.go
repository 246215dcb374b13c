package shell

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Sizes of the page cache a long output file is allowed to hold.
const (
	// cacheKeep is how much of the output's end stays cached while it is
	// written: what progress still has to send and the tail the result
	// quotes are read back from there. It is at least the tail a capture
	// keeps (half of tool.DefaultMaxOutputMemory).
	cacheKeep = 8 << 20
	// cacheStep is how much output a writeback or a release covers at
	// least, so that a command printing little at a time costs no extra
	// system call per write.
	cacheStep = 1 << 20
)

// cacheRelease keeps a file that is written once, from start to end, from
// filling the page cache: it starts the writeback of each stretch soon
// after it is written and, once a stretch is well behind the end and no
// longer needed, asks the kernel to let its pages go. The pages then serve
// the next stretches instead of fresh ones.
//
// A saved output is written once and read rarely (by the model, in parts),
// so while it grows the cache holds only its last cacheKeep bytes (and
// what progress has yet to send), and none of it after finish: a 64 MiB
// command output costs 8 MiB of cache, not 64 MiB charged to the
// executor's memory for as long as the kernel keeps it.
// On a virtual machine whose memory is backed on first touch, fresh pages
// are also the most expensive part of writing the file (see
// docs/benchmarks.md). Nothing here waits for the disk while the command
// runs: a page still being written back when its release comes is simply
// kept, and the data is in the file either way.
type cacheRelease struct {
	file     syscall.RawConn // the file's descriptor, safe to use after a close
	keep     int64           // bytes before the end that stay cached
	started  int64           // writeback was started for the bytes before this offset
	released int64           // the pages of the bytes before this offset were let go
}

// newCacheRelease returns the release of f's pages that keeps at least
// its last keep bytes cached (and never fewer than cacheKeep).
func newCacheRelease(f *os.File, keep int) *cacheRelease {
	r := &cacheRelease{keep: int64(max(keep, cacheKeep))}
	r.file, _ = f.SyscallConn() // nil only for a file already closed
	return r
}

// do calls fn with the file's descriptor unless the file is closed. The
// calls it makes are advice: their errors (a file system without
// writeback, such as tmpfs, ignores them) change nothing.
func (r *cacheRelease) do(fn func(fd int)) {
	if r.file != nil {
		r.file.Control(func(fd uintptr) { fn(int(fd)) })
	}
}

// written records that the file now holds end bytes, and starts the
// writeback of those not yet on their way to the disk.
func (r *cacheRelease) written(end int64) {
	if end-r.started < cacheStep {
		return
	}
	from := r.started
	r.do(func(fd int) { unix.SyncFileRange(fd, from, end-from, unix.SYNC_FILE_RANGE_WRITE) })
	r.started = end
}

// release lets go of the pages before upTo, as far as they are more than
// the bytes kept behind end. Pages still dirty or being written back stay.
func (r *cacheRelease) release(upTo, end int64) {
	upTo = min(upTo, end-r.keep)
	upTo &^= int64(os.Getpagesize() - 1)
	if upTo-r.released < cacheStep {
		return
	}
	from := r.released
	r.do(func(fd int) { unix.Fadvise(fd, from, upTo-from, unix.FADV_DONTNEED) })
	r.released = upTo
}

// finish closes f, the file r releases (r nil: none), once nothing more
// is written to it. A file long enough to have had pages released gets
// the rest of them released too, after their writeback ends: that waits
// for the disk, so it happens on a goroutine of its own, and the caller
// goes on at once.
func (r *cacheRelease) finish(f *os.File) {
	if r == nil || r.released == 0 {
		f.Close()
		return
	}
	go func() {
		r.do(func(fd int) {
			unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
			unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
		})
		f.Close()
	}()
}
