package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	orchv1 "github.com/toolwire/toolwire/gen/toolwire/orchestrator/v1"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/rpcerr"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// The end-to-end tests of MCP through the orchestrator: the real binaries,
// the fake Messages API over HTTP and the example MCP server
// (examples/mcp/server) started by the executor in its sandbox.

var (
	exampleOnce sync.Once
	exampleBin  string
	exampleErr  error
)

// mcpWorkspace returns a workspace root holding a copy of the example MCP
// server in bin/, where the sandbox lets sessions run programs.
func mcpWorkspace(t testing.TB) (root, bin string) {
	t.Helper()
	exampleOnce.Do(func() {
		exampleBin = filepath.Join(filepath.Dir(orchestratorBin), "example-mcp")
		if out, err := exec.Command("go", "build", "-o", exampleBin, "../../examples/mcp/server").CombinedOutput(); err != nil {
			exampleErr = fmt.Errorf("build the example server: %v\n%s", err, out)
		}
	})
	if exampleErr != nil {
		t.Fatal(exampleErr)
	}
	root = sandboxtest.Dir(t)
	b, err := os.ReadFile(exampleBin)
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(root, "bin", "example-mcp")
	if err := os.Mkdir(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return root, bin
}

// mcpServersJSON is an MCP configuration with one stdio server per name,
// all running bin.
func mcpServersJSON(bin string, names ...string) string {
	servers := map[string]any{}
	for _, n := range names {
		servers[n] = map[string]any{"command": bin}
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": servers})
	return string(b)
}

// initEvent is the stream-json init event, as far as these tests read it.
type initEvent struct {
	Tools      []string `json:"tools"`
	MCPServers []struct {
		Name, Status, Error string
	} `json:"mcp_servers"`
	Sandbox *struct {
		Backend  string   `json:"backend"`
		Enforced []string `json:"enforced"`
		Network  string   `json:"network"`
	} `json:"sandbox"`
}

func readInit(t *testing.T, stdout string) initEvent {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Type, Subtype string
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Type == "system" && l.Subtype == "init" {
			var ev initEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatal(err)
			}
			return ev
		}
	}
	t.Fatalf("no init event in:\n%s", stdout)
	return initEvent{}
}

// checkPool checks a request's tool list: the built-in tools first, then
// the MCP tools sorted by name, with the one cache breakpoint on the last
// built-in tool. It returns the MCP tools' names.
func checkPool(t *testing.T, tools []fakeapi.ToolDef) []string {
	t.Helper()
	lastBuiltin := -1
	var mcp []string
	for i, tl := range tools {
		if strings.HasPrefix(tl.Name, "mcp__") {
			mcp = append(mcp, tl.Name)
			continue
		}
		if len(mcp) > 0 {
			t.Fatalf("built-in tool %s after MCP tools %v", tl.Name, mcp)
		}
		lastBuiltin = i
	}
	if lastBuiltin < 0 {
		t.Fatalf("no built-in tools offered: %v", tools)
	}
	if !slices.IsSorted(mcp) {
		t.Errorf("MCP tools not sorted: %v", mcp)
	}
	for i, tl := range tools {
		cached := len(tl.CacheControl) > 0 && string(tl.CacheControl) != "null"
		if cached != (i == lastBuiltin) {
			t.Errorf("tool %d (%s): cache_control %s; want it on the last built-in tool %s only", i, tl.Name, tl.CacheControl, tools[lastBuiltin].Name)
		}
	}
	return mcp
}

