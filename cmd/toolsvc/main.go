// Command toolsvc is toolwire's sandboxed tool executor.
//
//	toolsvc serve   serve ExecutorService on a TCP address or unix socket
//	toolsvc call    run tool_use blocks from stdin and print tool_result JSON
//	toolsvc health  probe a server's gRPC health (container probes)
//	toolsvc version print the version
//
// Why one package of this size (about 1,150 lines): the subcommands' flags,
// their help and the hints for a failed start are what a user meets; the
// work itself is in pkg/execsvc and pkg/execgrpc.
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

	"github.com/toolwire/toolwire/pkg/sandbox"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `toolsvc runs an AI model's tool calls in a sandbox.

Usage:
  toolsvc serve [flags]    serve ExecutorService (gRPC)
  toolsvc call [flags]     run tool_use blocks read from stdin, print tool_result JSON
  toolsvc health [flags]   exit 0 when a server is SERVING (readiness; --live: liveness)
  toolsvc version          print the version

Run "toolsvc <command> -h" for the flags of a command.
`

func main() {
	// A sandboxed child re-executes this binary; it must confine itself and
	// exec the tool before anything else runs.
	sandbox.RunChildIfRequested()
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], stderr)
	case "call":
		err = call(ctx, args[1:], stdin, stdout, stderr)
	case "health":
		err = health(ctx, args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "toolsvc", version)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "toolsvc: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	fmt.Fprintln(stderr, "toolsvc:", err)
	return 1
}

// errUsage marks a command-line mistake already reported by the flag set.
var errUsage = errors.New("usage")
