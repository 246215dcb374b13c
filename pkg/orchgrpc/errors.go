package orchgrpc

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator"
)

// toStatus is the one place where errors become gRPC status codes.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	code := codes.Internal
	switch {
	case errors.Is(err, orchestrator.ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, orchestrator.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, orchestrator.ErrExists):
		code = codes.AlreadyExists
	case errors.Is(err, orchestrator.ErrBusy), errors.Is(err, model.ErrNoCredentials):
		code = codes.FailedPrecondition
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case clientCode(err) != codes.OK:
		// The executor refused the caller's request (e.g. a workspace
		// outside its root): pass its verdict on.
		code = clientCode(err)
	case errors.Is(err, orchestrator.ErrExecutorUnavailable), errors.Is(err, orchestrator.ErrClosed):
		code = codes.Unavailable
	}
	return status.Error(code, err.Error())
}

// clientCode returns the status code wrapped in err when it blames the
// caller's request, else OK.
func clientCode(err error) codes.Code {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return codes.OK
	}
	switch c := se.GRPCStatus().Code(); c {
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
		codes.FailedPrecondition, codes.OutOfRange, codes.Unauthenticated:
		return c
	}
	return codes.OK
}

// errorKind names a Converse request failure for the Error event.
func errorKind(err error) string {
	switch {
	case errors.Is(err, orchestrator.ErrBusy):
		return "busy"
	case errors.Is(err, orchestrator.ErrInvalid):
		return "invalid_argument"
	case errors.Is(err, orchestrator.ErrExecutorUnavailable):
		return "executor_unavailable"
	case errors.Is(err, orchestrator.ErrClosed):
		return "closed"
	}
	return "internal"
}
