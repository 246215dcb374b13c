package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
)

// The end-to-end tests of MCP: the real toolsvc binary runs the real
// example MCP server (examples/mcp/server) in its sandbox.

var (
	exampleOnce sync.Once
	exampleBin  string
	exampleErr  error
)

// exampleServer builds the example MCP server once.
func exampleServer(t *testing.T) string {
	t.Helper()
	exampleOnce.Do(func() {
		dir := filepath.Dir(toolsvcBin)
		exampleBin = filepath.Join(dir, "example-mcp")
		out, err := exec.Command("go", "build", "-o", exampleBin, "../../examples/mcp/server").CombinedOutput()
		if err != nil {
			exampleErr = fmt.Errorf("build the example server: %v\n%s", err, out)
		}
	})
	if exampleErr != nil {
		t.Fatal(exampleErr)
	}
	return exampleBin
}

// mcpRoot returns a workspace root holding a copy of the example server in
// bin/, where the sandbox lets sessions run programs.
func mcpRoot(t *testing.T) (root, bin string) {
	t.Helper()
	root = sandboxtest.Dir(t)
	b, err := os.ReadFile(exampleServer(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(root, "bin", "example-mcp")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return root, bin
}

// mcpConfig is an --mcp-config value with one stdio server "ex".
func mcpConfig(bin string, args ...string) string {
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"ex": map[string]any{"command": bin, "args": args}}})
	return string(b)
}

// toolsvcCall runs toolsvc call and returns its stdout and stderr; it
// fails the test when toolsvc fails.
func toolsvcCall(t *testing.T, stdin string, env []string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(toolsvcBin, append([]string{"call"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("toolsvc call %v: %v\nstderr: %s", args, err, stderr.String())
	}
	return stdout.String(), stderr.String()
}

type listing struct {
	Tools []struct {
		Name        string `json:"name"`
		Concurrency string `json:"concurrency"`
		InputSchema string `json:"inputSchemaJson"`
	} `json:"tools"`
	MCPServers []struct {
		Name       string `json:"name"`
		State      string `json:"state"`
		Error      string `json:"error"`
		Tools      int    `json:"tools"`
		Operator   bool   `json:"operator"`
		ServerName string `json:"serverName"`
	} `json:"mcp_servers"`
}

func listTools(t *testing.T, env []string, args ...string) listing {
	t.Helper()
	out, _ := toolsvcCall(t, "", env, append([]string{"--list-tools"}, args...)...)
	var l listing
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("--list-tools output: %v\n%s", err, out)
	}
	return l
}

func (l listing) names() string {
	var n []string
	for _, t := range l.Tools {
		n = append(n, t.Name)
	}
	return strings.Join(n, " ")
}

func results(t *testing.T, out string) map[string]toolResult {
	t.Helper()
	var rs []toolResult
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("output is not a JSON array of tool_result blocks: %v\n%s", err, out)
	}
	m := map[string]toolResult{}
	for _, r := range rs {
		m[r.ToolUseID] = r
	}
	return m
}

func text(r toolResult) string {
	if s, ok := r.Content.(string); ok {
		return s
	}
	b, _ := json.Marshal(r.Content)
	return string(b)
}

func isError(r toolResult) bool { return r.IsError != nil && *r.IsError }

func TestMCPListing(t *testing.T) {
	root, bin := mcpRoot(t)
	l := listTools(t, nil, "--embedded", "--root", root, "--mcp-config", mcpConfig(bin))
	want := "Bash Edit Glob Grep NotebookEdit Read TaskOutput TaskStop WebFetch Write " +
		"mcp__ex__add mcp__ex__big mcp__ex__crash mcp__ex__echo mcp__ex__fail mcp__ex__grow mcp__ex__image mcp__ex__meta mcp__ex__probe mcp__ex__slow"
	if got := l.names(); got != want {
		t.Fatalf("tools:\n got %s\nwant %s", got, want)
	}
	for _, tl := range l.Tools {
		if tl.Name == "mcp__ex__echo" && (tl.Concurrency != "CONCURRENCY_ALWAYS" || !strings.Contains(tl.InputSchema, `"text"`)) {
			t.Errorf("echo: %+v", tl)
		}
		if tl.Name == "mcp__ex__add" && tl.Concurrency != "CONCURRENCY_NEVER" {
			t.Errorf("add: %+v", tl)
		}
	}
	if len(l.MCPServers) != 1 || l.MCPServers[0].State != "MCP_SERVER_STATE_CONNECTED" || l.MCPServers[0].Tools != 10 || l.MCPServers[0].ServerName != "toolwire-example" {
		t.Fatalf("servers: %+v", l.MCPServers)
	}
}

