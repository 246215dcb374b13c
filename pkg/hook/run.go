package hook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolwire/toolwire/pkg/sandbox"
)

// Output caps. Output beyond them is read and thrown away, so a chatty
// hook neither blocks nor fills memory.
const (
	// MaxStdout is how much of a hook's stdout is kept. It is large enough
	// for an updatedInput that carries a whole file for Write.
	MaxStdout = 1 << 20
	// MaxStderr is how much of a hook's stderr is kept; stderr may become
	// the reason the model reads.
	MaxStderr = 64 << 10
)

// wrapper sends stderr to the file named by $1 and runs $2 in a fresh bash,
// so that the command sees neither argument. The sandbox gives a process
// one pipe for stdout and stderr together; Claude Code's protocol needs
// them apart.
const wrapper = `exec 2>"$1" || exit 125; exec /bin/bash -c "$2"`

// drainGrace bounds the wait for a hook's stdout to reach EOF once the hook
// has been reaped. With a cgroup per call the whole tree is gone by then and
// EOF is immediate; with only a process group, a process that escaped the
// group could hold the pipe open for ever.
const drainGrace = 2 * time.Second

// result is how one hook process ended.
type result struct {
	code            int
	stdout          []byte
	stdoutTruncated bool
	stderr          string // capped, trimmed, valid UTF-8
	timedOut        bool
	timeout         time.Duration
	canceled        error
	startErr        error
}

// Run runs every command that matches in.ToolName at ev, all at once,
// through r, and combines what they said. Each command is killed with its
// whole process tree at its timeout or when ctx ends; Run returns once
// every one of them is gone. When ctx ends early the hooks that did not
// finish are reported in Errors and the caller should check ctx.Err()
// before acting on the Outcome.
func (s *Set) Run(ctx context.Context, r *sandbox.Runner, ev Event, in Input) Outcome {
	entries := s.matching(ev, in.ToolName)
	if len(entries) == 0 {
		return Outcome{}
	}
	cwd := in.Cwd
	if cwd == "" {
		cwd = r.Workspace()
	}
	stdin, err := in.Marshal(ev, cwd)
	if err != nil {
		return Outcome{Errors: []string{err.Error()}}
	}
	vs := make([]verdict, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Go(func() {
			vs[i] = interpret(ev, e.label, runOne(ctx, r, e.cmd, cwd, stdin))
		})
	}
	wg.Wait()
	return combine(ev, entries, vs)
}

// runOne runs one hook command to its end, its timeout or ctx's end.
func runOne(ctx context.Context, r *sandbox.Runner, c Command, cwd string, stdin []byte) result {
	res := result{timeout: c.timeout()}
	errFile, err := newStderrFile(r)
	if err != nil {
		res.startErr = err
		return res
	}
	defer func() {
		errFile.Close()
		os.Remove(errFile.Name())
	}()
	p, err := r.Start(ctx, sandbox.Cmd{
		Args:  []string{sandbox.Shell, "-c", wrapper, "toolwire-hook", errFile.Name(), c.Command},
		Dir:   cwd,
		Env:   []string{"CLAUDE_PROJECT_DIR=" + r.Workspace()},
		Stdin: bytes.NewReader(stdin),
	})
	if err != nil {
		if ctx.Err() != nil {
			res.canceled = context.Cause(ctx)
		} else {
			res.startErr = err
		}
		return res
	}
	var stdout cappedBuffer
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		stdout.readFrom(p.Output(), MaxStdout)
	}()

	timer := time.NewTimer(res.timeout)
	defer timer.Stop()
	select {
	case <-p.Done():
	case <-timer.C:
		res.timedOut = true
		p.Kill()
	case <-ctx.Done():
		res.canceled = context.Cause(ctx)
		p.Kill()
	}
	code, werr := p.Wait()
	select {
	case <-readDone:
	case <-time.After(drainGrace):
	}
	p.Output().Close() // makes a blocked read return
	<-readDone
	if werr != nil && res.startErr == nil {
		res.startErr = fmt.Errorf("wait: %w", werr)
	}
	res.code = code
	res.stdout, res.stdoutTruncated = stdout.buf, stdout.truncated
	res.stderr = readStderr(errFile)
	return res
}

// newStderrFile creates the file a hook's stderr goes to, in the runner's
// temp dir (which sandboxed processes may write) and owned by the user the
// hook runs as. It is read back through the returned descriptor, never by
// path, so a hook that swaps the path for a link cannot make the service
// read another file.
func newStderrFile(r *sandbox.Runner) (*os.File, error) {
	f, err := os.CreateTemp(r.TempDir(), ".hook-stderr-*")
	if err != nil {
		return nil, fmt.Errorf("stderr file: %w", err)
	}
	if os.Geteuid() == 0 {
		// The file goes to the owner of the temp dir (the session user).
		fi, err := os.Stat(r.TempDir())
		if err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
				err = f.Chown(int(st.Uid), int(st.Gid))
			}
		}
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			return nil, fmt.Errorf("stderr file: %w", err)
		}
	}
	return f, nil
}

// readStderr returns the first MaxStderr bytes of a hook's stderr, trimmed
// and made valid UTF-8, saying so when there was more.
func readStderr(f *os.File) string {
	b, _ := io.ReadAll(io.NewSectionReader(f, 0, MaxStderr+1))
	more := len(b) > MaxStderr
	if more {
		b = b[:MaxStderr]
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
	if more {
		s += fmt.Sprintf("\n[stderr truncated after %d bytes]", MaxStderr)
	}
	return s
}

// cappedBuffer keeps the first bytes of a stream and drains the rest.
type cappedBuffer struct {
	buf       []byte
	truncated bool
}

func (c *cappedBuffer) readFrom(r io.Reader, limit int) {
	b, _ := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if len(b) > limit {
		c.truncated = true
		b = b[:limit]
		io.Copy(io.Discard, r)
	}
	c.buf = b
}
