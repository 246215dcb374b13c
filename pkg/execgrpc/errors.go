package execgrpc

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolwire/toolwire/pkg/executor"
)

// errSuperseded ends a stream whose session another stream resumed.
var errSuperseded = errors.New("another stream resumed this session")

// toStatus maps an error of the executor to a gRPC status error. It is the
// only place that chooses status codes for ExecutorService.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Internal
	switch {
	case errors.Is(err, executor.ErrDraining):
		code = codes.Unavailable
	case errors.Is(err, executor.ErrSessionExists):
		code = codes.AlreadyExists
	case errors.Is(err, executor.ErrSessionNotFound):
		code = codes.NotFound
	case errors.Is(err, executor.ErrInvalidToolUse), errors.Is(err, errProtocol), errors.Is(err, executor.ErrInvalidSettings):
		code = codes.InvalidArgument
	case errors.Is(err, executor.ErrSessionClosed), errors.Is(err, executor.ErrSessionSetup):
		code = codes.FailedPrecondition
	case errors.Is(err, errSuperseded):
		code = codes.Aborted
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return status.Error(code, err.Error())
}
