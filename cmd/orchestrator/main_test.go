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
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/pkg/rpcserver"

	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	orchv1 "github.com/toolwire/toolwire/gen/toolwire/orchestrator/v1"
	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/orchestrator/pgstore/pgtest"
)

var orchestratorBin, toolsvcBin string

func TestMain(m *testing.M) {
	if file := os.Getenv(fakeAPIChildEnv); file != "" {
		os.Exit(runFakeAPIChild(file))
	}
	dir, err := os.MkdirTemp("", "orchestrator-test-")
	if err != nil {
		panic(err)
	}
	// Tests run the binaries as nobody too.
	if err := os.Chmod(dir, 0o755); err != nil {
		panic(err)
	}
	orchestratorBin = filepath.Join(dir, "orchestrator")
	toolsvcBin = filepath.Join(dir, "toolsvc")
	for bin, pkg := range map[string]string{orchestratorBin: ".", toolsvcBin: "../toolsvc"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, out)
			os.Exit(1)
		}
	}
	// The store tests' throwaway PostgreSQL, if any, stops with them.
	code := pgtest.Main(m)
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// startToolsvc runs `toolsvc serve` on a free loopback port.
func startToolsvc(t testing.TB, root string) string {
	t.Helper()
	addr, _ := startToolsvcProcess(t, root)
	return addr
}

// startToolsvcProcess is startToolsvc that also returns the process.
func startToolsvcProcess(t testing.TB, root string, extra ...string) (string, *os.Process) {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(toolsvcBin, append([]string{"serve", "--listen", addr, "--insecure", "--root", root, "--log-format", "text"}, extra...)...)
	startServing(t, cmd, addr, "toolsvc", "toolwire.executor.v1.ExecutorService", &bytes.Buffer{})
	return addr, cmd.Process
}

// freeAddr returns a loopback address that nothing listened on a moment
// ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startServing starts cmd, a server at addr whose stderr goes to logs,
// stops it with SIGTERM when t ends (showing its logs, named name, if t
// failed), and waits until its gRPC health reports service serving.
func startServing(t testing.TB, cmd *exec.Cmd, addr, name, service string, logs *bytes.Buffer) {
	t.Helper()
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s logs:\n%s", name, logs.String())
		}
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rpcserver.WaitServing(ctx, conn, service); err != nil {
		t.Fatalf("%s at %s not serving: %v\n%s", name, addr, err, logs.String())
	}
}

