// Command orchestrator holds conversations with the model and runs their tool
// calls on a toolsvc executor.
//
//	orchestrator -p "prompt" [flags]   answer one prompt headless, like claude -p
//	orchestrator serve [flags]         serve OrchestratorService (gRPC)
//	orchestrator sessions list|rm      list or remove stored conversations
//	orchestrator health [flags]        probe a server's gRPC health (container probes)
//	orchestrator --version             print the version
//
// Why one package of this size (about 2,200 lines): it is the command line
// of claude -p (its flags, settings discovery, output formats, exit codes
// and the interactive questions) and of serve; one file per job, and the
// conversation itself is in pkg/orchestrator.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/telemetry"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `orchestrator talks to the Anthropic Messages API and runs the model's tool
calls on a toolsvc executor (in-process by default, or remote with --executor).

Usage:
  orchestrator -p "prompt" [flags]   answer one prompt headless and exit
  orchestrator -c -p "prompt"        go on with the latest conversation in this directory
  orchestrator serve [flags]         serve OrchestratorService (gRPC)
  orchestrator sessions list|rm      list or remove stored conversations
  orchestrator health [flags]        exit 0 when a server is SERVING (--live: liveness)
  orchestrator --version             print the version

The model is reached with ANTHROPIC_API_KEY (required), ANTHROPIC_BASE_URL
(optional, for a compatible endpoint) and ANTHROPIC_MODEL (optional).

Run "orchestrator -p -h" or "orchestrator serve -h" for the flags; docs/cli.md
describes them all.
`

func main() {
	// The embedded executor starts sandboxed processes; a re-executed child
	// must confine itself before anything else runs.
	sandbox.RunChildIfRequested()
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	sig := catchSignals()
	defer sig.stop()
	ctx := sig.ctx
	if args[0] == "health" {
		return health(ctx, args[1:], stdout, stderr, getenv)
	}
	// Traces and metrics go where the OTEL_* environment says, if anywhere.
	shutdown, err := telemetry.Setup(ctx, telemetry.Options{ServiceName: "orchestrator", ServiceVersion: version})
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator:", err)
		return 1
	}
	defer func() {
		// Flush what is buffered before the process exits.
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(fctx); err != nil {
			fmt.Fprintln(stderr, "orchestrator: telemetry was not flushed:", err)
		}
	}()
	var code int // headless sets the exit code of a finished turn
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], stderr, getenv)
	case "sessions":
		err = sessions(args[1:], stdout, stderr)
	case "version", "--version", "-version", "-v":
		printVersion(stdout)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
	default:
		code, err = headless(ctx, args, stdin, stdout, stderr, getenv)
		if s := sig.received(); s != 0 {
			// Like a shell, report the signal that ended the run:
			// 130 for SIGINT, 143 for SIGTERM.
			return 128 + int(s)
		}
	}
	var ue usageError
	switch {
	case err == nil:
		return code
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "orchestrator:", err)
		return 2
	}
	fmt.Fprintln(stderr, "orchestrator:", err)
	if code == 0 {
		code = 1
	}
	return code
}

func printVersion(w io.Writer) { fmt.Fprintf(w, "%s (toolwire orchestrator)\n", version) }

// errUsage marks a command-line mistake already reported.
var errUsage = errors.New("usage")

// usageError is a command-line mistake still to be reported: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// signals turns the first SIGINT or SIGTERM into the end of ctx, so the
// running turn stops, its tools are killed and the transcript is saved;
// a second one ends the process at once.
type signals struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	ch     chan os.Signal
	done   chan struct{}
	first  chan syscall.Signal // holds the first signal once it came
}

func catchSignals() *signals {
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &signals{ctx: ctx, cancel: cancel, ch: make(chan os.Signal, 2), done: make(chan struct{}), first: make(chan syscall.Signal, 1)}
	signal.Notify(s.ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		var got syscall.Signal
		for {
			select {
			case <-s.done:
				return
			case v := <-s.ch:
				n, _ := v.(syscall.Signal)
				if got != 0 {
					os.Exit(128 + int(n))
				}
				got = n
				s.first <- n
				cancel(fmt.Errorf("%w by %s", errSignaled, unix.SignalName(n)))
			}
		}
	}()
	return s
}

// errSignaled is the cause of a run ended by a signal.
var errSignaled = errors.New("stopped")

// received returns the first signal caught, or 0.
func (s *signals) received() syscall.Signal {
	select {
	case n := <-s.first:
		s.first <- n
		return n
	default:
		return 0
	}
}

func (s *signals) stop() {
	signal.Stop(s.ch)
	close(s.done)
	s.cancel(nil)
}
