package orchgrpc

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolwire/toolwire/pkg/handshake"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/rpcerr"
)

// Errors of the Converse protocol itself, found by the edge. Each wraps
// orchestrator.ErrInvalid.
var (
	// errFirstMessage: the stream's first message is not an Attach.
	errFirstMessage = errors.New("the first Converse message must be an Attach")
	// errUnexpectedMessage: a second Attach, or a message kind this
	// server does not know.
	errUnexpectedMessage = errors.New("unexpected Converse message")
	// errSessionEnded ends a Converse stream whose session closed.
	errSessionEnded = errors.New("the session ended")
	// errInvalidSettings: a session's settings do not convert (an unknown
	// permission mode, a rule that does not parse). It is the executor's
	// INVALID_OPEN, found before the request reaches an executor.
	errInvalidSettings = errors.New("invalid settings")
)

// toStatus maps an error to a gRPC status error with a reason (pkg/rpcerr)
// and the metadata kv, key and value pairs such as "session_id", id. It is
// the one place where errors become status codes and reasons for
// OrchestratorService.
func toStatus(err error, kv ...string) error {
	if err == nil {
		return nil
	}
	code, reason := codes.Internal, rpcerr.Internal
	switch {
	case errors.Is(err, orchestrator.ErrSandboxRequirement):
		code, reason = codes.FailedPrecondition, rpcerr.SandboxRequirementUnmet
		var missing *handshake.MissingError
		if errors.As(err, &missing) {
			words := make([]string, 0, len(missing.Missing))
			for _, m := range missing.Missing {
				w, _, _ := strings.Cut(m, " ")
				words = append(words, w)
			}
			kv = append(kv, "missing", strings.Join(words, ","))
		}
	case errors.Is(err, errFirstMessage):
		code, reason = codes.InvalidArgument, rpcerr.InvalidFirstMessage
	case errors.Is(err, errUnexpectedMessage):
		code, reason = codes.InvalidArgument, rpcerr.UnexpectedMessage
	case errors.Is(err, errInvalidSettings):
		code, reason = codes.InvalidArgument, rpcerr.InvalidOpen
	case errors.Is(err, orchestrator.ErrInvalid):
		code, reason = codes.InvalidArgument, rpcerr.InvalidArgument
	case errors.Is(err, orchestrator.ErrNotFound):
		code, reason = codes.NotFound, rpcerr.SessionNotFound
	case errors.Is(err, orchestrator.ErrExists):
		code, reason = codes.AlreadyExists, rpcerr.SessionExists
	case errors.Is(err, orchestrator.ErrBusy):
		code, reason = codes.FailedPrecondition, rpcerr.SessionBusy
	case errors.Is(err, orchestrator.ErrRewind):
		code, reason = codes.FailedPrecondition, rpcerr.RewindFailed
	case errors.Is(err, model.ErrNoCredentials):
		code, reason = codes.FailedPrecondition, rpcerr.ModelCredentialsMissing
	case errors.Is(err, context.Canceled):
		code, reason = codes.Canceled, rpcerr.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code, reason = codes.DeadlineExceeded, rpcerr.DeadlineExceeded
	case executorRefusal(err) != nil:
		return passOn(err, executorRefusal(err), kv)
	case errors.Is(err, errSessionEnded):
		code, reason = codes.Unavailable, rpcerr.SessionClosed
	case errors.Is(err, orchestrator.ErrExecutorUnavailable):
		code, reason = codes.Unavailable, rpcerr.ExecutorUnavailable
	case errors.Is(err, orchestrator.ErrClosed):
		code, reason = codes.Unavailable, rpcerr.ShuttingDown
	}
	return rpcerr.Error(code, reason, err.Error(), kv...)
}

// executorRefusal returns the status wrapped in err when the executor
// refused the request for a reason waiting does not cure (e.g. a
// workspace outside its root, or the orchestrator's credentials), else nil.
func executorRefusal(err error) *status.Status {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return nil
	}
	switch s := se.GRPCStatus(); s.Code() {
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
		codes.FailedPrecondition, codes.OutOfRange, codes.Unauthenticated:
		return s
	}
	return nil
}

// passOn turns the executor's refusal ex into the orchestrator's status.
// A refusal of the caller's request keeps the executor's code and reason
// (WORKSPACE_INVALID, INVALID_OPEN, ...). A refusal of the orchestrator's
// own credentials becomes EXECUTOR_REFUSED: the caller's credentials are
// fine, and an operator must fix the orchestrator's.
// A refusal without a reason (not from a toolwire executor) keeps its code
// and gets EXECUTOR_REFUSED.
func passOn(err error, ex *status.Status, kv []string) error {
	code, reason := ex.Code(), rpcerr.Reason(ex.Err())
	switch {
	case code == codes.Unauthenticated || code == codes.PermissionDenied:
		code, kv = codes.FailedPrecondition, append(kv, "executor_reason", reason)
		reason = rpcerr.ExecutorRefused
	case reason == "":
		reason = rpcerr.ExecutorRefused
	}
	return rpcerr.Error(code, reason, err.Error(), kv...)
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

// eventReason is the reason of an error event: the one a status for the
// same failure carries (see toStatus), where one fits. A session that is
// closed is SESSION_CLOSED, as the Converse stream itself ends with. A
// failure no reason names (a model API error, a cut stream, the max-turns
// guard, a bug) has none: the event's kind says what failed.
func eventReason(err error) string {
	if err == nil {
		return ""
	}
	if errors.Is(err, orchestrator.ErrClosed) {
		return rpcerr.SessionClosed
	}
	switch r := rpcerr.Reason(toStatus(err)); r {
	case rpcerr.Internal, rpcerr.Canceled, rpcerr.DeadlineExceeded:
		return ""
	default:
		return r
	}
}