// TestHeadlessMCPTools: -p --mcp-config offers the example server's tools
// after the built-ins with the cache breakpoint on the last built-in (a
// second server that cannot start is reported as failed in the init
// event, and the run goes on); the
// model's MCP call runs in the executor and its result, beside a Read's,
// reaches the next request; --disallowedTools hides one MCP tool, and a
// call of it anyway gets "No such tool available".
func TestHeadlessMCPTools(t *testing.T) {
	root, bin := mcpWorkspace(t)
	writeFile(t, filepath.Join(root, "notes.txt"), "a note\n", 0o644)
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(
			fakeapi.ToolUse("echo", "mcp__ex__echo", map[string]any{"text": "hello from MCP"}),
			fakeapi.ToolUse("read", "Read", map[string]any{"file_path": filepath.Join(root, "notes.txt")}),
			fakeapi.ToolUse("hidden", "mcp__ex__crash", map[string]any{}),
		),
		fakeapi.EndTurn(fakeapi.Text("Done.")),
	)
	r := cli{}.run(t, fake, "-p", "use the tools", "--root", root, "--sessions-dir", t.TempDir(),
		"--output-format", "stream-json", "--verbose",
		"--mcp-config", mcpServersJSON(bin, "ex"), "--mcp-config", `{"mcpServers":{"bad":{"command":"no-such-mcp-server"}}}`,
		"--allowedTools", "mcp__ex", "--disallowedTools", "mcp__ex__crash")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	mcp := checkPool(t, reqs[0].Body.Tools)
	for _, want := range []string{"mcp__ex__add", "mcp__ex__echo", "mcp__ex__slow"} {
		if !slices.Contains(mcp, want) {
			t.Errorf("offered MCP tools %v lack %s", mcp, want)
		}
	}
	if slices.Contains(mcp, "mcp__ex__crash") {
		t.Errorf("disallowed mcp__ex__crash offered: %v", mcp)
	}
	got := toolResults(fake)
	if b := got["echo"]; isErr(b) || resultText(b) != "hello from MCP" {
		t.Errorf("MCP result: error %v, %q", isErr(b), resultText(b))
	}
	if b := got["read"]; isErr(b) || !strings.Contains(resultText(b), "a note") {
		t.Errorf("Read result: error %v, %q", isErr(b), resultText(b))
	}
	if b := got["hidden"]; !isErr(b) || resultText(b) != "<tool_use_error>Error: No such tool available: mcp__ex__crash</tool_use_error>" {
		t.Errorf("hidden tool's result: error %v, %q", isErr(b), resultText(b))
	}

	// A server that cannot start is reported and blocks nothing.
	ev := readInit(t, r.stdout)
	if len(ev.MCPServers) != 2 || ev.MCPServers[0].Name != "bad" || ev.MCPServers[0].Status != "failed" || ev.MCPServers[0].Error == "" ||
		ev.MCPServers[1].Name != "ex" || ev.MCPServers[1].Status != "connected" || ev.MCPServers[1].Error != "" {
		t.Errorf("init mcp_servers: %+v", ev.MCPServers)
	}
	if !slices.Contains(ev.Tools, "mcp__ex__echo") || slices.Contains(ev.Tools, "mcp__ex__crash") || !slices.Contains(ev.Tools, "Read") {
		t.Errorf("init tools: %v", ev.Tools)
	}
	if ev.Sandbox == nil || ev.Sandbox.Backend == "" || ev.Sandbox.Network == "" {
		t.Errorf("init sandbox: %+v", ev.Sandbox)
	}
}

