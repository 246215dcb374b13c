package compose_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	orchv1 "github.com/toolwire/toolwire/gen/toolwire/orchestrator/v1"
	"github.com/toolwire/toolwire/internal/testkit"
	"github.com/toolwire/toolwire/pkg/rpcserver"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
	"github.com/toolwire/toolwire/test/tracing/jaegertest"
	"github.com/toolwire/toolwire/test/tracing/spancontract"
)

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m))
}

// baseImage is what scripts/base-image builds; with it the image builds
// need no network.
const baseImage = "toolwire/base:bookworm"

// deployment is one compose project of the test.
type deployment struct {
	t       *testing.T
	root    string   // repository root
	project string   // compose project name, unique to the run
	compose []string // the Compose command and its file and project flags
	env     []string // environment of every Compose command
}

// TestComposeConversationTrace brings up docker-compose.yml with a fake
// Messages API, runs the scripted conversation twice (through the
// orchestrator's published port, and with orchestrator -p in its
// container) and checks both traces in the Jaeger container.
func TestComposeConversationTrace(t *testing.T) {
	if err := dockerUsable(); err != nil {
		t.Skipf("docker is not usable, so the compose deployment cannot be tested: %v", err)
	}
	composeCmd, err := findCompose()
	if err != nil {
		t.Fatal(err)
	}
	jaegerBin := jaegertest.Binary(t)
	root, err := jaegertest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	runID := testkit.RandomHex(t, 6)
	contexts := t.TempDir()
	ports := jaegertest.FreePorts(t, 4)
	d := &deployment{
		t:       t,
		root:    root,
		project: "twcompose" + runID,
	}
	d.compose = append(composeCmd,
		"-f", filepath.Join(root, "docker-compose.yml"),
		"-f", filepath.Join(root, "test", "compose", "compose.test.yml"),
		"--project-directory", root,
		"-p", d.project)
	d.env = append(cleanEnv(),
		"TOOLWIRE_COMPOSE_CONTEXT="+contexts,
		"TOOLWIRE_BASE="+baseImage,
		"TOOLWIRE_ORCHESTRATOR_PORT="+strconv.Itoa(ports[0]),
		"TOOLWIRE_JAEGER_PORT="+strconv.Itoa(ports[1]),
		"TOOLWIRE_OTLP_PORT="+strconv.Itoa(ports[2]),
		"TOOLWIRE_METRICS_PORT="+strconv.Itoa(ports[3]),
	)
	orchestratorAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	jaeger := jaegertest.NewClient("http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])))

	step(t, "scripts/base-image", func() error {
		return runIn(root, nil, 20*time.Minute, filepath.Join(root, "scripts", "base-image"))
	})
	step(t, "scripts/compose (build contexts)", func() error {
		env := append(cleanEnv(), "TOOLWIRE_COMPOSE_CONTEXT="+contexts, "TOOLWIRE_JAEGER="+jaegerBin)
		return runIn(root, env, 10*time.Minute, "bash", filepath.Join(root, "scripts", "compose"))
	})
	step(t, "build fakemodel", func() error {
		dir := filepath.Join(contexts, "fakemodel")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		df, err := os.ReadFile(filepath.Join(root, "test", "compose", "fakemodel.Dockerfile"))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), df, 0o644); err != nil {
			return err
		}
		env := append(cleanEnv(), "CGO_ENABLED=0")
		return runIn(root, env, 5*time.Minute, "go", "build", "-trimpath", "-o", filepath.Join(dir, "fakemodel"), "./test/compose/fakemodel")
	})

	// From here on the project exists (or half exists): take it down
	// whatever happens next.
	t.Cleanup(d.down)
	step(t, "compose up -d --build", func() error {
		_, err := d.run(20*time.Minute, "up", "-d", "--build")
		return err
	})

	// Compose started the orchestrator once toolsvc was healthy; now the
	// orchestrator must become healthy too, each by the HEALTHCHECK of its
	// image: the health subcommand.
	for _, service := range []string{"toolsvc", "orchestrator"} {
		step(t, service+" healthy", func() error {
			return d.waitHealthy(2*time.Minute, service)
		})
	}
	step(t, "orchestrator serving", func() error {
		conn, err := grpc.NewClient(orchestratorAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return rpcserver.WaitServing(ctx, conn, "toolwire.orchestrator.v1.OrchestratorService")
	})

	// One conversation through the published gRPC port (orchestrator
	// serve), one with orchestrator -p in the orchestrator's container, as
	// the README shows; each in a workspace of its own under /workspace,
	// since the script writes the same file.
	grpcSession := "compose-" + runID
	var done *orchv1.TurnComplete
	step(t, "conversation over gRPC", func() error {
		var err error
		done, err = converse(orchestratorAddr, grpcSession, "grpc")
		return err
	})
	if done.GetStopReason() != orchv1.StopReason_STOP_REASON_END_TURN || done.GetText() != spancontract.FinalText {
		t.Fatalf("turn ended with %v %q, want end_turn %q", done.GetStopReason(), done.GetText(), spancontract.FinalText)
	}
	var cliSession string
	step(t, "conversation with orchestrator -p", func() error {
		var err error
		cliSession, err = d.headless("cli")
		return err
	})
	d.checkConversations("grpc", "cli")

	for _, session := range []string{grpcSession, cliSession} {
		t.Run("trace of "+session, func(t *testing.T) {
			var tr *jaegertest.Trace
			step(t, "trace complete in Jaeger", func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				var err error
				tr, err = jaeger.WaitTrace(ctx, spancontract.Search(session), spancontract.Complete)
				if err != nil {
					dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer dcancel()
					return fmt.Errorf("%w\n%s\nWhat Jaeger holds:\n%s", err, tr, jaeger.Describe(dctx, 20))
				}
				return nil
			})
			t.Logf("%s", tr)
			if err := spancontract.Check(tr, session); err != nil {
				t.Error(err)
			}
		})
	}
}

