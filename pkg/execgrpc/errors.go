package execgrpc

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/rpcerr"
)

// Errors of the Execute protocol itself, found by the edge.
var (
	// errFirstMessage: the stream's first message is neither Open nor
	// Resume.
	errFirstMessage = errors.New("protocol violation")
	// errUnexpectedMessage: Open or Resume after the first message.
	errUnexpectedMessage = errors.New("protocol violation")
	// errSuperseded ends a stream whose session another stream resumed.
	errSuperseded = errors.New("another stream resumed this session")
)

// toStatus maps an error of the executor to a gRPC status error with a
// reason (pkg/rpcerr) and the metadata kv, key and value pairs such as
// "session_id", id. It is the only place that chooses status codes and
// reasons for ExecutorService.
func toStatus(err error, kv ...string) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code, reason := codes.Internal, rpcerr.Internal
	switch {
	case errors.Is(err, executor.ErrDraining):
		code, reason = codes.Unavailable, rpcerr.Draining
	case errors.Is(err, executor.ErrSessionLimit):
		code, reason = codes.ResourceExhausted, rpcerr.SessionLimit
	case errors.Is(err, executor.ErrClientSessionLimit):
		code, reason = codes.ResourceExhausted, rpcerr.ClientSessionLimit
	case errors.Is(err, executor.ErrSessionExists):
		code, reason = codes.AlreadyExists, rpcerr.SessionExists
	case errors.Is(err, executor.ErrSessionNotFound):
		code, reason = codes.NotFound, rpcerr.SessionNotFound
	case errors.Is(err, errFirstMessage):
		code, reason = codes.InvalidArgument, rpcerr.InvalidFirstMessage
	case errors.Is(err, errUnexpectedMessage):
		code, reason = codes.InvalidArgument, rpcerr.UnexpectedMessage
	case errors.Is(err, executor.ErrInvalidToolUse):
		code, reason = codes.InvalidArgument, rpcerr.InvalidToolUse
	case errors.Is(err, permission.ErrBypassDisabled):
		code, reason = codes.InvalidArgument, rpcerr.PermissionModeDisabled
	case errors.Is(err, executor.ErrInvalidSettings):
		code, reason = codes.InvalidArgument, rpcerr.InvalidOpen
	case errors.Is(err, executor.ErrInvalidWorkspace):
		code, reason = codes.FailedPrecondition, rpcerr.WorkspaceInvalid
	case errors.Is(err, executor.ErrSessionSetup):
		code, reason = codes.FailedPrecondition, rpcerr.SessionSetupFailed
	case errors.Is(err, executor.ErrSessionClosed):
		code, reason = codes.FailedPrecondition, rpcerr.SessionClosed
	case errors.Is(err, errSuperseded):
		code, reason = codes.Aborted, rpcerr.SessionSuperseded
	case errors.Is(err, context.DeadlineExceeded):
		code, reason = codes.DeadlineExceeded, rpcerr.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code, reason = codes.Canceled, rpcerr.Canceled
	}
	return rpcerr.Error(code, reason, err.Error(), kv...)
}

// requestedSession is the session id the first message of a stream names,
// "" when it names none.
func requestedSession(first *executorv1.ExecuteRequest) string {
	if id := first.GetOpen().GetSessionId(); id != "" {
		return id
	}
	return first.GetResume().GetSessionId()
}

// classError is an error of an ExecutorService call together with the
// execapi class its status names. Its text is the call's; errors.Is finds
// the class and errors.As the status, so that a caller who passes a
// refusal on (the orchestrator's edge) still has its code and reason.
type classError struct{ class, err error }

func (e *classError) Error() string   { return e.err.Error() }
func (e *classError) Unwrap() []error { return []error{e.class, e.err} }

// classify gives an error a client received the execapi class of its
// reason: SESSION_NOT_FOUND, SESSION_CLOSED, SESSION_EXISTS and DRAINING.
// A status without a reason and with code Unavailable or DeadlineExceeded
// is one gRPC made itself (the executor cannot be reached or did not
// answer in time): execapi.ErrUnavailable. Anything else, a refusal by
// reason, comes back as it is.
func classify(err error) error {
	var class error
	switch rpcerr.Reason(err) {
	case rpcerr.SessionNotFound:
		class = execapi.ErrSessionNotFound
	case rpcerr.SessionClosed:
		class = execapi.ErrSessionClosed
	case rpcerr.SessionExists:
		class = execapi.ErrSessionExists
	case rpcerr.Draining:
		class = execapi.ErrDraining
	case "":
		switch status.Code(err) {
		case codes.Unavailable, codes.DeadlineExceeded:
			class = execapi.ErrUnavailable
		}
	}
	if err == nil || class == nil {
		return err
	}
	return &classError{class: class, err: err}
}
