package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process is a started process and the tree it grows.
type Process struct {
	r    *Runner
	proc *os.Process
	out  *os.File
	cg   *callCgroup // nil: process group only
	tag  *UIDLease   // the group that marks the call's tree; nil without one
	key  string      // registration of the call for the orphan reaper

	stdinChild  *os.File // child's end of a stdin pipe, closed after start
	stdinParent *os.File // our end, fed by a goroutine
	stdinSrc    io.Reader
	stdinDone   chan struct{}

	killOnce sync.Once
	// killMu fences the kill that follows a freeze (killLater) against
	// waitLoop, which takes the kill over (ended) before the call's
	// directory can be recycled and its descriptors closed.
	killMu    sync.Mutex
	killLater *time.Timer // set when Abort froze the tree
	ended     bool
	// aborted: Abort ran while the tree was alive, so processes may still
	// be forking when waitLoop sweeps for leftovers.
	aborted atomic.Bool
	// atLimit: the call was killed because it reached the session's
	// process limit; hit: the limits it ran into, known once done.
	atLimit atomic.Bool
	// watch runs check now and then while the call runs; watchMu
	// guards it, watchEvery and watchEnded, and holds check's reads of
	// the call's counters off waitLoop's recycling of the directory.
	watchMu    sync.Mutex
	watch      *time.Timer
	watchEvery time.Duration
	watchEnded bool
	hit        limitHits
	done       chan struct{}
	code       int
	err        error
}

// Pid returns the process id of the first process.
func (p *Process) Pid() int { return p.proc.Pid }

// Output returns the read end of the pipe that is both stdout and stderr
// of the tree, so bytes arrive in the order they were written. Read it to
// EOF (which comes once every process holding the pipe is gone) and close
// it; closing it early makes a blocked Read return.
func (p *Process) Output() io.ReadCloser { return p.out }

// Done is closed when Wait would return.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits until the first process has exited and the rest of its tree
// has been killed and reaped. exitCode is the exit status, or 128 plus the
// signal number when a signal ended the process (as shells report it). err
// is set only when the process could not be waited for.
func (p *Process) Wait() (exitCode int, err error) {
	<-p.done
	return p.code, p.err
}

// abortKillDelay is how long after freezing an aborted call's tree Abort
// kills it: long enough for the call's Result to be on its way before the
// processes' exits take CPU time, short enough that the reaping follows
// soon after. (A variable for the tests.)
var abortKillDelay = time.Millisecond

// Abort stops the whole tree and returns without waiting: when the call's
// cgroup can be frozen, every process is frozen at once (none runs another
// instruction of its own) and killed abortKillDelay later; otherwise each
// gets SIGKILL at once. Wait (or the runner's Close) sees the reaping
// through. It is idempotent.
func (p *Process) Abort() {
	p.killOnce.Do(func() {
		p.aborted.Store(true)
		if p.cg != nil && p.cg.freeze() {
			p.killMu.Lock()
			if !p.ended {
				p.killLater = time.AfterFunc(abortKillDelay, p.killFrozen)
			}
			p.killMu.Unlock()
			return
		}
		if p.cg != nil && p.cg.kill() {
			return
		}
		p.signalTree()
	})
}

// signalTree sends SIGKILL to the process group and to every process that
// carries the call's mark.
func (p *Process) signalTree() {
	unix.Kill(-p.proc.Pid, unix.SIGKILL)
	if p.tag != nil {
		// One pass; waitLoop finishes what forked meanwhile.
		killMatching(p.tagged)
	}
}

// killFrozen kills the tree Abort froze, unless it was not frozen or
// waitLoop has taken the kill over. Killing twice is harmless.
func (p *Process) killFrozen() {
	p.killMu.Lock()
	defer p.killMu.Unlock()
	if p.killLater == nil || p.ended {
		return
	}
	if !p.cg.kill() {
		p.signalTree()
	}
}

// tagged reports whether a process carries the call's group mark.
func (p *Process) tagged(pi procInfo) bool { return pi.hasGroup(p.tag.ID()) }

// Kill kills the whole tree, including processes that left the process
// group or were double-forked away, and waits until it is reaped. It is
// idempotent.
func (p *Process) Kill() {
	p.killNow()
	<-p.done
}

// killNow is Abort without the wait between freezing and killing.
func (p *Process) killNow() {
	p.Abort()
	p.killFrozen()
}

// waitLoop waits for the first process, then ends and reaps the rest of
// the tree.
func (p *Process) waitLoop() {
	defer p.r.forget(p)
	awaitExit(p.proc.Pid)
	// From here on cg.end kills whatever is left, frozen or not.
	p.killMu.Lock()
	p.ended = true
	if p.killLater != nil {
		p.killLater.Stop()
	}
	p.killMu.Unlock()
	state, err := p.proc.Wait()
	if err != nil {
		p.err = err
	} else if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		p.code = 128 + int(ws.Signal())
	} else {
		p.code = state.ExitCode()
	}
	// Whatever the first process left behind dies with it; that also
	// closes the output pipe for readers.
	tagGone := true
	if p.cg == nil || !p.cg.end() {
		unix.Kill(-p.proc.Pid, unix.SIGKILL)
		if p.tag != nil {
			tagGone = killAll(p.tagged, sessionEndTimeout, p.aborted.Load())
		}
	}
	p.killOnce.Do(func() {})
	if p.cg != nil {
		p.hit = p.cg.hits()
	}
	collectOrphans()
	unregisterCall(p.key, p.proc.Pid)
	if tagGone {
		// Only once no process carries the mark may another call get it.
		p.tag.Release()
	}
	p.closeStdin()
	close(p.done)
	// Tidying up after the call is not the caller's wait; the runner's
	// Close still waits for it. The directory's files are read by check
	// until it is stopped.
	p.watchMu.Lock()
	p.watchEnded = true
	p.watch.Stop()
	p.watchMu.Unlock()
	if p.cg != nil {
		p.r.cg.recycle(p.cg)
	}
}

