package execgrpc_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/rpcerr"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/tool"
)

// wantReason fails unless err is a status with code and a toolwire
// ErrorInfo with reason and at least the metadata meta.
func wantReason(t *testing.T, err error, code codes.Code, reason string, meta map[string]string) {
	t.Helper()
	if status.Code(err) != code || rpcerr.Reason(err) != reason {
		t.Fatalf("got %v (reason %q), want %v with reason %s", err, rpcerr.Reason(err), code, reason)
	}
	info := rpcerr.Info(err)
	if info.GetDomain() != rpcerr.Domain {
		t.Fatalf("ErrorInfo domain %q, want %q", info.GetDomain(), rpcerr.Domain)
	}
	for k, v := range meta {
		if got := info.GetMetadata()[k]; got != v {
			t.Fatalf("metadata %s = %q, want %q (all: %v)", k, got, v, info.GetMetadata())
		}
	}
}

// refused opens an Execute stream, sends msgs and returns the status the
// stream ends with; every event before it is dropped.
func refused(t *testing.T, client executorv1.ExecutorServiceClient, msgs ...*executorv1.ExecuteRequest) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := client.Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		// The server may end the stream before every message is sent; its
		// status then comes from Recv.
		if err := st.Send(m); err != nil {
			break
		}
	}
	for {
		if _, err := st.Recv(); err != nil {
			if err == io.EOF {
				t.Fatal("the stream ended without an error")
			}
			return err
		}
	}
}

func openMsg(o *executorv1.Open) *executorv1.ExecuteRequest {
	return &executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: o}}
}

func resumeMsg(id string) *executorv1.ExecuteRequest {
	return &executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Resume{Resume: &executorv1.Resume{SessionId: id}}}
}

func toolUseMsg(id string) *executorv1.ExecuteRequest {
	return &executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: &executorv1.ToolUse{
		Id: id, Name: "Bash", InputJson: `{}`, AssistantMessageId: "m1"}}}
}

// TestErrorReasons runs every way an Execute stream can be refused or
// ended by the executor and checks the code, reason and metadata each
// carries.
func TestErrorReasons(t *testing.T) {
	h := newHarness(t, executor.Config{})
	live := h.start(openMsg(&executorv1.Open{SessionId: "live"}))

	tests := []struct {
		name   string
		msgs   []*executorv1.ExecuteRequest
		code   codes.Code
		reason string
		meta   map[string]string
	}{
		{"a tool_use first", []*executorv1.ExecuteRequest{toolUseMsg("x")},
			codes.InvalidArgument, rpcerr.InvalidFirstMessage, nil},
		{"an empty first message", []*executorv1.ExecuteRequest{{}},
			codes.InvalidArgument, rpcerr.InvalidFirstMessage, nil},
		{"resume of an unknown session", []*executorv1.ExecuteRequest{resumeMsg("nope")},
			codes.NotFound, rpcerr.SessionNotFound, map[string]string{"session_id": "nope"}},
		{"open of a live session", []*executorv1.ExecuteRequest{openMsg(&executorv1.Open{SessionId: "live"})},
			codes.AlreadyExists, rpcerr.SessionExists, map[string]string{"session_id": "live"}},
		{"open with an unknown permission mode", []*executorv1.ExecuteRequest{openMsg(&executorv1.Open{SessionId: "s1",
			Settings: &executorv1.Settings{Mode: executorv1.PermissionMode(99)}})},
			codes.InvalidArgument, rpcerr.InvalidOpen, map[string]string{"session_id": "s1", "field": "settings"}},
		{"open with a rule that does not compile", []*executorv1.ExecuteRequest{openMsg(&executorv1.Open{
			Settings: &executorv1.Settings{Allow: []string{"Bash("}}})},
			codes.InvalidArgument, rpcerr.InvalidOpen, map[string]string{"field": "settings"}},
		{"a second open", []*executorv1.ExecuteRequest{openMsg(&executorv1.Open{SessionId: "twice"}), openMsg(&executorv1.Open{})},
			codes.InvalidArgument, rpcerr.UnexpectedMessage, map[string]string{"session_id": "twice"}},
		{"a resume after open", []*executorv1.ExecuteRequest{openMsg(&executorv1.Open{SessionId: "then-resume"}), resumeMsg("live")},
			codes.InvalidArgument, rpcerr.UnexpectedMessage, map[string]string{"session_id": "then-resume"}},
		{"a tool_use without id", []*executorv1.ExecuteRequest{openMsg(&executorv1.Open{SessionId: "noid"}), toolUseMsg("")},
			codes.InvalidArgument, rpcerr.InvalidToolUse, map[string]string{"session_id": "noid"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantReason(t, refused(t, h.client, tt.msgs...), tt.code, tt.reason, tt.meta)
		})
	}

	t.Run("a stream whose session another stream resumed", func(t *testing.T) {
		h.start(resumeMsg("live"))
		select {
		case err := <-live.errc:
			wantReason(t, err, codes.Aborted, rpcerr.SessionSuperseded, map[string]string{"session_id": "live"})
		case <-time.After(30 * time.Second):
			t.Fatal("the superseded stream did not end")
		}
	})

	t.Run("open on a draining executor", func(t *testing.T) {
		h.ex.Close()
		wantReason(t, refused(t, h.client, openMsg(&executorv1.Open{})), codes.Unavailable, rpcerr.Draining, nil)
	})
}

// TestErrorReasonsOfSessionSetup checks the refusals of sessions the
// executor cannot set up: a workspace outside its root (execsvc's real
// environment), a bypass mode the operator disabled, and an environment
// that fails for another reason.
func TestErrorReasonsOfSessionSetup(t *testing.T) {
	real, _ := permHarness(t, execsvc.Config{Operator: settings.Settings{Permissions: settings.Permissions{DisableBypass: true}}})
	for _, ws := range []string{"/etc", "../outside"} {
		t.Run("workspace "+ws, func(t *testing.T) {
			err := refused(t, real.client, openMsg(&executorv1.Open{SessionId: "ws", Workspace: ws}))
			wantReason(t, err, codes.FailedPrecondition, rpcerr.WorkspaceInvalid, map[string]string{"session_id": "ws"})
		})
	}
	t.Run("bypass disabled", func(t *testing.T) {
		err := refused(t, real.client, openMsg(&executorv1.Open{
			Settings: &executorv1.Settings{Mode: executorv1.PermissionMode_PERMISSION_MODE_BYPASS_PERMISSIONS}}))
		wantReason(t, err, codes.InvalidArgument, rpcerr.PermissionModeDisabled, nil)
	})

	t.Run("sandbox setup fails", func(t *testing.T) {
		h := newHarness(t, executor.Config{
			NewEnv: func(context.Context, executor.EnvRequest) (*tool.Env, executor.SandboxInfo, error) {
				return nil, executor.SandboxInfo{}, errors.New("no cgroup for the session")
			},
		})
		err := refused(t, h.client, openMsg(&executorv1.Open{SessionId: "s"}))
		wantReason(t, err, codes.FailedPrecondition, rpcerr.SessionSetupFailed, map[string]string{"session_id": "s"})
	})
}
