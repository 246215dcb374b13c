package shell

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/toolwire/toolwire/pkg/procs"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Output caps of the result text, as Claude Code applies them, and the
// sizes of the output path.
const (
	previewBytes   = 2000 // preview of persisted output
	errorKeepChars = 5000 // head and tail of an over-long error
	// tailKeep is how much of the end of a long output the result keeps
	// beside its head: errorKeepChars runes of up to 4 bytes, with room for
	// trailing blank lines, which are trimmed.
	tailKeep       = 64 << 10
	heartbeatEvery = time.Second
	readChunk      = 256 << 10               // one read from the output pipe
	pipeSize       = 1 << 20                 // the output pipe's buffer, where the kernel allows it
	flushPending   = 64 << 10                // unsent bytes that make progress go out before the tick
	progressChunk  = tool.ProgressBufferSize // output carried by one progress report at most
	// drainLimit bounds how long a finished command's Result waits for
	// progress that lags behind its output; what is still unsent then is
	// reported as dropped.
	drainLimit = time.Second
)

// capture collects a process's output: the first and last bytes in memory
// and, once the output outgrows the memory kept for its head, all of it in
// a file. Progress reads the output it has not sent yet from the same
// place, the head or the file, so a slow reader of progress never holds up
// the process and never makes memory grow: it only lags behind.
type capture struct {
	create func() (*os.File, error) // makes the output file when needed
	quota  *tool.ByteQuota          // the session's saved-output quota; nil: none

	mu      sync.Mutex    // guards the fields below
	file    *os.File      // nil until the output outgrows the head
	cache   *cacheRelease // keeps file from filling the page cache
	fileErr error
	head    []byte
	headCap int // output up to this stays in memory only
	headMax int // how far the head grows when the file cannot be made
	// tail is a ring of the last bytes, kept only while there is no file
	// to read them back from at the end.
	tail     []byte
	tailCap  int
	tailPos  int
	tailFile bool // the file holds the tail: the ring is not kept
	total    uint64
	lines    uint64
	sent     uint64 // output bytes handed to progress (sent or dropped)
	// unsent, when not nil, holds a copy of the output bytes not yet
	// handed to progress, all of them (those from sent to total) and at
	// most progressChunk: progress takes them from memory rather than
	// reading back from the file what was just written to it.
	unsent []byte
	full   chan struct{} // signalled when flushPending bytes are unsent
	// sink, once set, takes all output from then on, and nothing else
	// keeps it: the command went on in the background (handOff).
	sink *os.File
}

// newCapture returns a capture that keeps at most memory bytes of the
// output in memory and calls create for the output file once there are
// more. Output longer than inline bytes will not be returned inline, so it
// goes to the file as soon as it outgrows that (or one pipe read, if
// more): it would end up there anyway, and a head kept in memory up to
// memory/2 first costs a big allocation per call.
func newCapture(memory, inline int, create func() (*os.File, error)) *capture {
	if memory < 2*readChunk {
		memory = 2 * readChunk
	}
	head := min(memory/2, max(inline, readChunk))
	return &capture{create: create, headCap: head, headMax: memory / 2, tailCap: memory - memory/2, full: make(chan struct{}, 1)}
}

// appendUpTo appends b to buf, which must not grow past limit. When buf
// must grow it doubles, where append grows a large slice by a quarter and
// so copies it again and again.
func appendUpTo(buf, b []byte, limit int) []byte {
	if need := len(buf) + len(b); need > cap(buf) {
		grown := make([]byte, len(buf), min(max(2*cap(buf), need, 4<<10), limit))
		copy(grown, buf)
		buf = grown
	}
	return append(buf, b...)
}

// readBufs holds the buffers output pipes are read into, so that a command
// that prints little costs no fresh readChunk of memory to clear and
// collect.
var readBufs = sync.Pool{New: func() any { return new([readChunk]byte) }}

