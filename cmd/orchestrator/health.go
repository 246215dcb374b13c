package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/toolwire/toolwire/pkg/healthprobe"
	"github.com/toolwire/toolwire/pkg/orchgrpc"
)

// health probes an orchestrator server's gRPC health service once: the
// readiness and liveness check of containers (see package healthprobe). Its
// defaults are those of `orchestrator serve`: 127.0.0.1:7071 and
// OrchestratorService. It returns the exit code itself, since run calls it
// before telemetry is set up: a probe that runs every few seconds must not
// start exporters.
func health(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	err := healthprobe.Command{
		Program: "orchestrator",
		Addr:    "127.0.0.1:7071",
		Service: orchgrpc.ServiceName,
		Getenv:  getenv,
	}.Run(ctx, args, stdout, stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, healthprobe.ErrUsage):
		return 2
	}
	fmt.Fprintln(stderr, "orchestrator:", err)
	return 1
}