// TestHeadlessMCPToolsChanged: a server that adds a tool during a call
// (tools/list_changed) has it offered in a later request of the same turn,
// still after the built-ins with the breakpoint on the last built-in.
func TestHeadlessMCPToolsChanged(t *testing.T) {
	root, bin := mcpWorkspace(t)
	fake := fakeapi.New(t, fakeapi.ToolTurn(fakeapi.ToolUse("grow", "mcp__ex__grow", map[string]any{})))
	// Until the new tool is offered, the model keeps calling echo; then it
	// calls the new tool and ends. The change reaches the orchestrator as
	// an event of its own, so it may take a request or two.
	var n int
	fake.SetFallback(func(req *fakeapi.Request) fakeapi.Reply {
		n++
		for _, tl := range req.Body.Tools {
			if tl.Name == "mcp__ex__late" {
				for _, m := range req.Body.Messages {
					for _, b := range m.Content {
						if b.Type == "tool_result" && b.ToolUseID == "late" {
							return fakeapi.EndTurn(fakeapi.Text("Done."))
						}
					}
				}
				return fakeapi.ToolTurn(fakeapi.ToolUse("late", "mcp__ex__late", map[string]any{}))
			}
		}
		if n > 40 {
			return fakeapi.EndTurn(fakeapi.Text("The new tool never came."))
		}
		return fakeapi.ToolTurn(fakeapi.ToolUse(fmt.Sprintf("echo%d", n), "mcp__ex__echo", map[string]any{"text": "again"}))
	})
	r := cli{}.run(t, fake, "-p", "grow", "--root", root, "--sessions-dir", t.TempDir(),
		"--mcp-config", mcpServersJSON(bin, "ex"), "--allowedTools", "mcp__ex")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	reqs := fake.Requests()
	if slices.Contains(checkPool(t, reqs[0].Body.Tools), "mcp__ex__late") {
		t.Fatal("mcp__ex__late offered before grow ran")
	}
	last := reqs[len(reqs)-1]
	if !slices.Contains(checkPool(t, last.Body.Tools), "mcp__ex__late") {
		t.Fatalf("mcp__ex__late never offered in %d requests", len(reqs))
	}
	if b := toolResults(fake)["late"]; isErr(b) || resultText(b) != "late tool ran" {
		t.Errorf("late tool's result: error %v, %q", isErr(b), resultText(b))
	}
}

// TestHeadlessProjectMCPApproval: the project's .mcp.json servers are used
// only when the settings approve them (enabledMcpjsonServers,
// enableAllProjectMcpServers), never when disabledMcpjsonServers names
// them or with --strict-mcp-config; a server left out is named on stderr
// and in the init event.
func TestHeadlessProjectMCPApproval(t *testing.T) {
	root, bin := mcpWorkspace(t)
	writeFile(t, filepath.Join(root, ".mcp.json"), mcpServersJSON(bin, "proj", "other"), 0o644)
	run := func(args ...string) (initEvent, result) {
		t.Helper()
		fake := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Text("ok")))
		r := cli{}.run(t, fake, append([]string{"-p", "x", "--root", root, "--sessions-dir", t.TempDir(), "--output-format", "stream-json"}, args...)...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d\nstderr: %s", args, r.code, r.stderr)
		}
		return readInit(t, r.stdout), r
	}
	status := func(ev initEvent) map[string]string {
		out := map[string]string{}
		for _, s := range ev.MCPServers {
			out[s.Name] = s.Status
		}
		return out
	}

	ev, r := run()
	if got := status(ev); got["proj"] != "disabled" || got["other"] != "disabled" {
		t.Errorf("unapproved: init mcp_servers %+v", ev.MCPServers)
	}
	if slices.ContainsFunc(ev.Tools, func(n string) bool { return strings.HasPrefix(n, "mcp__") }) {
		t.Errorf("unapproved servers' tools offered: %v", ev.Tools)
	}
	if !strings.Contains(r.stderr, `.mcp.json: MCP server "proj" not used: a project server of .mcp.json that is not approved`) {
		t.Errorf("stderr does not say why proj is not used: %q", r.stderr)
	}

	ev, _ = run("--settings", `{"enabledMcpjsonServers": ["proj"]}`)
	if got := status(ev); got["proj"] != "connected" || got["other"] != "disabled" {
		t.Errorf("proj approved: init mcp_servers %+v", ev.MCPServers)
	}
	if !slices.Contains(ev.Tools, "mcp__proj__echo") || slices.Contains(ev.Tools, "mcp__other__echo") {
		t.Errorf("proj approved: tools %v", ev.Tools)
	}

	writeFile(t, filepath.Join(root, ".claude", "settings.local.json"), `{"enableAllProjectMcpServers": true, "disabledMcpjsonServers": ["other"]}`, 0o644)
	ev, _ = run()
	if got := status(ev); got["proj"] != "connected" || got["other"] != "disabled" {
		t.Errorf("all approved but other: init mcp_servers %+v", ev.MCPServers)
	}

	ev, r = run("--strict-mcp-config", "--mcp-config", mcpServersJSON(bin, "flag"))
	if got := status(ev); len(got) != 1 || got["flag"] != "connected" {
		t.Errorf("strict: init mcp_servers %+v", ev.MCPServers)
	}
	if strings.Contains(r.stderr, ".mcp.json") {
		t.Errorf("strict: stderr mentions .mcp.json: %q", r.stderr)
	}
}

