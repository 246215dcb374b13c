package main_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// buildGrpcurl builds the grpcurl pinned in tools/go.mod.
func buildGrpcurl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "grpcurl")
	cmd := exec.Command("go", "build", "-modfile=tools/go.mod", "-o", bin, "github.com/fullstorydev/grpcurl/cmd/grpcurl")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build grpcurl: %v\n%s", err, out)
	}
	return bin
}

func grpcurl(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"-plaintext"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("grpcurl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestGrpcurlReflection checks what a user sees with grpcurl: the services,
// health and reflection, and a description of every message of the API.
func TestGrpcurlReflection(t *testing.T) {
	if testing.Short() {
		t.Skip("builds grpcurl")
	}
	bin := buildGrpcurl(t)
	addr, _ := startServe(t, sandboxtest.Dir(t))
	services := grpcurl(t, bin, addr, "list")
	for _, want := range []string{"toolwire.executor.v1.ExecutorService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !strings.Contains(services, want) {
			t.Errorf("grpcurl list: %q missing from\n%s", want, services)
		}
	}
	desc := grpcurl(t, bin, addr, "describe", "toolwire.executor.v1.ExecutorService")
	for _, want := range []string{"rpc Execute ( stream .toolwire.executor.v1.ExecuteRequest ) returns ( stream .toolwire.executor.v1.ExecuteResponse )", "rpc ListTools"} {
		if !strings.Contains(desc, want) {
			t.Errorf("describe service: %q missing from\n%s", want, desc)
		}
	}
	for _, msg := range []string{"ExecuteRequest", "ExecuteResponse", "Open", "ToolUse", "Abort", "Resume", "PermissionDecision",
		"Hello", "Accepted", "Started", "Progress", "PermissionRequest", "Result", "ContentBlock", "Truncation", "AbortAck", "TaskNotification", "ToolDefinition"} {
		out := grpcurl(t, bin, addr, "describe", "toolwire.executor.v1."+msg)
		if !strings.Contains(out, "toolwire.executor.v1."+msg+" is a message") {
			t.Errorf("describe %s:\n%s", msg, out)
		}
	}
	tools := grpcurl(t, bin, addr, "toolwire.executor.v1.ExecutorService/ListTools")
	for _, name := range []string{`"Bash"`, `"Edit"`, `"Glob"`, `"Grep"`, `"Read"`, `"TaskOutput"`, `"TaskStop"`, `"Write"`} {
		if !strings.Contains(tools, name) {
			t.Errorf("ListTools lacks %s:\n%s", name, tools)
		}
	}
	if strings.Contains(tools, `"BashOutput"`) {
		t.Errorf("ListTools offers the hidden alias BashOutput")
	}
}
