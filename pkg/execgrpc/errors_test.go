package execgrpc

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/rpcerr"
)

// TestToStatus covers the error classes a test cannot reach reliably over
// a stream (a session closing while it is resumed, a context ending, a
// bug); reasons_test.go reaches the others through the server.
func TestToStatus(t *testing.T) {
	tests := []struct {
		err    error
		code   codes.Code
		reason string
	}{
		{executor.ErrSessionClosed, codes.FailedPrecondition, rpcerr.SessionClosed},
		{fmt.Errorf("wait: %w", context.Canceled), codes.Canceled, rpcerr.Canceled},
		{context.DeadlineExceeded, codes.DeadlineExceeded, rpcerr.DeadlineExceeded},
		{errors.New("a bug"), codes.Internal, rpcerr.Internal},
		{fmt.Errorf("%w: session s: %w", executor.ErrSessionSetup, executor.ErrInvalidWorkspace), codes.FailedPrecondition, rpcerr.WorkspaceInvalid},
	}
	for _, tt := range tests {
		err := toStatus(tt.err, "session_id", "s1")
		if status.Code(err) != tt.code || rpcerr.Reason(err) != tt.reason || rpcerr.Metadata(err, "session_id") != "s1" {
			t.Errorf("toStatus(%v) = %v (reason %q, metadata %v), want %v with %s and the session id",
				tt.err, err, rpcerr.Reason(err), rpcerr.Info(err).GetMetadata(), tt.code, tt.reason)
		}
		if got := status.Convert(err).Message(); got != tt.err.Error() {
			t.Errorf("message %q, want the error's text %q", got, tt.err)
		}
	}
	if toStatus(nil) != nil {
		t.Error("toStatus(nil) is not nil")
	}
	// A status made elsewhere passes unchanged.
	in := rpcerr.Error(codes.Unauthenticated, rpcerr.TokenInvalid, "bad token")
	if out := toStatus(in); out != in {
		t.Errorf("toStatus changed a status: %v", out)
	}
}
