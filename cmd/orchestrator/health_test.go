package main_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	orchv1 "github.com/toolwire/toolwire/gen/toolwire/orchestrator/v1"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// TestHealth probes a real `orchestrator serve` with `orchestrator health`,
// the container probe, while it serves and after it stopped, and a toolsvc
// server, which does not offer OrchestratorService. (The probe's TLS
// handling and the drain are tested against toolsvc, which shares it.)
func TestHealth(t *testing.T) {
	addr, stop := startServe(t, fakeapi.New(t))
	toolsvc := startToolsvc(t, sandboxtest.Dir(t))
	health := func(args ...string) result {
		t.Helper()
		cmd := exec.Command(orchestratorBin, append([]string{"health"}, args...)...)
		// Telemetry set-up would refuse this environment (console export
		// would corrupt stdout): the probe must not set telemetry up at all.
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "OTEL_TRACES_EXPORTER=console", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1"}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		r := result{stdout: stdout.String(), stderr: stderr.String()}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			r.code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return r
	}
	check := func(r result, code int, want string) {
		t.Helper()
		out := r.stdout
		if code != 0 {
			out = r.stderr
		}
		if r.code != code || !strings.Contains(out, want) || strings.Count(out, "\n") != 1 {
			t.Fatalf("orchestrator health exited %d, want %d with one line containing %q\nstdout: %q\nstderr: %q", r.code, code, want, r.stdout, r.stderr)
		}
	}

	check(health("--addr", addr, "--insecure"), 0, "toolwire.orchestrator.v1.OrchestratorService at "+addr+" is SERVING")
	check(health("--addr", addr, "--insecure", "--live"), 0, "is alive (SERVING)")
	check(health("--addr", toolsvc, "--insecure"), 1, "orchestrator: toolwire.orchestrator.v1.OrchestratorService at "+toolsvc+": the server does not know this service")
	check(health("--addr", addr, "--insecure", "stray"), 2, `unexpected argument "stray"`)
	if err := stop(); err != nil {
		t.Fatalf("orchestrator serve exited with %v after SIGTERM", err)
	}
	check(health("--addr", addr, "--insecure", "--live"), 1, "Unavailable")
}

// orchestrator serve reports NOT_SERVING as the first step of its
// shutdown, before it interrupts the running turns, so that readiness
// fails for the whole drain. Here the drain lasts: the turn's executor is
// stopped (SIGSTOP), so the orchestrator waits its abort grace for the
// interrupted call's result.
func TestServeIsNotServingWhileItDrains(t *testing.T) {
	root := sandboxtest.Dir(t)
	toolsvc, proc := startToolsvcProcess(t, root)
	t.Cleanup(func() { _ = proc.Signal(syscall.SIGCONT) }) // before the SIGTERM of startToolsvc's cleanup
	fake := fakeapi.New(t, fakeapi.ToolTurn(fakeapi.ToolUse("toolu_long", "Bash", map[string]any{"command": "sleep 60"})))
	addr, stop := startServe(t, fake, "--executor", toolsvc, "--executor-insecure", "--sessions-dir", t.TempDir())

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := orchv1.NewOrchestratorServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	created, err := client.CreateSession(ctx, &orchv1.CreateSessionRequest{
		Config: &orchv1.SessionConfig{Settings: &executorv1.Settings{Mode: executorv1.PermissionMode_PERMISSION_MODE_BYPASS_PERMISSIONS}},
	})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := client.Converse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(&orchv1.ConverseRequest{Msg: &orchv1.ConverseRequest_Attach{Attach: &orchv1.Attach{SessionId: created.GetSession().GetId()}}})
	stream.Send(&orchv1.ConverseRequest{Msg: &orchv1.ConverseRequest_UserMessage{UserMessage: &orchv1.UserMessage{Text: "wait"}}})
	for {
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("before the call was sent: %v", err)
		}
		if r.GetToolUse().GetId() == "toolu_long" {
			break
		}
	}
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()

	// Until the orchestrator has taken the signal it may still say SERVING;
	// from then on, and while it waits for the stopped executor, it must
	// say NOT_SERVING, not vanish.
	var last result
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		cmd := exec.Command(orchestratorBin, "health", "--addr", addr, "--insecure")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		last = result{stdout: stdout.String(), stderr: stderr.String()}
		if err == nil {
			continue
		}
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatal(err)
		}
		last.code = exit.ExitCode()
		break
	}
	if last.code != 1 || !strings.Contains(last.stderr, "NOT_SERVING") {
		t.Fatalf("orchestrator health during the drain exited %d\nstdout: %q\nstderr: %q", last.code, last.stdout, last.stderr)
	}
	if err := proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("orchestrator serve exited with %v after SIGTERM", err)
	}
}