// waitHealthy waits until Docker reports service's container healthy,
// after checking that its health check is the service's own health
// subcommand (the image's HEALTHCHECK, which docker-compose.yml keeps).
func (d *deployment) waitHealthy(limit time.Duration, service string) error {
	id, err := d.run(time.Minute, "ps", "-q", service)
	if err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("no container of %s", service)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	test, err := docker(ctx, "inspect", "-f", "{{json .Config.Healthcheck.Test}}", id)
	if err != nil {
		return err
	}
	var argv []string
	if err := json.Unmarshal([]byte(test), &argv); err != nil {
		return fmt.Errorf("health check of %s: %q: %v", service, test, err)
	}
	if len(argv) < 3 || argv[0] != "CMD" || path.Base(argv[1]) != service || argv[2] != "health" {
		return fmt.Errorf("the health check of %s is %q, want [CMD %s health ...]", service, argv, service)
	}
	for {
		state, err := docker(ctx, "inspect", "-f", "{{.State.Health.Status}}", id)
		if err != nil {
			return err
		}
		if state == "healthy" {
			return nil
		}
		select {
		case <-ctx.Done():
			log, _ := docker(context.Background(), "inspect", "-f", "{{json .State.Health.Log}}", id)
			return fmt.Errorf("%s is %s after %v; its last checks: %s", service, state, limit, log)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// headless runs the conversation with `orchestrator -p` inside the
// orchestrator's container, which gives it the container's environment
// (model API, OTEL_*), in workspace (relative to toolsvc's root), and
// returns its session id.
func (d *deployment) headless(workspace string) (string, error) {
	out, err := d.run(3*time.Minute, "exec", "-T", "orchestrator",
		"orchestrator", "-p", spancontract.Prompt,
		"--executor", "toolsvc:7070", "--executor-insecure",
		"--workspace", workspace,
		"--model", spancontract.Model,
		"--permission-mode", "bypassPermissions",
		"--output-format", "json",
		"--sessions-dir", "/var/lib/toolwire/sessions")
	if err != nil {
		return "", err
	}
	var res struct {
		Subtype   string   `json:"subtype"`
		Result    string   `json:"result"`
		SessionID string   `json:"session_id"`
		Errors    []string `json:"errors"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		return "", fmt.Errorf("orchestrator -p printed %q: %w", out, err)
	}
	// A turn can recover from an error (a stream cut keeps the calls that
	// arrived whole) and still succeed, but then the trace is not the
	// script's: say so rather than let the trace check guess.
	if res.Subtype != "success" || res.Result != spancontract.FinalText || res.SessionID == "" || len(res.Errors) > 0 {
		return "", fmt.Errorf("orchestrator -p result: %s", out)
	}
	return res.SessionID, nil
}

// converse creates a session that may use every tool, working in workspace
// (relative to toolsvc's root), sends the scripted prompt on a Converse
// stream and returns how the turn ended.
func converse(addr, sessionID, workspace string) (*orchv1.TurnComplete, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	client := orchv1.NewOrchestratorServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := client.CreateSession(ctx, &orchv1.CreateSessionRequest{
		SessionId: sessionID,
		Config: &orchv1.SessionConfig{
			Model:     spancontract.Model,
			Workspace: workspace,
			Settings:  &executorv1.Settings{Mode: executorv1.PermissionMode_PERMISSION_MODE_BYPASS_PERMISSIONS},
		},
	}); err != nil {
		return nil, fmt.Errorf("CreateSession: %w", err)
	}
	stream, err := client.Converse(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range []*orchv1.ConverseRequest{
		{Msg: &orchv1.ConverseRequest_Attach{Attach: &orchv1.Attach{SessionId: sessionID}}},
		{Msg: &orchv1.ConverseRequest_UserMessage{UserMessage: &orchv1.UserMessage{Text: spancontract.Prompt}}},
	} {
		if err := stream.Send(m); err != nil {
			return nil, fmt.Errorf("Converse send: %w", err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		return nil, err
	}
	var done *orchv1.TurnComplete
	var errs []string
	for {
		r, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("Converse: %w", err)
		}
		if e := r.GetError(); e != nil {
			errs = append(errs, e.GetKind()+": "+e.GetMessage())
		}
		if tc := r.GetTurnComplete(); tc != nil {
			done = tc
		}
	}
	if done == nil {
		return nil, fmt.Errorf("the stream ended without TurnComplete; errors: %v", errs)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("the turn ended, after errors the script does not make: %v", errs)
	}
	return done, nil
}

// checkConversations checks what the tools did in the toolsvc container and
// what the fake API was sent, after one run of the conversation in each of
// the workspaces.
func (d *deployment) checkConversations(workspaces ...string) {
	t := d.t
	t.Helper()
	for _, w := range workspaces {
		p := "/workspace/" + w + "/notes.txt"
		notes, err := d.run(time.Minute, "exec", "-T", "toolsvc", "cat", p)
		if err != nil || notes != strings.TrimSpace(spancontract.NotesContent) {
			t.Fatalf("%s in the toolsvc container = %q, %v", p, notes, err)
		}
	}
	n := len(workspaces)
	logs, err := d.run(time.Minute, "logs", "--no-color", "fakemodel")
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]bool{}
	requests := 0
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, "{")
		if i < 0 {
			continue
		}
		var l struct {
			Request     *int            `json:"request"`
			Model       string          `json:"model"`
			ToolResults map[string]bool `json:"tool_results"`
			Scripted    bool            `json:"scripted"`
		}
		if json.Unmarshal([]byte(line[i:]), &l) != nil || l.Request == nil {
			continue
		}
		requests++
		if !l.Scripted || l.Model != spancontract.Model {
			t.Errorf("fake API request %d: scripted %v, model %q", *l.Request, l.Scripted, l.Model)
		}
		for id, isErr := range l.ToolResults {
			results[id] = isErr
		}
	}
	if requests != n*len(spancontract.Requests) {
		t.Fatalf("the fake API logged %d requests, want %d:\n%s", requests, n*len(spancontract.Requests), logs)
	}
	for _, c := range spancontract.Calls() {
		if isErr, ok := results[c.ID]; !ok || isErr != c.IsError {
			t.Fatalf("tool result of %s (%s): sent %v, is_error %v; want is_error %v", c.ID, c.Name, ok, isErr, c.IsError)
		}
	}
}

// down takes the project down and checks that nothing of it remains;
// whatever does is removed by force and reported.
func (d *deployment) down() {
	t := d.t
	if t.Failed() {
		if logs, err := d.run(time.Minute, "logs", "--no-color", "--tail", "200"); err == nil {
			t.Logf("compose logs:\n%s", logs)
		}
	}
	start := time.Now()
	if _, err := d.run(5*time.Minute, "down", "-v", "--remove-orphans", "--rmi", "local", "-t", "10"); err != nil {
		t.Errorf("compose down: %v", err)
	}
	t.Logf("compose down: %v", time.Since(start).Round(100*time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	label := "label=com.docker.compose.project=" + d.project
	for _, kind := range []struct {
		list, remove []string
	}{
		{[]string{"ps", "-aq", "--filter", label}, []string{"rm", "-f", "-v"}},
		{[]string{"network", "ls", "-q", "--filter", label}, []string{"network", "rm"}},
		{[]string{"volume", "ls", "-q", "--filter", label}, []string{"volume", "rm", "-f"}},
		// Compose names the images it builds after the project.
		{[]string{"image", "ls", "-q", "--filter", "reference=" + d.project + "*"}, []string{"image", "rm", "-f"}},
	} {
		out, err := docker(ctx, kind.list...)
		if err != nil {
			t.Error(err)
			continue
		}
		if out == "" {
			continue
		}
		t.Errorf("left behind after compose down: docker %s shows %s", strings.Join(kind.list, " "), strings.Join(strings.Fields(out), " "))
		if _, err := docker(ctx, append(kind.remove, strings.Fields(out)...)...); err != nil {
			t.Errorf("removing it: %v", err)
		}
	}
}

// run runs a Compose command of the project and returns its trimmed
// standard output.
func (d *deployment) run(limit time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	argv := append(append([]string(nil), d.compose...), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = d.root
	cmd.Env = d.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w after %v", ctx.Err(), limit)
		}
		return stdout.String(), fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, testkit.Tail(stderr.String()+stdout.String(), 6000))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// findCompose returns the Compose command: the docker plugin (v2) when it
// is installed, otherwise docker-compose (v1).
func findCompose() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := docker(ctx, "compose", "version"); err == nil {
		return []string{"docker", "compose"}, nil
	}
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}, nil
	}
	return nil, errors.New("docker is usable but Docker Compose is not installed: install the compose plugin or Debian's docker-compose")
}

func dockerUsable() error {
	if _, err := exec.LookPath("docker"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := docker(ctx, "version", "--format", "{{.Server.Version}}")
	return err
}

// docker runs the docker CLI and returns its trimmed standard output; the
// error carries standard error.
func docker(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return strings.TrimSpace(stdout.String()), fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// runIn runs a command in dir with env (nil: the test's) and returns an
// error that carries its output.
func runIn(dir string, env []string, limit time.Duration, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, testkit.Tail(string(out), 6000))
	}
	return nil
}

// cleanEnv is the test's environment without the variables that would
// change what Compose or the deployment does behind the test's back.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "ANTHROPIC_"), strings.HasPrefix(name, "OTEL_"),
			strings.HasPrefix(name, "TOOLWIRE_"), strings.HasPrefix(name, "COMPOSE_"):
			continue
		}
		out = append(out, kv)
	}
	return out
}

// step runs one stage of the test, logs how long it took and fails the
// test if it failed.
func step(t *testing.T, what string, fn func() error) {
	t.Helper()
	start := time.Now()
	err := fn()
	t.Logf("%-34s %v", what, time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