// readFrom copies r into the capture until EOF or error. A read that fills
// the whole buffer means the command writes faster than its output is
// moved on: the executor is asked for all its CPUs (procs.Demand), which
// it would otherwise give only after a window longer than many such
// bursts.
func (c *capture) readFrom(r io.Reader) {
	arr := readBufs.Get().(*[readChunk]byte)
	defer readBufs.Put(arr)
	buf := arr[:]
	for {
		n, err := r.Read(buf)
		if n == len(buf) {
			procs.Demand()
		}
		if n > 0 {
			c.write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

func (c *capture) write(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sink != nil {
		c.sink.Write(b) // a failed write loses output, as a background task's copy does
		c.total += uint64(len(b))
		return
	}
	if c.file == nil && c.fileErr == nil && c.total+uint64(len(b)) > uint64(c.headCap) {
		c.spillLocked()
	}
	if c.file != nil && c.fileErr == nil {
		if c.fileErr = c.writeFile(b); c.fileErr != nil && c.tailFile {
			// The ring restarts: the bytes written so far are lost to it.
			c.tailFile, c.tail, c.tailPos = false, c.tail[:0], 0
		}
		c.keepUnsentLocked(b)
	}
	c.total += uint64(len(b))
	if c.file != nil && c.fileErr == nil {
		c.cache.written(int64(c.total))
		c.cache.release(int64(c.sent), int64(c.total))
	}
	c.lines += uint64(bytes.Count(b, []byte{'\n'}))
	if c.total-c.sent >= flushPending {
		select {
		case c.full <- struct{}{}:
		default:
		}
	}
	// Without a file, the head grows as far as memory allows, so that
	// progress can still send that much.
	limit := c.headCap
	if c.fileErr != nil {
		limit = c.headMax
	}
	if room := limit - len(c.head); room > 0 {
		k := min(room, len(b))
		c.head = appendUpTo(c.head, b[:k], limit)
		b = b[k:]
	}
	for !c.tailFile && len(b) > 0 {
		if len(c.tail) < c.tailCap {
			k := min(c.tailCap-len(c.tail), len(b))
			c.tail = appendUpTo(c.tail, b[:k], c.tailCap)
			b = b[k:]
			continue
		}
		if len(b) >= c.tailCap {
			copy(c.tail, b[len(b)-c.tailCap:])
			c.tailPos = 0
			return
		}
		k := copy(c.tail[c.tailPos:], b)
		c.tailPos = (c.tailPos + k) % c.tailCap
		b = b[k:]
	}
}

// handOff writes the output so far to f and sends all later output there
// only. Output the capture could not keep (its file could not be written)
// is missing from f too.
func (c *capture) handOff(f *os.File) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.file != nil && c.fileErr == nil {
		io.Copy(f, io.NewSectionReader(c.file, 0, int64(c.total)))
	} else {
		f.Write(c.head)
		if !c.tailFile {
			f.Write(c.tail[c.tailPos:])
			f.Write(c.tail[:c.tailPos])
		}
	}
	c.sink = f
	c.dropUnsentLocked()
}

// spillLocked creates the output file and writes the head to it, which at
// that point holds the whole output.
func (c *capture) spillLocked() {
	c.file, c.fileErr = c.create()
	if c.fileErr == nil {
		c.cache = newCacheRelease(c.file, c.tailCap)
		c.fileErr = c.writeFile(c.head)
		// Nothing has gone past the head yet: the ring is empty.
		c.tailFile = c.fileErr == nil
	}
}

// writeFile writes b to the output file if the session's output quota
// has room for it.
func (c *capture) writeFile(b []byte) error {
	if err := c.quota.Take(int64(len(b))); err != nil {
		return err
	}
	_, err := c.file.Write(b)
	return err
}

// persist makes sure the output file exists and holds the whole output,
// and returns it. Call it once the process's output has ended.
func (c *capture) persist() (*os.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.file == nil && c.fileErr == nil {
		c.spillLocked()
	}
	return c.file, c.fileErr
}

// closeFile closes the output file, if one was made.
func (c *capture) closeFile() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.file != nil {
		c.cache.finish(c.file)
	}
}

// keepUnsentLocked adds b, just written to the file, to the unsent bytes
// kept in memory, as long as they all fit there; else progress reads them
// back from the file.
func (c *capture) keepUnsentLocked(b []byte) {
	switch {
	case c.fileErr != nil:
		c.dropUnsentLocked()
	case c.unsent == nil && c.total == c.sent && c.total >= uint64(c.headCap) && len(b) <= progressChunk:
		// (Below headCap part of b goes to the head, which progress reads
		// first.)
		c.unsent = append(tool.ProgressBuffer(), b...)
	case c.unsent != nil && len(c.unsent)+len(b) <= progressChunk:
		c.unsent = append(c.unsent, b...)
	default:
		c.dropUnsentLocked()
	}
}

// dropUnsentLocked forgets the copy of the unsent bytes; progress reads
// them back from the file instead.
func (c *capture) dropUnsentLocked() {
	tool.RecycleProgressBuffer(c.unsent)
	c.unsent = nil
}

// next returns up to limit output bytes not yet handed to progress (and
// at most tool.ProgressBufferSize), how many it had to skip (the output
// file could not be written or read), and the totals. The bytes are the
// caller's: a copy, in a tool.ProgressBuffer unless they came from the
// head.
func (c *capture) next(limit int) (out []byte, dropped, lines, total uint64) {
	c.mu.Lock()
	from, lines, total := c.sent, c.lines, c.total
	n := int(min(total-from, uint64(min(limit, tool.ProgressBufferSize))))
	if n == 0 {
		c.mu.Unlock()
		return nil, 0, lines, total
	}
	if from < uint64(len(c.head)) {
		n = min(n, len(c.head)-int(from))
		out = append([]byte(nil), c.head[from:int(from)+n]...)
		c.sent += uint64(n)
		c.mu.Unlock()
		return out, 0, lines, total
	}
	if len(c.unsent) > 0 && len(c.unsent) <= limit {
		out, c.unsent = c.unsent, nil
		c.sent = total
		c.mu.Unlock()
		return out, 0, lines, total
	}
	c.dropUnsentLocked() // the rest comes from the file
	f, ferr := c.file, c.fileErr
	if f == nil || ferr != nil {
		c.sent = total
		c.mu.Unlock()
		return nil, total - from, lines, total
	}
	c.sent += uint64(n)
	c.mu.Unlock()
	// The bytes are in the file already; read them without the lock, so
	// the process's output is not held up meanwhile.
	// Room to spare lets the outbox merge the next chunk into this one
	// without copying it again.
	out = tool.ProgressBuffer()[:n]
	k, _ := f.ReadAt(out, int64(from)) // short only if the file was cut behind our back
	return out[:k], uint64(n - k), lines, total
}

// skipUnsent marks the unsent output as handed to progress and returns how
// many bytes that was.
func (c *capture) skipUnsent() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.total - c.sent
	c.sent = c.total
	c.dropUnsentLocked()
	return n
}