func TestMCPCallsErrorsProgressAndRestart(t *testing.T) {
	root, bin := mcpRoot(t)
	in := `{"id":"m1","content":[
		{"type":"tool_use","id":"echo","name":"mcp__ex__echo","input":{"text":"hello"}},
		{"type":"tool_use","id":"add","name":"mcp__ex__add","input":{"a":1,"b":2}},
		{"type":"tool_use","id":"fail","name":"mcp__ex__fail","input":{"message":"it broke"}},
		{"type":"tool_use","id":"bad","name":"mcp__ex__echo","input":{"txt":"x"}},
		{"type":"tool_use","id":"slow","name":"mcp__ex__slow","input":{"steps":3,"delay_ms":100}},
		{"type":"tool_use","id":"crash","name":"mcp__ex__crash","input":{"code":3}},
		{"type":"tool_use","id":"after","name":"mcp__ex__echo","input":{"text":"restarted"}},
		{"type":"tool_use","id":"image","name":"mcp__ex__image","input":{}}]}`
	out, events := toolsvcCall(t, in, nil, "--embedded", "--root", root, "--progress", "--mcp-config", mcpConfig(bin))
	rs := results(t, out)
	checks := []struct {
		id, text string
		isError  bool
	}{
		{"echo", "hello", false},
		{"add", `{"sum":3}`, false},
		{"fail", "it broke", true},
		{"bad", "<tool_use_error>InputValidationError: mcp__ex__echo failed due to the following issues:\nThe required parameter `text` is missing\nAn unexpected parameter `txt` was provided</tool_use_error>", true},
		{"slow", "counted 3 steps", false},
		{"after", "restarted", false},
	}
	for _, c := range checks {
		if r := rs[c.id]; text(r) != c.text || isError(r) != c.isError {
			t.Errorf("%s: %q is_error=%v, want %q is_error=%v", c.id, text(r), isError(r), c.text, c.isError)
		}
	}
	if r := rs["crash"]; !isError(r) || !strings.Contains(text(r), `The MCP server "ex" stopped during the call: the server exited with code 3`) {
		t.Errorf("crash: %+v", r)
	}
	if r := text(rs["image"]); !strings.Contains(r, `"media_type":"image/png"`) || !strings.Contains(r, "resource text") {
		t.Errorf("image: %s", r)
	}
	// Progress notifications arrive as Progress events of the call.
	var progress []string
	sc := bufio.NewScanner(strings.NewReader(events))
	for sc.Scan() {
		var raw struct {
			Progress *struct {
				ToolUseID string `json:"toolUseId"`
				Output    []byte `json:"output"`
			} `json:"progress"`
		}
		if json.Unmarshal(sc.Bytes(), &raw) == nil && raw.Progress != nil && raw.Progress.ToolUseID == "slow" {
			progress = append(progress, string(raw.Progress.Output))
		}
	}
	// The last notifications may come after the result and are dropped:
	// progress is best effort.
	if got := strings.Join(progress, ""); !strings.HasPrefix("[1/3] step 1\n[2/3] step 2\n[3/3] step 3\n", got) || !strings.HasPrefix(got, "[1/3] step 1\n") {
		t.Errorf("progress of slow: %q\nevents:\n%s", got, events)
	}
}