// TestHeadlessRequireSandbox: -p --require-sandbox refuses an executor
// whose Hello lacks a requirement, naming it, before the model is asked
// anything, and runs with one that has it.
func TestHeadlessRequireSandbox(t *testing.T) {
	root := sandboxtest.Dir(t)
	fake := fakeapi.New(t)
	r := cli{}.run(t, fake, "-p", "x", "--root", root, "--sessions-dir", t.TempDir(),
		"--sandbox", "none", "--require-sandbox", "landlock,network:none,no_new_privs")
	if r.code != 1 || !strings.Contains(r.stderr, `orchestrator: the executor's sandbox does not meet the requirements: embedded: the executor does not enforce what is required: landlock (landlock_fs and landlock_scope not in force); network:none (the network is "host")`) {
		t.Errorf("--sandbox none: exit %d, stderr %q", r.code, r.stderr)
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("%d model requests with a refused executor", n)
	}

	r = cli{}.run(t, fake, "-p", "x", "--require-sandbox", "nonsense")
	if r.code != 2 || !strings.Contains(r.stderr, `--require-sandbox: unknown sandbox requirement "nonsense"`) {
		t.Errorf("unknown word: exit %d, stderr %q", r.code, r.stderr)
	}

	fake = fakeapi.New(t, fakeapi.EndTurn(fakeapi.Text("ok")))
	r = cli{}.run(t, fake, "-p", "x", "--root", root, "--sessions-dir", t.TempDir(), "--output-format", "stream-json",
		"--require-sandbox", "landlock,no_new_privs")
	if r.code != 0 {
		t.Fatalf("landlock executor: exit %d\nstderr: %s", r.code, r.stderr)
	}
	if ev := readInit(t, r.stdout); ev.Sandbox == nil || ev.Sandbox.Backend != "landlock" || !slices.Contains(ev.Sandbox.Enforced, "landlock_fs") {
		t.Errorf("init sandbox: %+v", ev.Sandbox)
	}
}

