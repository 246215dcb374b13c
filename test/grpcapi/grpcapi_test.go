// Package grpcapi_test checks what a user sees of both servers with
// grpcurl: every service, health and reflection, and a description of every
// message of the API, through server reflection of the real binaries.
package grpcapi_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/rpcserver"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/reflect/protoreflect"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	orchestratorv1 "github.com/toolwire/toolwire/gen/toolwire/orchestrator/v1"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// build compiles a package of the repository (or, with modfile, a tool)
// into dir.
func build(t *testing.T, dir, name, pkg string, args ...string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", append(append([]string{"build"}, args...), "-o", bin, pkg)...)
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs a server binary and waits until service reports SERVING.
func start(t *testing.T, env []string, service, addr, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s logs:\n%s", filepath.Base(bin), logs.String())
		}
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := rpcserver.WaitServing(ctx, conn, service); err != nil {
		t.Fatalf("%s not serving at %s: %v", service, addr, err)
	}
}

// messages lists the full names of every message declared in fd.
func messages(fd protoreflect.FileDescriptor) []string {
	var names []string
	ms := fd.Messages()
	for i := range ms.Len() {
		names = append(names, string(ms.Get(i).FullName()))
	}
	return names
}

func TestGrpcurlSeesBothServers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three binaries")
	}
	dir := t.TempDir()
	toolsvc := build(t, dir, "toolsvc", "./cmd/toolsvc")
	orch := build(t, dir, "orchestrator", "./cmd/orchestrator")
	grpcurl := build(t, dir, "grpcurl", "github.com/fullstorydev/grpcurl/cmd/grpcurl", "-modfile=tools/go.mod")

	execAddr, orchAddr := freeAddr(t), freeAddr(t)
	start(t, nil, "toolwire.executor.v1.ExecutorService", execAddr,
		toolsvc, "serve", "--listen", execAddr, "--insecure", "--root", sandboxtest.Dir(t))
	// The model is never called here; a key must exist for serve to start.
	start(t, []string{"ANTHROPIC_API_KEY=unused", "ANTHROPIC_BASE_URL=http://127.0.0.1:9"}, "toolwire.orchestrator.v1.OrchestratorService", orchAddr,
		orch, "serve", "--listen", orchAddr, "--insecure", "--executor", execAddr, "--executor-insecure", "--sessions-dir", t.TempDir())

	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(grpcurl, append([]string{"-plaintext"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	for _, tc := range []struct {
		addr, service string
		file          protoreflect.FileDescriptor
	}{
		{execAddr, "toolwire.executor.v1.ExecutorService", executorv1.File_toolwire_executor_v1_executor_proto},
		{orchAddr, "toolwire.orchestrator.v1.OrchestratorService", orchestratorv1.File_toolwire_orchestrator_v1_orchestrator_proto},
	} {
		list := run(tc.addr, "list")
		for _, want := range []string{tc.service, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
			if !strings.Contains(list, want) {
				t.Errorf("grpcurl list %s: %q missing from\n%s", tc.addr, want, list)
			}
		}
		desc := run(tc.addr, "describe", tc.service)
		svc := tc.file.Services().Get(0)
		for i := range svc.Methods().Len() {
			if m := svc.Methods().Get(i); !strings.Contains(desc, "rpc "+string(m.Name())+" (") {
				t.Errorf("describe %s lacks rpc %s:\n%s", tc.service, m.Name(), desc)
			}
		}
		for _, msg := range messages(tc.file) {
			if out := run(tc.addr, "describe", msg); !strings.Contains(out, msg+" is a message") {
				t.Errorf("describe %s:\n%s", msg, out)
			}
		}
	}
	tools := run(execAddr, "toolwire.executor.v1.ExecutorService/ListTools")
	for _, name := range []string{`"Bash"`, `"Edit"`, `"Glob"`, `"Grep"`, `"Read"`, `"TaskOutput"`, `"TaskStop"`, `"Write"`} {
		if !strings.Contains(tools, name) {
			t.Errorf("ListTools lacks %s:\n%s", name, tools)
		}
	}
	// BashOutput is an older name of TaskOutput: listed among its aliases,
	// never as a tool of its own.
	if !strings.Contains(tools, `"name": "TaskOutput"`) || strings.Contains(tools, `"name": "BashOutput"`) || !strings.Contains(tools, `"BashOutput"`) {
		t.Errorf("ListTools should list BashOutput as an alias of TaskOutput, not as a tool:\n%s", tools)
	}
}