// processLimitPoll is how often a running call is checked (its pids
// counter read, orphans looked for), doubling from the first up to the
// last: a fork bomb is stopped within about a second, and a long
// background process costs one check a second.
const (
	processLimitPollFirst = 50 * time.Millisecond
	processLimitPollLast  = time.Second
)

// startWatch arms the call's first check. A timer rather than a goroutine
// of its own: most calls end before it fires, and stopping it wakes
// nothing.
func (p *Process) startWatch() {
	p.watchMu.Lock()
	p.watchEvery = processLimitPollFirst
	p.watch = time.AfterFunc(p.watchEvery, p.check)
	p.watchMu.Unlock()
}

// check looks for orphans the call's processes left to this process
// (pollOrphans), and kills the call once a fork of it failed at the
// process limit: a program that cannot start a process cannot finish its
// work in most cases, and a fork bomb never stops trying. (cgroup v1 gives
// no notice of the event, so the counter is read.)
func (p *Process) check() {
	pollOrphans()
	p.watchMu.Lock()
	defer p.watchMu.Unlock()
	if p.watchEnded {
		return
	}
	if p.cg != nil && p.r.cg.bound.Processes > 0 && p.cg.hits().processes {
		p.watchEnded = true
		p.atLimit.Store(true)
		p.Abort()
		return
	}
	p.watchEvery = min(2*p.watchEvery, processLimitPollLast)
	p.watch.Reset(p.watchEvery)
}

// LimitReached names, in words for the model, the resource limits the
// call's processes ran into (the session's or the call's own process and
// memory limits): "" when none or when no cgroup counts them. Call it
// after Wait.
func (p *Process) LimitReached() string {
	<-p.done
	var parts []string
	l, b := p.r.cfg.Limits, p.r.Bounds()
	if p.hit.processes || p.atLimit.Load() {
		what := fmt.Sprintf("the session's process limit (%d) was reached", b.Processes)
		if l.Processes > 0 && (b.Processes == 0 || l.Processes < b.Processes) {
			what = fmt.Sprintf("the call's process limit (%d) was reached", l.Processes)
		}
		if p.atLimit.Load() {
			what += "; the command and every process it started were killed"
		} else {
			what += ": a process could not be started"
		}
		parts = append(parts, what)
	}
	if p.hit.memory {
		what := fmt.Sprintf("the session's memory limit (%s) was reached", FormatBytes(b.Memory))
		if l.Memory > 0 && (b.Memory == 0 || l.Memory < b.Memory) {
			what = fmt.Sprintf("the call's memory limit (%s) was reached", FormatBytes(l.Memory))
		}
		parts = append(parts, what+": the kernel killed a process for lack of memory")
	}
	if len(parts) == 0 {
		return ""
	}
	s := strings.Join(parts, "; ")
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

// stdinFile returns the file the child gets as stdin.
func (p *Process) stdinFile(src io.Reader) (*os.File, error) {
	switch s := src.(type) {
	case nil:
		return p.r.devNull, nil
	case *os.File:
		return s, nil
	}
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p.stdinChild, p.stdinParent, p.stdinSrc = rd, wr, src
	return rd, nil
}

// startStdinCopy feeds a non-file stdin.
func (p *Process) startStdinCopy() {
	if p.stdinParent == nil {
		return
	}
	p.stdinDone = make(chan struct{})
	go func() {
		defer close(p.stdinDone)
		_, err := io.Copy(p.stdinParent, p.stdinSrc)
		if err != nil && !errors.Is(err, os.ErrClosed) && !errors.Is(err, syscall.EPIPE) {
			p.r.log.Debug("sandbox: stdin copy", "err", err)
		}
		p.stdinParent.Close()
	}()
}

func (p *Process) closeStdin() {
	if p.stdinParent != nil {
		p.stdinParent.Close()
		if p.stdinDone != nil {
			<-p.stdinDone
		}
	}
}

// awaitExit returns once the child pid has ended (it is then a zombie, and
// waiting for it does not block), or at once if that cannot be watched.
// The runtime's poller watches the process's pidfd, which becomes readable
// when the process ends, as it watches sockets, so no thread sits in a
// blocking wait while a command runs: one thread fewer per running
// command, and no P handed from that thread to another by the scheduler's
// monitor once the wait has lasted 20 µs (with one P, see package procs,
// that happened on every call).
func awaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return // no pidfds here: the wait blocks
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// An error here (the poller does not take the pidfd) leaves the wait
	// to block, as before.
	_ = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		// Done once the process has ended, or when waitid cannot tell
		// (then Wait reports what is wrong).
		return err != nil || info.Signo != 0
	})
}
