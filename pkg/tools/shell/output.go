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

	"github.com/toolwire/toolwire/pkg/tool"
)

// Output caps of the result text, as Claude Code applies them.
const (
	previewBytes   = 2000 // preview of persisted output
	errorKeepChars = 5000 // head and tail of an over-long error
	heartbeatEvery = time.Second
	readChunk      = 32 << 10
	flushPending   = 64 << 10 // progress bytes that make an event go out before the tick
	maxPending     = 4 << 20  // progress bytes held at most; beyond, they are counted as dropped
)

// capture collects a process's output: all of it into a file, the first
// and last bytes in memory, and new bytes for progress events.
type capture struct {
	mu       sync.Mutex // guards the fields below
	file     *os.File
	fileErr  error
	head     []byte
	headCap  int
	tail     []byte // ring buffer once full
	tailCap  int
	tailPos  int
	total    uint64
	lines    uint64
	pending  []byte
	dropped  uint64        // progress bytes not held since the last event
	full     chan struct{} // signalled when pending reaches flushPending
	progress bool          // collect pending bytes
}

func newCapture(file *os.File, memory int, progress bool) *capture {
	if memory < 2*readChunk {
		memory = 2 * readChunk
	}
	return &capture{file: file, headCap: memory / 2, tailCap: memory - memory/2, progress: progress, full: make(chan struct{}, 1)}
}

// readFrom copies r into the capture until EOF or error.
func (c *capture) readFrom(r io.Reader) {
	buf := make([]byte, readChunk)
	for {
		n, err := r.Read(buf)
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
	if c.file != nil && c.fileErr == nil {
		_, c.fileErr = c.file.Write(b)
	}
	c.total += uint64(len(b))
	c.lines += uint64(bytes.Count(b, []byte{'\n'}))
	if c.progress {
		// Progress never holds up the process: bytes the progress loop has
		// not taken in time are counted, not kept (the result and the
		// output file still have them).
		if len(c.pending)+len(b) > maxPending {
			c.dropped += uint64(len(b))
		} else {
			c.pending = append(c.pending, b...)
		}
		if len(c.pending) >= flushPending {
			select {
			case c.full <- struct{}{}:
			default:
			}
		}
	}
	if room := c.headCap - len(c.head); room > 0 {
		k := min(room, len(b))
		c.head = append(c.head, b[:k]...)
		b = b[k:]
	}
	for len(b) > 0 {
		if len(c.tail) < c.tailCap {
			k := min(c.tailCap-len(c.tail), len(b))
			c.tail = append(c.tail, b[:k]...)
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

// takePending returns the bytes since the last call, how many were
// dropped since, and the totals.
func (c *capture) takePending() (out []byte, dropped, lines, total uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, dropped = c.pending, c.dropped
	c.pending, c.dropped = nil, 0
	return out, dropped, c.lines, c.total
}

// snapshot is the captured output after the process ended.
type snapshot struct {
	head, tail []byte // tail is empty unless bytes were dropped between them
	total      uint64
	gap        bool
}

func (c *capture) snapshot() snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	tail := append(append([]byte(nil), c.tail[c.tailPos:]...), c.tail[:c.tailPos]...)
	s := snapshot{head: append([]byte(nil), c.head...), total: c.total}
	if uint64(len(c.head)+len(tail)) < c.total {
		s.gap = true
		s.tail = tail
	} else {
		s.head = append(s.head, tail...)
	}
	return s
}

// progressLoop reports new output every interval, or as soon as a full
// chunk is pending, and a heartbeat when the process is silent, until stop
// is closed; it then sends what is left.
func progressLoop(c *capture, report func(tool.Progress), interval time.Duration, start time.Time, stop <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last := time.Now()
	send := func(force bool) {
		out, dropped, lines, total := c.takePending()
		if len(out) == 0 && dropped == 0 && !force {
			return
		}
		report(tool.Progress{Output: out, Dropped: dropped, Elapsed: time.Since(start), TotalLines: lines, TotalBytes: total})
		last = time.Now()
	}
	for {
		select {
		case <-stop:
			send(false)
			return
		case <-tick.C:
			send(time.Since(last) >= heartbeatEvery)
		case <-c.full:
			send(false)
		}
	}
}

// text makes bytes safe for a result: valid UTF-8.
func text(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

// trimNewlines drops trailing line ends.
func trimNewlines(s string) string { return strings.TrimRight(s, "\r\n") }

// successText formats the output of a command that exited 0.
func successText(s snapshot, maxChars int, path string) (string, *tool.Truncation) {
	out := trimNewlines(text(s.head))
	if !s.gap && utf8.RuneCountInString(out) <= maxChars {
		if out == "" {
			return "(Bash completed with no output)", nil
		}
		return out, nil
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