type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the orchestrator binary with the fake API's address.
func runCLI(t *testing.T, fake *fakeapi.Server, args ...string) result {
	t.Helper()
	cmd := exec.Command(orchestratorBin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	if fake != nil {
		cmd.Env = append(cmd.Env, "ANTHROPIC_API_KEY=test-key", "ANTHROPIC_BASE_URL="+fake.URL)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if fake != nil {
		if errs := fake.Errors(); len(errs) > 0 {
			t.Fatalf("fake API errors: %v\nstderr: %s", errs, r.stderr)
		}
	}
	return r
}

type resultJSON struct {
	Type       string      `json:"type"`
	Subtype    string      `json:"subtype"`
	IsError    bool        `json:"is_error"`
	Result     string      `json:"result"`
	SessionID  string      `json:"session_id"`
	NumTurns   int         `json:"num_turns"`
	StopReason string      `json:"stop_reason"`
	Usage      model.Usage `json:"usage"`
}

func TestNoAPIKey(t *testing.T) {
	r := runCLI(t, nil, "-p", "hello", "--sessions-dir", t.TempDir())
	if r.code == 0 {
		t.Fatal("exit code 0 without an API key")
	}
	if !strings.Contains(r.stderr, "ANTHROPIC_API_KEY") || !strings.Contains(r.stderr, "ANTHROPIC_BASE_URL") {
		t.Fatalf("stderr does not say what to set: %s", r.stderr)
	}
}

// TestHeadlessWithRemoteToolsvc runs `orchestrator -p` against the fake API
// and a `toolsvc serve` on another port: a multi-turn tool conversation, then
// a second invocation that resumes it.
func TestHeadlessWithRemoteToolsvc(t *testing.T) {
	root := sandboxtest.Dir(t)
	if err := os.WriteFile(filepath.Join(root, "input.txt"), []byte("forty-two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := startToolsvc(t, root)
	out := filepath.Join(root, "answer.txt")
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(
			fakeapi.Text("Reading the input."),
			fakeapi.ToolUse("toolu_read", "Read", map[string]any{"file_path": filepath.Join(root, "input.txt")}),
			fakeapi.ToolUse("toolu_glob", "Glob", map[string]any{"pattern": "*.txt"}),
		),
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_write", "Write", map[string]any{"file_path": out, "content": "42\n"})),
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_bash", "Bash", map[string]any{"command": "cat answer.txt"})),
		fakeapi.EndTurn(fakeapi.Text("The answer is in answer.txt.")),
	)
	sessions := t.TempDir()
	r := runCLI(t, fake, "-p", "turn the input into a number", "--executor", addr, "--executor-insecure",
		"--output-format", "json", "--sessions-dir", sessions, "--permission-mode", "bypassPermissions", "--model", "claude-cli-test")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	var res resultJSON
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, r.stdout)
	}
	if res.Type != "result" || res.Subtype != "success" || res.IsError || res.Result != "The answer is in answer.txt." ||
		res.NumTurns != 4 || res.SessionID == "" || res.Usage.OutputTokens == 0 {
		t.Fatalf("result = %+v", res)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "42\n" {
		t.Fatalf("answer.txt = %q, %v", b, err)
	}
	reqs := fake.Requests()
	if len(reqs) != 4 || reqs[0].Body.Model != "claude-cli-test" || reqs[0].Header.Get("X-Api-Key") != "test-key" {
		t.Fatalf("%d requests; first model %q", len(reqs), reqs[0].Body.Model)
	}
	last := reqs[3].Body.Messages
	bash := last[len(last)-1].Content[0]
	if bash.ToolUseID != "toolu_bash" || bash.Content[0].Text != "42" || bash.IsError == nil || *bash.IsError {
		t.Fatalf("Bash result sent to the model = %+v", bash)
	}
	first := reqs[1].Body.Messages[2].Content
	if len(first) != 2 || !strings.Contains(first[0].Content[0].Text+first[1].Content[0].Text, "forty-two") {
		t.Fatalf("Read and Glob results = %+v", first)
	}

	// A second invocation resumes the session with its whole history.
	fake.Push(fakeapi.EndTurn(fakeapi.Text("Still 42.")))
	r = runCLI(t, fake, "-p", "and now?", "--resume", res.SessionID, "--executor", addr, "--executor-insecure", "--sessions-dir", sessions)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "Still 42." {
		t.Fatalf("resume: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	reqs = fake.Requests()
	if msgs := reqs[4].Body.Messages; len(msgs) != 9 || msgs[8].Text() != "and now?" || reqs[4].Body.Model != "claude-cli-test" {
		t.Fatalf("resumed request: %d messages, model %s", len(msgs), reqs[4].Body.Model)
	}
}

func TestHeadlessStreamJSON(t *testing.T) {
	root := sandboxtest.Dir(t)
	fake := fakeapi.New(t,
		fakeapi.Overloaded(),
		fakeapi.Cut(1,
			fakeapi.ToolUse("toolu_1", "Bash", map[string]any{"command": "echo hi"}),
			fakeapi.ToolUse("toolu_2", "Bash", map[string]any{"command": "echo lost"}),
		),
		fakeapi.EndTurn(fakeapi.Text("Done.")),
	)
	r := runCLI(t, fake, "-p", "say hi", "--root", root, "--output-format", "stream-json",
		"--sessions-dir", t.TempDir(), "--permission-mode", "bypassPermissions")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	var kinds []string
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var line struct {
			Type, Subtype string
			Synthetic     bool
			Message       struct {
				Content []struct{ Type, Text string }
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line is not JSON: %v: %s", err, sc.Text())
		}
		k := line.Type
		if line.Subtype != "" {
			k += "/" + line.Subtype
		}
		if line.Synthetic {
			k += "/synthetic"
			if !strings.HasPrefix(line.Message.Content[0].Text, "API Error: Connection closed mid-response") {
				t.Fatalf("synthetic message = %s", sc.Text())
			}
		}
		kinds = append(kinds, k)
	}
	want := "system/init,system/api_retry,assistant,assistant/synthetic,user,assistant,result/success"
	if got := strings.Join(kinds, ","); got != want {
		t.Fatalf("stream-json lines:\n got %s\nwant %s\n%s", got, want, r.stdout)
	}
}

func TestHeadlessMaxTurns(t *testing.T) {
	fake := fakeapi.New(t)
	fake.SetFallback(func(r *fakeapi.Request) fakeapi.Reply {
		return fakeapi.ToolTurn(fakeapi.ToolUse(fmt.Sprintf("toolu_%d", r.Index), "Glob", map[string]any{"pattern": "*"}))
	})
	r := runCLI(t, fake, "-p", "loop", "--root", sandboxtest.Dir(t), "--max-turns", "2", "--output-format", "json", "--sessions-dir", t.TempDir())
	var res resultJSON
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if r.code != 1 || res.Subtype != "error_max_turns" || !res.IsError || res.NumTurns != 2 || len(fake.Requests()) != 2 {
		t.Fatalf("exit %d, result %+v, %d requests", r.code, res, len(fake.Requests()))
	}
}

func TestHeadlessTextAndDisallowedTools(t *testing.T) {
	fake := fakeapi.New(t, fakeapi.EndTurn(fakeapi.Text("Hi there.")))
	r := runCLI(t, fake, "-p", "--disallowedTools", "Bash,Write", "hello", "--root", sandboxtest.Dir(t), "--sessions-dir", t.TempDir())
	if r.code != 0 || r.stdout != "Hi there.\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	req := fake.Requests()[0]
	if req.Body.Messages[0].Text() != "hello" {
		t.Fatalf("prompt = %q", req.Body.Messages[0].Text())
	}
	for _, tl := range req.Body.Tools {
		if tl.Name == "Bash" || tl.Name == "Write" {
			t.Fatalf("disallowed tool %s offered", tl.Name)
		}
	}
}

// startServe runs `orchestrator serve` on a free port and returns its
// address and a function that stops it with SIGTERM and returns its exit
// error.
func startServe(t *testing.T, fake *fakeapi.Server, args ...string) (string, func() error) {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(orchestratorBin, append([]string{"serve", "--listen", addr, "--insecure"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "ANTHROPIC_API_KEY=k", "ANTHROPIC_BASE_URL=" + fake.URL}
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		return cmd.Wait()
	}
	t.Cleanup(func() {
		_ = stop()
		if t.Failed() {
			t.Logf("orchestrator logs:\n%s", logs.String())
		}
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rpcserver.WaitServing(ctx, conn, "toolwire.orchestrator.v1.OrchestratorService"); err != nil {
		t.Fatalf("orchestrator at %s not serving: %v", addr, err)
	}
	return addr, stop
}

// TestServeSurvivesRestart runs a turn through `orchestrator serve`, stops
// it, starts it again on the same session directory and continues the
// conversation.
func TestServeSurvivesRestart(t *testing.T) {
	root := sandboxtest.Dir(t)
	toolsvc := startToolsvc(t, root)
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_1", "Bash", map[string]any{"command": "echo hello > hello.txt"})),
		fakeapi.EndTurn(fakeapi.Text("Wrote it.")),
		fakeapi.EndTurn(fakeapi.Text("Still here.")),
	)
	sessions := t.TempDir()
	args := []string{"--executor", toolsvc, "--executor-insecure", "--sessions-dir", sessions, "--log-format", "json"}
	addr, stop := startServe(t, fake, args...)

	turn := func(addr, id, text string) *orchv1.TurnComplete {
		t.Helper()
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stream, err := orchv1.NewOrchestratorServiceClient(conn).Converse(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stream.Send(&orchv1.ConverseRequest{Msg: &orchv1.ConverseRequest_Attach{Attach: &orchv1.Attach{SessionId: id}}})
		stream.Send(&orchv1.ConverseRequest{Msg: &orchv1.ConverseRequest_UserMessage{UserMessage: &orchv1.UserMessage{Text: text}}})
		stream.CloseSend()
		var done *orchv1.TurnComplete
		for {
			r, err := stream.Recv()
			if err == io.EOF {
				return done
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc := r.GetTurnComplete(); tc != nil {
				done = tc
			}
		}
	}

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	created, err := orchv1.NewOrchestratorServiceClient(conn).CreateSession(context.Background(), &orchv1.CreateSessionRequest{
		SessionId: "restart-me",
		Config:    &orchv1.SessionConfig{Settings: &executorv1.Settings{Mode: executorv1.PermissionMode_PERMISSION_MODE_BYPASS_PERMISSIONS}},
	})
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	if tc := turn(addr, created.GetSession().GetId(), "write hello"); tc.GetStopReason() != orchv1.StopReason_STOP_REASON_END_TURN || tc.GetText() != "Wrote it." {
		t.Fatalf("first turn = %v", tc)
	}
	if err := stop(); err != nil {
		t.Fatalf("orchestrator serve exited with %v after SIGTERM", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "hello.txt")); string(b) != "hello\n" {
		t.Fatalf("hello.txt = %q", b)
	}

	addr2, _ := startServe(t, fake, args...)
	if tc := turn(addr2, "restart-me", "are you there?"); tc.GetText() != "Still here." {
		t.Fatalf("turn after restart = %v", tc)
	}
	msgs := fake.Requests()[2].Body.Messages
	if len(msgs) != 5 || msgs[4].Text() != "are you there?" || msgs[2].Content[0].ToolUseID != "toolu_1" {
		t.Fatalf("request after restart carries %d messages: %+v", len(msgs), msgs)
	}
}

// TestServeCrashMidTurn kills `orchestrator serve` while a call runs on the
// remote executor. The restarted orchestrator gives the call an interrupted
// result, stops it on the executor (which still holds the session) and the
// conversation goes on.
func TestServeCrashMidTurn(t *testing.T) {
	root := sandboxtest.Dir(t)
	toolsvc := startToolsvc(t, root)
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_long", "Bash", map[string]any{"command": "sleep 28.6421"})),
	)
	sessions := t.TempDir()
	args := []string{"--executor", toolsvc, "--executor-insecure", "--sessions-dir", sessions, "--log-format", "json"}
	addr, _ := startServe(t, fake, args...)

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	client := orchv1.NewOrchestratorServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := client.CreateSession(ctx, &orchv1.CreateSessionRequest{SessionId: "crash", Config: &orchv1.SessionConfig{
		Settings: &executorv1.Settings{Mode: executorv1.PermissionMode_PERMISSION_MODE_BYPASS_PERMISSIONS},
	}}); err != nil {
		t.Fatal(err)
	}
	stream, err := client.Converse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(&orchv1.ConverseRequest{Msg: &orchv1.ConverseRequest_Attach{Attach: &orchv1.Attach{SessionId: "crash"}}})
	stream.Send(&orchv1.ConverseRequest{Msg: &orchv1.ConverseRequest_UserMessage{UserMessage: &orchv1.UserMessage{Text: "wait"}}})
	for {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.GetToolUse() != nil {
			break
		}
	}
	// Wait until the command runs, then crash the orchestrator.
	for deadline := time.Now().Add(20 * time.Second); len(pidsWith("28.6421")) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
	}
	conn.Close()
	killServe(t, addr)

	fake.Push(fakeapi.EndTurn(fakeapi.Text("Understood.")))
	addr2, _ := startServe(t, fake, args...)
	conn2, err := grpc.NewClient(addr2, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	stream2, err := orchv1.NewOrchestratorServiceClient(conn2).Converse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream2.Send(&orchv1.ConverseRequest{Msg: &orchv1.ConverseRequest_Attach{Attach: &orchv1.Attach{SessionId: "crash"}}})
	stream2.Send(&orchv1.ConverseRequest{Msg: &orchv1.ConverseRequest_UserMessage{UserMessage: &orchv1.UserMessage{Text: "what happened?"}}})
	stream2.CloseSend()
	for {
		_, err := stream2.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	reqs := fake.Requests()
	msgs := reqs[len(reqs)-1].Body.Messages
	if len(msgs) != 3 || msgs[1].Content[0].ID != "toolu_long" {
		t.Fatalf("request after the crash: %+v", msgs)
	}
	res := msgs[2].Content[0]
	if res.Type != "tool_result" || res.ToolUseID != "toolu_long" || res.IsError == nil || !*res.IsError ||
		msgs[2].Content[len(msgs[2].Content)-1].Text != "what happened?" {
		t.Fatalf("repaired results message = %+v", msgs[2])
	}
	// The restarted orchestrator stopped the stale call on the executor.
	for deadline := time.Now().Add(20 * time.Second); len(pidsWith("28.6421")) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the stale command still runs: %v", pidsWith("28.6421"))
		}
	}
}

// killServe kills the `orchestrator serve` listening on addr with SIGKILL.
func killServe(t *testing.T, addr string) {
	t.Helper()
	for _, pid := range pidsWith(addr) {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if !strings.HasPrefix(string(cmdline), orchestratorBin+"\x00serve") {
			continue
		}
		var p int
		fmt.Sscan(pid, &p)
		if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no orchestrator serve on %s", addr)
}

// pidsWith returns the pids of processes with arg among their arguments.
func pidsWith(arg string) []string {
	entries, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(cmdline), "\x00") {
			if a == arg {
				pids = append(pids, e.Name())
				break
			}
		}
	}
	return pids
}

// TestHeadlessInCurrentDirectory is the main job: `orchestrator -p` with no
// executor flags works on the current directory, owned by whoever runs it,
// through the in-process executor.
func TestHeadlessInCurrentDirectory(t *testing.T) {
	cwd := t.TempDir() // owned by the test's user, mode 0700
	fake := fakeapi.New(t,
		fakeapi.ToolTurn(fakeapi.ToolUse("toolu_w", "Write", map[string]any{"file_path": "hello.txt", "content": "hi\n"})),
		fakeapi.EndTurn(fakeapi.Text("Wrote it.")),
	)
	cmd := exec.Command(orchestratorBin, "-p", "write hello.txt", "--permission-mode", "acceptEdits", "--sessions-dir", t.TempDir())
	cmd.Dir = cwd
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "ANTHROPIC_API_KEY=test-key", "ANTHROPIC_BASE_URL=" + fake.URL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("orchestrator -p: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Wrote it.") {
		t.Fatalf("output: %s", out)
	}
	b, err := os.ReadFile(filepath.Join(cwd, "hello.txt"))
	if err != nil || string(b) != "hi\n" {
		t.Fatalf("hello.txt: %q %v", b, err)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Raw), "File created successfully at: hello.txt") {
		t.Fatalf("second request does not carry the Write result: %d requests", len(reqs))
	}
}
