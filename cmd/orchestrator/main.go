// Command orchestrator holds conversations with the model and runs their tool
// calls on a toolsvc executor.
//
//	orchestrator -p "prompt" [flags]   answer one prompt headless, like claude -p
//	orchestrator serve [flags]         serve OrchestratorService (gRPC)
//	orchestrator health [flags]        probe a server's gRPC health (container probes)
//	orchestrator version               print the version
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

	"github.com/toolwire/toolwire/pkg/sandbox"
	"github.com/toolwire/toolwire/pkg/telemetry"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `orchestrator talks to the Anthropic Messages API and runs the model's tool
calls on a toolsvc executor (in-process by default, or remote with --executor).

Usage:
  orchestrator -p "prompt" [flags]   answer one prompt headless and exit
  orchestrator serve [flags]         serve OrchestratorService (gRPC)
  orchestrator health [flags]        exit 0 when a server is SERVING (--live: liveness)
  orchestrator version               print the version

The model is reached with ANTHROPIC_API_KEY (required) and ANTHROPIC_BASE_URL
(optional, for a compatible endpoint).

Run "orchestrator -p -h" or "orchestrator serve -h" for the flags.
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
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
	case "version":
		fmt.Fprintln(stdout, "orchestrator", version)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
	default:
		code, err = headless(ctx, args, stdin, stdout, stderr, getenv)
	}
	switch {
	case err == nil:
		return code
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	fmt.Fprintln(stderr, "orchestrator:", err)
	if code == 0 {
		code = 1
	}
	return code
}

// errUsage marks a command-line mistake already reported.
var errUsage = errors.New("usage")