// snapshot is the captured output after the process ended.
type snapshot struct {
	head, tail []byte // tail is empty unless bytes were dropped between them
	total      uint64
	gap        bool
}

// snapshot returns the output kept for the result. Call it once the output
// has ended; the head it returns is the capture's own.
func (c *capture) snapshot() snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	var tail []byte
	if c.tailFile {
		n := min(uint64(min(c.tailCap, tailKeep)), c.total-uint64(len(c.head)))
		tail = make([]byte, n)
		k, _ := c.file.ReadAt(tail, int64(c.total-n))
		tail = tail[:k]
	} else {
		// The ring's last bytes: those before tailPos, and before them
		// those from its end.
		n := min(len(c.tail), tailKeep)
		if n <= c.tailPos {
			tail = append([]byte(nil), c.tail[c.tailPos-n:c.tailPos]...)
		} else {
			tail = append(append([]byte(nil), c.tail[len(c.tail)-(n-c.tailPos):]...), c.tail[:c.tailPos]...)
		}
	}
	s := snapshot{head: c.head, total: c.total}
	if uint64(len(c.head)+len(tail)) < c.total {
		s.gap = true
		s.tail = tail
	} else {
		s.head = append(append([]byte(nil), s.head...), tail...)
	}
	return s
}

// progressLoop reports new output every interval, or as soon as
// flushPending bytes wait, and a heartbeat when the process is silent,
// until stop is closed. Output waiting to be sent goes out in chunks of at
// most progressChunk, as fast as report takes them: report may block while
// the client catches up, and then the output waits in the capture, not in
// memory. When stop closes, it sends what is left unless aborted is closed
// too, giving up after drainLimit and reporting the rest as dropped.
func progressLoop(c *capture, report func(tool.Progress), interval time.Duration, start time.Time, stop, aborted <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last := time.Now()
	// send reports everything unsent, a chunk at a time, until it has
	// caught up, quit closes or the deadline passes (zero: none).
	send := func(force bool, quit <-chan struct{}, deadline time.Time) {
		for {
			out, dropped, lines, total := c.next(progressChunk)
			if len(out) == 0 && dropped == 0 && !force {
				return
			}
			if !deadline.IsZero() && time.Now().After(deadline) {
				dropped += uint64(len(out)) + c.skipUnsent()
				tool.RecycleProgressBuffer(out)
				out = nil
			}
			report(tool.Progress{Output: out, Dropped: dropped, Elapsed: time.Since(start), TotalLines: lines, TotalBytes: total})
			last, force = time.Now(), false
			select {
			case <-quit:
				return
			default:
			}
		}
	}
	for {
		select {
		case <-stop:
			select {
			case <-aborted:
			default:
				send(false, aborted, time.Now().Add(drainLimit))
			}
			return
		case <-tick.C:
			send(time.Since(last) >= heartbeatEvery, stop, time.Time{})
		case <-c.full:
			send(false, stop, time.Time{})
		}
	}
}

