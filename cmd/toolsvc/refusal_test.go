package main_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/rpcauth"
	"github.com/toolwire/toolwire/pkg/rpcserver"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// refusedCall runs toolsvc call with one Bash call that would create
// marker under root, expects it to fail, and returns its stderr. The
// marker must not exist afterwards.
func refusedCall(t *testing.T, root string, args ...string) string {
	t.Helper()
	cmd := exec.Command(toolsvcBin, append([]string{"call"}, args...)...)
	cmd.Stdin = strings.NewReader(`{"type":"tool_use","id":"t","name":"Bash","input":{"command":"touch refused-marker"}}`)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("toolsvc call succeeded\nstdout: %s", stdout.String())
	}
	if _, err := os.Stat(filepath.Join(root, "refused-marker")); err == nil {
		t.Fatal("the refused call ran")
	}
	return stderr.String()
}

func wantHint(t *testing.T, stderr, reason, hint string) {
	t.Helper()
	if !strings.Contains(stderr, hint) || !strings.Contains(stderr, "("+reason+")") {
		t.Fatalf("stderr does not say %q (%s):\n%s", hint, reason, stderr)
	}
}

// TestCallExplainsRefusalsByReason checks that toolsvc call tells what to
// do about an executor's refusal, chosen by its reason: the session id in
// use, a workspace outside the root, a permission mode the operator
// disabled, and an executor that drains.
func TestCallExplainsRefusalsByReason(t *testing.T) {
	root := sandboxtest.Dir(t)
	t.Run("workspace outside the root", func(t *testing.T) {
		stderr := refusedCall(t, root, "--embedded", "--root", root, "--workspace", "/etc")
		wantHint(t, stderr, "WORKSPACE_INVALID", "--workspace must name a directory under the executor's root")
	})
	t.Run("bypass mode disabled by the operator", func(t *testing.T) {
		settings := filepath.Join(t.TempDir(), "settings.json")
		if err := os.WriteFile(settings, []byte(`{"permissions":{"disableBypassPermissionsMode":"disable"}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		stderr := refusedCall(t, root, "--embedded", "--root", root, "--settings", settings, "--permission-mode", "bypassPermissions")
		wantHint(t, stderr, "PERMISSION_MODE_DISABLED", "disabled this --permission-mode")
	})

	sock := "unix://" + filepath.Join(t.TempDir(), "toolsvc.sock")
	serve := exec.Command(toolsvcBin, "serve", "--listen", sock, "--root", root, "--log-format", "text", "--grace", "2m")
	var logs bytes.Buffer
	serve.Stderr = &logs
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		_ = serve.Wait()
		if t.Failed() {
			t.Logf("toolsvc logs:\n%s", logs.String())
		}
	})
	opts, err := (&rpcauth.ClientConfig{}).DialOptions(sock)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(sock, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := rpcserver.WaitServing(ctx, conn, "toolwire.executor.v1.ExecutorService"); err != nil {
		t.Fatal(err)
	}
	// A live session, with a call that keeps the executor busy.
	live, err := executorv1.NewExecutorServiceClient(conn).Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(m *executorv1.ExecuteRequest) {
		t.Helper()
		if err := live.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{SessionId: "taken"}}})
	send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: &executorv1.ToolUse{
		Id: "long", Name: "Bash", InputJson: `{"command":"sleep 100"}`, AssistantMessageId: "m1"}}})
	for {
		ev, err := live.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetStarted() != nil {
			break
		}
	}

	t.Run("session id in use", func(t *testing.T) {
		stderr := refusedCall(t, root, "--addr", sock, "--session", "taken")
		wantHint(t, stderr, "SESSION_EXISTS", "session taken is open on the executor")
	})
	t.Run("draining executor", func(t *testing.T) {
		if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		// Draining is visible in health before any session is refused.
		health := healthpb.NewHealthClient(conn)
		for {
			resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "toolwire.executor.v1.ExecutorService"})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		stderr := refusedCall(t, root, "--addr", sock)
		wantHint(t, stderr, "DRAINING", "the executor is shutting down")
	})
	// Let the drain end.
	send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Abort{Abort: &executorv1.Abort{Target: &executorv1.Abort_All{All: true}}}})
}
