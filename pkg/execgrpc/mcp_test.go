package execgrpc_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/mcpclient"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
)

// buildExample builds the example MCP server into dir/bin, where a
// session of a root dir may run it.
func buildExample(tb testing.TB, dir string) string {
	tb.Helper()
	bin := filepath.Join(dir, "bin", "example-mcp")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/mcp/server").CombinedOutput(); err != nil {
		tb.Fatalf("build the example server: %v\n%s", err, out)
	}
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		tb.Fatal(err)
	}
	return bin
}

func toolNames(defs []*executorv1.ToolDefinition) string {
	var n []string
	for _, d := range defs {
		n = append(n, d.GetName())
	}
	return strings.Join(n, " ")
}

func TestMCPToolsInHelloListToolsAndChanges(t *testing.T) {
	h, root := permHarness(t, execsvc.Config{
		Operator: settings.Settings{Permissions: settings.Permissions{DefaultMode: permission.ModeBypass}},
		// A relative command is found in the session's workspace.
		MCP: executor.MCPConfig{Servers: mcpclient.Servers{"op": {Command: "bin/example-mcp"}}},
	})
	local := buildExample(t, root)
	s := h.start(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{
		McpServers: map[string]*executorv1.McpServerConfig{
			"ex": {Command: local},
			"op": {Command: local},
		},
	}}})
	hello := s.hello
	if got := toolNames(hello.GetMcpTools()); !strings.Contains(got, "mcp__ex__echo") || !strings.Contains(got, "mcp__op__echo") || strings.Contains(got, "late") {
		t.Fatalf("hello mcp tools: %s", got)
	}
	states := map[string]*executorv1.McpServerStatus{}
	for _, st := range hello.GetMcpServers() {
		states[st.GetName()+map[bool]string{true: "/op"}[st.GetOperator()]] = st
	}
	if st := states["op"]; st.GetState() != executorv1.McpServerState_MCP_SERVER_STATE_FAILED || !strings.Contains(st.GetError(), "cannot replace it") {
		t.Errorf("session's op: %v", st)
	}
	if st := states["op/op"]; st.GetState() != executorv1.McpServerState_MCP_SERVER_STATE_CONNECTED {
		t.Errorf("operator's op: %v", st)
	}

	list, err := h.client.ListTools(context.Background(), &executorv1.ListToolsRequest{SessionId: hello.GetSessionId()})
	if err != nil {
		t.Fatal(err)
	}
	if got := toolNames(list.GetTools()); !strings.HasPrefix(got, "Bash Edit Glob Grep NotebookEdit Read TaskOutput TaskStop WebFetch Write mcp__ex__add ") {
		t.Fatalf("ListTools of the session: %s", got)
	}
	if _, err := h.client.ListTools(context.Background(), &executorv1.ListToolsRequest{SessionId: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("ListTools of an unknown session: %v", err)
	}

	s.useTool("grow", "m1", "mcp__ex__grow", `{}`)
	var changed *executorv1.McpToolsChanged
	s.until(func(ev *executorv1.ExecuteResponse) bool {
		if c := ev.GetMcpToolsChanged(); c != nil && strings.Contains(toolNames(c.GetTools()), "mcp__ex__late") {
			changed = c
			return true
		}
		return false
	})
	if !strings.Contains(toolNames(changed.GetTools()), "mcp__ex__echo") {
		t.Fatalf("the change event lists only part of the tools: %s", toolNames(changed.GetTools()))
	}
	s.useTool("late", "m2", "mcp__ex__late", `{}`)
	if r := s.results(1)[0]; r.GetIsError() || text(r) != "late tool ran" || r.GetToolName() != "mcp__ex__late" {
		t.Fatalf("late: %v", r)
	}
}

// BenchmarkFloorMCPEcho calls the example server's echo tool with the MCP
// SDK over stdio, without toolsvc: the floor for BenchmarkMCPEcho.
func BenchmarkFloorMCPEcho(b *testing.B) {
	bin := buildExample(b, b.TempDir())
	c := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(bin)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	args := map[string]any{"text": ""}
	for b.Loop() {
		if r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: args}); err != nil || r.IsError {
			b.Fatal(err, r)
		}
	}
}

// BenchmarkMCPEcho calls the example server's echo tool (a no-op) through
// a full toolsvc stream, the server running in the session's sandbox;
// BenchmarkRead1KiB is the built-in call to compare it with.
func BenchmarkMCPEcho(b *testing.B) {
	for _, backend := range []string{"none", "landlock"} {
		b.Run("sandbox="+backend, func(b *testing.B) {
			e := newBenchEnv(b, backend)
			defer e.close()
			bin := buildExample(b, e.root)
			bs := e.sessionWith(b, &executorv1.Open{
				Options:    &executorv1.SessionOptions{ResultOrder: executorv1.ResultOrder_RESULT_ORDER_COMPLETION},
				McpServers: map[string]*executorv1.McpServerConfig{"ex": {Command: bin}},
			})
			defer bs.cancel()
			b.ResetTimer()
			for b.Loop() {
				bs.send("mcp__ex__echo", `{"text":""}`)
				if r := bs.result(); r.GetIsError() {
					b.Fatalf("echo failed: %v", r)
				}
			}
		})
	}
}
