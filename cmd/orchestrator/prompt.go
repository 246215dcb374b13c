package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// stdinWait is how long a prompt given as an argument waits for input on
// a stdin that is not a terminal before it goes on without it, as claude
// -p does: a caller that leaves stdin open without writing to it must not
// hang the run.
const stdinWait = 3 * time.Second

// errNoPrompt is the usage error of a run without a prompt.
var errNoPrompt = errors.New(`no prompt: give it as an argument (orchestrator -p "..."), or pipe it on stdin`)

// readPrompt returns the prompt of a headless run: the arguments, with
// whatever comes on stdin appended after a blank line (cat log |
// orchestrator -p "explain"), or stdin alone when there are no arguments.
// A terminal on stdin is never read: without arguments that is a usage
// error at once, not a wait for input nobody is going to type.
func readPrompt(ctx context.Context, args string, stdin io.Reader, warn io.Writer) (string, error) {
	args = strings.TrimSpace(args)
	if stdin == nil || isTerminal(stdin) {
		if args == "" {
			return "", errNoPrompt
		}
		return args, nil
	}
	wait := time.Duration(0) // no arguments: stdin is the prompt, however slow
	if args != "" {
		wait = stdinWait
	}
	in, err := readInput(ctx, stdin, wait)
	switch {
	case errors.Is(err, errNoInput):
		fmt.Fprintf(warn, "orchestrator: nothing arrived on stdin within %s; going on without it (redirect stdin from /dev/null to skip the wait)\n", stdinWait)
	case err != nil && ctx.Err() == nil && args != "":
		// A stdin that cannot be read (closed, say) adds nothing.
		fmt.Fprintf(warn, "orchestrator: going on without stdin: %v\n", err)
		in = ""
	case err != nil:
		return "", err
	}
	in = strings.TrimRight(in, " \t\r\n")
	switch {
	case args == "" && strings.TrimSpace(in) == "":
		return "", errNoPrompt
	case args == "":
		return in, nil
	case strings.TrimSpace(in) == "":
		return args, nil
	}
	return args + "\n\n" + in, nil
}

// errNoInput: stdin stayed silent for the whole wait.
var errNoInput = errors.New("no input on stdin")

// readInput reads r to its end. With wait > 0 it gives up with errNoInput
// when not one byte arrived within wait; once input flows it reads on to
// the end. It returns early, with ctx's error, when ctx ends (Ctrl-C).
func readInput(ctx context.Context, r io.Reader, wait time.Duration) (string, error) {
	type chunk struct {
		data []byte
		err  error
	}
	// The reader runs on its own: a Read blocked on a silent pipe cannot
	// be cancelled, and the process ends without it.
	chunks := make(chan chunk, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := r.Read(buf)
			chunks <- chunk{append([]byte(nil), buf[:n]...), err}
			if err != nil {
				return
			}
		}
	}()
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	var b strings.Builder
	for {
		select {
		case c := <-chunks:
			b.Write(c.data)
			if b.Len() > 0 {
				timeout = nil
			}
			if errors.Is(c.err, io.EOF) {
				return b.String(), nil
			}
			if c.err != nil {
				return "", fmt.Errorf("read stdin: %w", c.err)
			}
		case <-timeout:
			return "", errNoInput
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
}

// isTerminal reports whether r is a terminal.
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
