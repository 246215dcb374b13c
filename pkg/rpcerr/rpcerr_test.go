package rpcerr_test

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/pkg/rpcerr"
)

func TestErrorCarriesReasonAndMetadata(t *testing.T) {
	err := rpcerr.Error(codes.NotFound, rpcerr.SessionNotFound, "session x not found", "session_id", "x", "empty", "", "dangling")
	if status.Code(err) != codes.NotFound || status.Convert(err).Message() != "session x not found" {
		t.Fatalf("status %v", err)
	}
	want := &errdetails.ErrorInfo{Reason: "SESSION_NOT_FOUND", Domain: "toolwire.dev", Metadata: map[string]string{"session_id": "x"}}
	if got := rpcerr.Info(err); !proto.Equal(got, want) {
		t.Fatalf("ErrorInfo %v, want %v", got, want)
	}
	// Callers wrap status errors; the reason survives.
	wrapped := fmt.Errorf("resume: %w", err)
	if rpcerr.Reason(wrapped) != rpcerr.SessionNotFound || rpcerr.Metadata(wrapped, "session_id") != "x" {
		t.Fatalf("wrapped: reason %q, metadata %v", rpcerr.Reason(wrapped), rpcerr.Info(wrapped).GetMetadata())
	}
	// The detail travels as google.rpc.Status details, what
	// grpc-status-details-bin carries.
	if d := status.Convert(err).Proto().GetDetails(); len(d) != 1 || d[0].GetTypeUrl() != "type.googleapis.com/google.rpc.ErrorInfo" {
		t.Fatalf("details %v", d)
	}
}

func TestNoReason(t *testing.T) {
	foreign, err := status.New(codes.Unavailable, "x").WithDetails(&errdetails.ErrorInfo{Reason: "OTHER", Domain: "example.com"})
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"nil":            nil,
		"plain error":    errors.New("boom"),
		"bare status":    status.Error(codes.Unavailable, "connection refused"),
		"foreign domain": foreign.Err(),
	} {
		if r := rpcerr.Reason(err); r != "" {
			t.Errorf("%s: reason %q, want none", name, r)
		}
	}
}
