package main_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

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