// text makes bytes safe for a result: valid UTF-8.
func text(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

// trimNewlines drops trailing line ends.
func trimNewlines(s string) string { return strings.TrimRight(s, "\r\n") }

// successText formats the output of a command that exited 0.
func successText(s snapshot, maxChars int, path string) (string, *tool.Truncation) {
	// A valid rune takes 4 bytes at most, so a longer valid head is over
	// the cap without converting it (invalid runs shrink to one rune each).
	if trimmed := bytes.TrimRight(s.head, "\r\n"); !s.gap && (len(trimmed) <= 4*maxChars || !utf8.Valid(trimmed)) {
		out := trimNewlines(text(s.head))
		if utf8.RuneCountInString(out) <= maxChars {
			if out == "" {
				return "(Bash completed with no output)", nil
			}
			return out, nil
		}
	}
	preview := previewOf(s.head)
	var b strings.Builder
	b.WriteString("<persisted-output>\n")
	fmt.Fprintf(&b, "Output too large (%s). Full output saved to: %s\n\n", formatSize(s.total), path)
	fmt.Fprintf(&b, "Preview (first %s):\n", formatSize(previewBytes))
	b.WriteString(preview)
	b.WriteString("\n...\n</persisted-output>")
	return b.String(), &tool.Truncation{
		OriginalBytes:  s.total,
		OmittedBytes:   s.total - uint64(min(uint64(len(preview)), s.total)),
		FullOutputPath: path,
	}
}

// previewOf returns about previewBytes of head, cut at a line end when one
// is there.
func previewOf(head []byte) string {
	if len(head) <= previewBytes {
		return trimNewlines(text(head))
	}
	p := head[:previewBytes]
	if i := bytes.LastIndexByte(p, '\n'); i > 0 {
		p = p[:i]
	}
	for len(p) > 0 && !utf8.Valid(p) && len(head)-len(p) < utf8.UTFMax {
		p = p[:len(p)-1]
	}
	return text(p)
}

// errorText formats a failed command: prefix ("Exit code N", maybe with a
// timeout line) and the output, shortened to its head and tail when it is
// over the cap.
func errorText(prefix string, s snapshot, maxChars int, path string) (string, *tool.Truncation) {
	out := text(s.head)
	if !s.gap {
		out = trimNewlines(out)
		if utf8.RuneCountInString(out) <= maxChars {
			if out == "" {
				return prefix, nil
			}
			return prefix + "\n" + out, nil
		}
	}
	full := []rune(prefix + "\n" + out)
	var tail []rune
	omitted := 0
	if s.gap {
		tail = []rune(trimNewlines(text(s.tail)))
		omitted = int(s.total) - len(s.head) - len(s.tail) // bytes: the gap is never decoded
	}
	if len(tail) < errorKeepChars {
		// Not enough bytes kept apart: take the tail from the end of the head.
		need := errorKeepChars - len(tail)
		if need > len(full)-errorKeepChars {
			need = max(0, len(full)-errorKeepChars)
		}
		tail = append(full[len(full)-need:], tail...)
		full = full[:len(full)-need]
	} else {
		tail = tail[len(tail)-errorKeepChars:]
		omitted += len([]rune(trimNewlines(text(s.tail)))) - errorKeepChars
	}
	head := full[:min(errorKeepChars, len(full))]
	omitted += len(full) - len(head)
	msg := fmt.Sprintf("%s\n\n... [%d characters truncated] ...\n\n%s", string(head), omitted, string(tail))
	kept := uint64(len(string(head)) - len(prefix) - 1 + len(string(tail)))
	return msg, &tool.Truncation{OriginalBytes: s.total, OmittedBytes: s.total - min(kept, s.total), FullOutputPath: path}
}

// formatSize writes a byte count as Claude Code does: 29.3KB, 1.2MB.
func formatSize(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	v, suffix := float64(n)/unit, "KB"
	if v >= unit {
		v, suffix = v/unit, "MB"
	}
	if v >= unit {
		v, suffix = v/unit, "GB"
	}
	s := strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0")
	return s + suffix
}

// reporter passes progress on until it is closed.
type reporter struct {
	mu     sync.Mutex // held while a report is in flight
	report func(tool.Progress)
	closed bool
}

// send reports p unless the reporter is closed.
func (r *reporter) send(p tool.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.report(p)
	}
}

// close stops reporting. It waits only for a report already in flight.
func (r *reporter) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

// growPipe enlarges the output pipe's buffer, so that a command writing a
// lot blocks less often and each read takes more at once. It is best
// effort: the kernel caps the size for unprivileged owners.
func growPipe(r io.Reader) {
	f, ok := r.(*os.File)
	if !ok {
		return
	}
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize)
		})
	}
}