// TestServeRequireSandbox: orchestrator serve with --require-sandbox
// refuses a remote toolsvc started with --sandbox none
// (FAILED_PRECONDITION, SANDBOX_REQUIREMENT_UNMET, the missing words in
// the metadata); a session's own require_sandbox is checked too; a
// matching executor's sandbox and MCP servers are in CreateSession's and
// GetSession's Session.
func TestServeRequireSandbox(t *testing.T) {
	root, bin := mcpWorkspace(t)
	fake := fakeapi.New(t)
	client := func(addr string) orchv1.OrchestratorServiceClient {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return orchv1.NewOrchestratorServiceClient(conn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	unconfined, _ := startToolsvcProcess(t, root, "--sandbox", "none")
	addr, _ := startServe(t, fake, "--executor", unconfined, "--executor-insecure", "--sessions-dir", t.TempDir(),
		"--require-sandbox", "landlock")
	_, err := client(addr).CreateSession(ctx, &orchv1.CreateSessionRequest{})
	if status.Code(err) != codes.FailedPrecondition || rpcerr.Reason(err) != rpcerr.SandboxRequirementUnmet ||
		rpcerr.Metadata(err, "missing") != "landlock" || !strings.Contains(status.Convert(err).Message(), "landlock (landlock_fs and landlock_scope not in force)") {
		t.Errorf("unconfined executor: %v (reason %q, missing %q)", err, rpcerr.Reason(err), rpcerr.Metadata(err, "missing"))
	}

	confined := startToolsvc(t, root)
	addr, _ = startServe(t, fake, "--executor", confined, "--executor-insecure", "--sessions-dir", t.TempDir(),
		"--require-sandbox", "landlock", "--mcp-config", mcpServersJSON(bin, "op"))
	c := client(addr)
	_, err = c.CreateSession(ctx, &orchv1.CreateSessionRequest{Config: &orchv1.SessionConfig{RequireSandbox: []string{"backend:gvisor"}}})
	if rpcerr.Reason(err) != rpcerr.SandboxRequirementUnmet || rpcerr.Metadata(err, "missing") != "backend:gvisor" {
		t.Errorf("session's own requirement: %v", err)
	}
	_, err = c.CreateSession(ctx, &orchv1.CreateSessionRequest{Config: &orchv1.SessionConfig{
		McpServers: map[string]*executorv1.McpServerConfig{"op": {Command: bin}}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `MCP server "op" is the orchestrator's own`) {
		t.Errorf("a session's server named like the operator's: %v", err)
	}
	resp, err := c.CreateSession(ctx, &orchv1.CreateSessionRequest{Config: &orchv1.SessionConfig{
		RequireSandbox: []string{"no_new_privs"},
		Settings:       &executorv1.Settings{Mode: executorv1.PermissionMode_PERMISSION_MODE_BYPASS_PERMISSIONS},
		McpServers:     map[string]*executorv1.McpServerConfig{"mine": {Command: bin}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*orchv1.Session{resp.GetSession(), getSession(ctx, t, c, resp.GetSession().GetId())} {
		sb := s.GetSandbox()
		if sb.GetBackend() != "landlock" || !slices.Contains(sb.GetEnforced(), executorv1.Protection_PROTECTION_LANDLOCK_FS) {
			t.Errorf("session's sandbox: %v", sb)
		}
		var names []string
		for _, m := range s.GetMcpServers() {
			if m.GetState() == executorv1.McpServerState_MCP_SERVER_STATE_CONNECTED {
				names = append(names, m.GetName())
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"mine", "op"}) {
			t.Errorf("session's connected MCP servers: %v (%v)", names, s.GetMcpServers())
		}
	}

	// A turn through Converse: the model is offered both servers' tools
	// after the built-ins, and calls one of each.
	fake.Push(fakeapi.ToolTurn(
		fakeapi.ToolUse("m1", "mcp__mine__echo", map[string]any{"text": "from mine"}),
		fakeapi.ToolUse("o1", "mcp__op__add", map[string]any{"a": 2, "b": 3}),
	), fakeapi.EndTurn(fakeapi.Text("Done.")))
	stream, err := c.Converse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(&orchv1.ConverseRequest{Msg: &orchv1.ConverseRequest_Attach{Attach: &orchv1.Attach{SessionId: resp.GetSession().GetId()}}})
	stream.Send(&orchv1.ConverseRequest{Msg: &orchv1.ConverseRequest_UserMessage{UserMessage: &orchv1.UserMessage{Text: "call them"}}})
	results := map[string]string{}
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("converse: %v", err)
		}
		if r := ev.GetToolResult(); r != nil {
			var text strings.Builder
			for _, b := range r.GetContent() {
				text.WriteString(b.GetText().GetText())
			}
			results[r.GetToolUseId()] = fmt.Sprintf("%v %s", r.GetIsError(), text.String())
		}
		if tc := ev.GetTurnComplete(); tc != nil {
			if tc.GetStopReason() != orchv1.StopReason_STOP_REASON_END_TURN {
				t.Errorf("turn = %v", tc)
			}
			break
		}
	}
	stream.CloseSend()
	if results["m1"] != "false from mine" || !strings.HasPrefix(results["o1"], "false ") || !strings.Contains(results["o1"], "5") {
		t.Errorf("results through Converse: %q", results)
	}
	reqs := fake.Requests()
	mcp := checkPool(t, reqs[0].Body.Tools)
	if !slices.Contains(mcp, "mcp__mine__echo") || !slices.Contains(mcp, "mcp__op__add") {
		t.Errorf("offered MCP tools: %v", mcp)
	}
}

func getSession(ctx context.Context, t *testing.T, c orchv1.OrchestratorServiceClient, id string) *orchv1.Session {
	t.Helper()
	resp, err := c.GetSession(ctx, &orchv1.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetSession()
}

func isErr(b model.Block) bool { return b.IsError != nil && *b.IsError }
