package orchgrpc

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolwire/toolwire/pkg/handshake"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/rpcerr"
)

// TestToStatus covers the error classes no RPC of today's server reaches
// reliably (a busy session, missing credentials, a context ending, a bug,
// an executor refusal without a reason); reasons_test.go reaches the
// others through the server.
func TestToStatus(t *testing.T) {
	tests := []struct {
		err    error
		code   codes.Code
		reason string
	}{
		{fmt.Errorf("session s: %w", orchestrator.ErrBusy), codes.FailedPrecondition, rpcerr.SessionBusy},
		{model.ErrNoCredentials, codes.FailedPrecondition, rpcerr.ModelCredentialsMissing},
		{context.Canceled, codes.Canceled, rpcerr.Canceled},
		{fmt.Errorf("turn: %w", context.DeadlineExceeded), codes.DeadlineExceeded, rpcerr.DeadlineExceeded},
		{errors.New("a bug"), codes.Internal, rpcerr.Internal},
		{fmt.Errorf("%w: x: %w", orchestrator.ErrSandboxRequirement, &handshake.MissingError{Missing: []string{"landlock (landlock_fs not in force)", "network:none (the network is \"host\")"}}),
			codes.FailedPrecondition, rpcerr.SandboxRequirementUnmet},
		{fmt.Errorf("%w: %w", orchestrator.ErrExecutorUnavailable, status.Error(codes.InvalidArgument, "refused")), codes.InvalidArgument, rpcerr.ExecutorRefused},
		{fmt.Errorf("%w: %w", orchestrator.ErrExecutorUnavailable, status.Error(codes.PermissionDenied, "refused")), codes.FailedPrecondition, rpcerr.ExecutorRefused},
		{fmt.Errorf("%w: %w", orchestrator.ErrExecutorUnavailable, status.Error(codes.Unavailable, "connection refused")), codes.Unavailable, rpcerr.ExecutorUnavailable},
		{fmt.Errorf("%w: %w", orchestrator.ErrExecutorUnavailable, rpcerr.Error(codes.Unavailable, rpcerr.Draining, "draining")), codes.Unavailable, rpcerr.ExecutorUnavailable},
	}
	for _, tt := range tests {
		err := toStatus(tt.err, "session_id", "s1")
		if status.Code(err) != tt.code || rpcerr.Reason(err) != tt.reason || rpcerr.Metadata(err, "session_id") != "s1" {
			t.Errorf("toStatus(%v) = %v (reason %q, metadata %v), want %v with %s and the session id",
				tt.err, err, rpcerr.Reason(err), rpcerr.Info(err).GetMetadata(), tt.code, tt.reason)
		}
	}
	err := toStatus(fmt.Errorf("%w: x: %w", orchestrator.ErrSandboxRequirement, &handshake.MissingError{Missing: []string{"landlock (landlock_fs not in force)", "network:none (the network is \"host\")"}}))
	if got := rpcerr.Metadata(err, "missing"); got != "landlock,network:none" {
		t.Errorf("missing = %q", got)
	}
	if toStatus(nil) != nil {
		t.Error("toStatus(nil) is not nil")
	}
}

// An error event carries the reason a status for the same failure would,
// where one fits.
func TestEventReason(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("session s: %w", orchestrator.ErrBusy), rpcerr.SessionBusy},
		{fmt.Errorf("session s: %w", orchestrator.ErrClosed), rpcerr.SessionClosed},
		{fmt.Errorf("%w: permission decision without a tool_use id", orchestrator.ErrInvalid), rpcerr.InvalidArgument},
		{fmt.Errorf("session s: %w: stream broken", orchestrator.ErrExecutorUnavailable), rpcerr.ExecutorUnavailable},
		{fmt.Errorf("%w: %w", orchestrator.ErrExecutorUnavailable, rpcerr.Error(codes.FailedPrecondition, rpcerr.WorkspaceInvalid, "outside the root")), rpcerr.WorkspaceInvalid},
		{fmt.Errorf("request: %w", model.ErrNoCredentials), rpcerr.ModelCredentialsMissing},
		{model.ErrStreamCut, ""},
		{errors.New("reached the limit of 3 model requests in one turn"), ""},
		{context.Canceled, ""},
	}
	for _, tt := range tests {
		if got := eventReason(tt.err); got != tt.want {
			t.Errorf("eventReason(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