func TestMCPPermissionsAndHooks(t *testing.T) {
	root, bin := mcpRoot(t)
	settingsFile := filepath.Join(t.TempDir(), "settings.json")
	settings := `{
		"permissions": {"allow": ["mcp__ex"], "deny": ["mcp__ex__fail"], "ask": ["mcp__ex__add"]},
		"hooks": {"PreToolUse": [{"matcher": "mcp__ex__(echo|image)", "hooks": [{"type": "command",
			"command": "if grep -q forbidden; then echo 'no forbidden words' >&2; exit 2; fi"}]}]}
	}`
	if err := os.WriteFile(settingsFile, []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	in := `[{"type":"tool_use","id":"allowed","name":"mcp__ex__echo","input":{"text":"fine"}},
		{"type":"tool_use","id":"hooked","name":"mcp__ex__echo","input":{"text":"forbidden"}},
		{"type":"tool_use","id":"denied","name":"mcp__ex__fail","input":{"message":"x"}},
		{"type":"tool_use","id":"asked","name":"mcp__ex__add","input":{"a":1,"b":1}}]`
	out, _ := toolsvcCall(t, in, nil, "--embedded", "--root", root, "--settings", settingsFile,
		"--permission-mode", "default", "--ask", "deny", "--mcp-config", mcpConfig(bin))
	rs := results(t, out)
	if r := rs["allowed"]; isError(r) || text(r) != "fine" {
		t.Errorf("allowed by mcp__ex: %+v", r)
	}
	if r := rs["hooked"]; !isError(r) || !strings.Contains(text(r), "no forbidden words") {
		t.Errorf("blocked by the hook: %+v", r)
	}
	if r := rs["denied"]; !isError(r) || !strings.Contains(text(r), "mcp__ex__fail") {
		t.Errorf("denied by mcp__ex__fail: %+v", r)
	}
	if r := rs["asked"]; !isError(r) || !strings.Contains(text(r), "The user denied permission to use mcp__ex__add") {
		t.Errorf("asked (and denied by the client): %+v", r)
	}
	// Without any rule, the default mode asks for every MCP tool, even one
	// the server annotates read-only.
	out, _ = toolsvcCall(t, `{"type":"tool_use","id":"e","name":"mcp__ex__echo","input":{"text":"x"}}`, nil,
		"--embedded", "--root", root, "--permission-mode", "default", "--ask", "deny", "--mcp-config", mcpConfig(bin))
	if r := results(t, out)["e"]; !isError(r) || !strings.Contains(text(r), "denied permission") {
		t.Errorf("default mode: %+v", r)
	}
}

func TestMCPServerThatNeverInitializes(t *testing.T) {
	root, bin := mcpRoot(t)
	cfg := fmt.Sprintf(`{"mcpServers":{"stuck":{"command":%q,"args":["-hang"]},"ex":{"command":%q},"broken":{"type":"http"}}}`, bin, bin)
	begin := time.Now()
	l := listTools(t, nil, "--embedded", "--root", root, "--mcp-timeout", "1s", "--mcp-config", cfg)
	if d := time.Since(begin); d > 30*time.Second {
		t.Fatalf("the session waited %s", d)
	}
	states := map[string]string{}
	for _, s := range l.MCPServers {
		states[s.Name] = s.State + " " + s.Error
	}
	if !strings.HasPrefix(states["stuck"], "MCP_SERVER_STATE_FAILED no answer to initialize and tools/list within 1s") ||
		!strings.HasPrefix(states["broken"], "MCP_SERVER_STATE_FAILED invalid configuration") ||
		states["ex"] != "MCP_SERVER_STATE_CONNECTED " {
		t.Fatalf("servers: %v", states)
	}
	if !strings.Contains(l.names(), "mcp__ex__echo") || strings.Contains(l.names(), "stuck") {
		t.Fatalf("tools: %s", l.names())
	}
}

// startHTTPServer runs the example server over streamable HTTP on
// loopback, requiring a bearer token, and returns its URL.
func startHTTPServer(t *testing.T, token string) string {
	t.Helper()
	cmd := exec.Command(exampleServer(t), "-http", "127.0.0.1:0", "-require-header", "Authorization: Bearer "+token)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok {
		t.Fatalf("example server said %q", line)
	}
	return url
}

func TestMCPHTTPServerOnLoopback(t *testing.T) {
	root, _ := mcpRoot(t)
	url := startHTTPServer(t, "s3cret")
	// The operator's server: ${MCP_TOKEN} comes from toolsvc's environment.
	operator := fmt.Sprintf(`{"mcpServers":{"web":{"type":"http","url":%q,"headers":{"Authorization":"Bearer ${MCP_TOKEN}"}}}}`, url)
	sock := "unix://" + filepath.Join(t.TempDir(), "toolsvc.sock")
	cmd := exec.Command(toolsvcBin, "serve", "--listen", sock, "--root", root, "--log-format", "text", "--mcp-config", operator)
	cmd.Env = append(os.Environ(), "MCP_TOKEN=s3cret")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitServing(t, sock)

	// The session's own: the caller's environment fills ${MCP_TOKEN}; one
	// that is not on loopback is refused (the session's network is none).
	session := fmt.Sprintf(`{"mcpServers":{"mine":{"type":"http","url":%q,"headers":{"Authorization":"Bearer ${MCP_TOKEN}"}},
		"far":{"type":"http","url":"http://192.0.2.1/mcp"}}}`, url)
	in := `[{"type":"tool_use","id":"op","name":"mcp__web__echo","input":{"text":"operator's"}},
		{"type":"tool_use","id":"own","name":"mcp__mine__add","input":{"a":2,"b":3}}]`
	out, events := toolsvcCall(t, in, []string{"MCP_TOKEN=s3cret"}, "--addr", sock, "--progress", "--mcp-config", session)
	rs := results(t, out)
	if r := rs["op"]; isError(r) || text(r) != "operator's" {
		t.Errorf("operator's http server: %+v\nlogs: %s", r, logs.String())
	}
	if r := rs["own"]; isError(r) || text(r) != `{"sum":5}` {
		t.Errorf("session's http server: %+v", r)
	}
	servers := helloServers(t, events)
	if far := servers["far"]; far.State != "MCP_SERVER_STATE_FAILED" || !strings.Contains(far.Error, "may only be reached on loopback") {
		t.Errorf("the far server was not refused: %+v", far)
	}
	if web := servers["web"]; web.State != "MCP_SERVER_STATE_CONNECTED" || !web.Operator || web.Transport != "http" {
		t.Errorf("the operator's server: %+v", web)
	}
}

type serverStatus struct {
	State, Error, Transport string
	Operator                bool
}

// helloServers returns the MCP servers of the Hello among events, as
// toolsvc call --progress prints them.
func helloServers(t *testing.T, events string) map[string]serverStatus {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(events))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Hello *struct {
				MCPServers []struct {
					Name string `json:"name"`
					serverStatus
				} `json:"mcpServers"`
			} `json:"hello"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Hello == nil {
			continue
		}
		out := map[string]serverStatus{}
		for _, s := range ev.Hello.MCPServers {
			out[s.Name] = s.serverStatus
		}
		return out
	}
	t.Fatalf("no hello among the events:\n%s", events)
	return nil
}

// TestMCPSandboxHoldsForAMaliciousServer has the example server try what
// a malicious one would: read outside the workspace, reach the network,
// find the executor's secrets in its environment.
func TestMCPSandboxHoldsForAMaliciousServer(t *testing.T) {
	root, bin := mcpRoot(t)
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "secret.txt")
	if err := os.WriteFile(secret, []byte("top secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(secretDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "inside.txt"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	cfg := fmt.Sprintf(`{"mcpServers":{"ex":{"command":%q,"env":{"GIVEN":"by-config"}}}}`, bin)
	in := fmt.Sprintf(`[{"type":"tool_use","id":"out","name":"mcp__ex__probe","input":{"read":%q,"connect":%q}},
		{"type":"tool_use","id":"in","name":"mcp__ex__probe","input":{"read":%q}}]`, secret, lis.Addr().String(), filepath.Join(root, "inside.txt"))
	out, _ := toolsvcCall(t, in, []string{"TOOLSVC_SECRET=hunter2"}, "--embedded", "--profile", "service", "--root", root, "--mcp-config", cfg)
	rs := results(t, out)
	report := text(rs["out"])
	if !strings.Contains(report, "read "+secret+": error:") || strings.Contains(report, "top secret") {
		t.Errorf("the server read outside the workspace:\n%s", report)
	}
	if !strings.Contains(report, "connect "+lis.Addr().String()+": error:") {
		t.Errorf("the server reached the network:\n%s", report)
	}
	if strings.Contains(report, "hunter2") || !strings.Contains(report, "env GIVEN=by-config") {
		t.Errorf("environment:\n%s", report)
	}
	if os.Geteuid() == 0 && strings.Contains(report, "uid=0\n") {
		t.Errorf("the server runs as root:\n%s", report)
	}
	if r := text(rs["in"]); !strings.Contains(r, `: ok: "inside"`) {
		t.Errorf("the server could not read its workspace:\n%s", r)
	}
}

// TestMCPAbortMidCall aborts a running MCP call over a real stream: the
// call ends with one interrupted Result, the server hears of the
// cancellation, and when the session ends no server process is left.
func TestMCPAbortMidCall(t *testing.T) {
	root, bin := mcpRoot(t)
	sock := "unix://" + filepath.Join(t.TempDir(), "toolsvc.sock")
	cmd := exec.Command(toolsvcBin, "serve", "--listen", sock, "--root", root, "--log-format", "text")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitServing(t, sock)
	conn, err := grpc.NewClient(sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := executorv1.NewExecutorServiceClient(conn).Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(m *executorv1.ExecuteRequest) {
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{
		Settings:   &executorv1.Settings{Mode: executorv1.PermissionMode_PERMISSION_MODE_BYPASS_PERMISSIONS},
		McpServers: map[string]*executorv1.McpServerConfig{"ex": {Command: bin}},
	}}})
	marker := filepath.Join(root, "cancelled")
	send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: &executorv1.ToolUse{
		Id: "toolu_slow", Name: "mcp__ex__slow", AssistantMessageId: "m",
		InputJson: fmt.Sprintf(`{"steps":1000,"delay_ms":20,"marker":%q}`, marker)}}})
	var results []*executorv1.Result
	aborted := false
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("stream: %v\nlogs: %s", err, logs.String())
		}
		if ev.GetProgress() != nil && !aborted {
			aborted = true
			send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Abort{Abort: &executorv1.Abort{Target: &executorv1.Abort_ToolUseId{ToolUseId: "toolu_slow"}}}})
		}
		if r := ev.GetResult(); r != nil {
			results = append(results, r)
			// The server hears of the cancellation while the session
			// lives (the notification goes out after the Result).
			waitFor(t, "the server to see the cancellation", func() bool {
				b, err := os.ReadFile(marker)
				return err == nil && strings.HasPrefix(string(b), "cancelled at step")
			})
			if len(processesOf(bin)) == 0 {
				t.Error("the server is gone before the session ends")
			}
			if err := stream.CloseSend(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(results) != 1 || results[0].GetOutcome() != executorv1.Outcome_OUTCOME_INTERRUPTED || !results[0].GetIsError() {
		t.Fatalf("results: %v", results)
	}
	// The session ended with the stream: its server is gone.
	waitFor(t, "no server process", func() bool { return len(processesOf(bin)) == 0 })
}

// waitFor polls cond for up to 10 seconds.
// processesOf lists the pids of processes running the program at path.
func processesOf(path string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && strings.TrimSuffix(exe, " (deleted)") == path {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func TestServeRejectsUnusableMCPConfig(t *testing.T) {
	for _, cfg := range []string{
		`{"mcpServers":{"x":{"type":"http"}}}`,
		`{"mcpServers":{"x":{"command":"srv","env":{"TOKEN":"${TOOLWIRE_TEST_UNSET_VARIABLE}"}}}}`,
		`{"servers":{}}`,
	} {
		out, err := exec.Command(toolsvcBin, "serve", "--listen", "127.0.0.1:0", "--root", t.TempDir(), "--mcp-config", cfg).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--mcp-config") {
			t.Errorf("toolsvc accepted %s: %v\n%s", cfg, err, out)
		}
	}
}
