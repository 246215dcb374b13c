package main

import (
	"context"
	"errors"
	"io"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/healthprobe"
)

// health probes a toolsvc server's gRPC health service once: the readiness
// and liveness check of containers (see package healthprobe). Its defaults
// are those of `toolsvc serve`: 127.0.0.1:7070 and ExecutorService, which
// turns NOT_SERVING when a drain starts.
func health(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	err := healthprobe.Command{
		Program: "toolsvc",
		Addr:    "127.0.0.1:7070",
		Service: executorv1.ExecutorService_ServiceDesc.ServiceName,
	}.Run(ctx, args, stdout, stderr)
	if errors.Is(err, healthprobe.ErrUsage) {
		return errUsage
	}
	return err
}
