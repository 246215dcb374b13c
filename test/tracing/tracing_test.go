package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolwire/toolwire/internal/testkit"
	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/rpcserver"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
	"github.com/toolwire/toolwire/test/tracing/jaegertest"
	"github.com/toolwire/toolwire/test/tracing/spancontract"
)

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m))
}

// traceWait bounds the wait for a complete trace. Spans are exported in
// batches (every 200ms here) and by orchestrator -p as it exits, so a
// complete trace normally arrives within a second or two.
const traceWait = 90 * time.Second

// TestConversationTrace runs one conversation through orchestrator -p and a
// remote toolsvc, both exporting to a Jaeger of the test's own, and checks
// that Jaeger holds the whole turn as one trace that meets the span
// contract.
func TestConversationTrace(t *testing.T) {
	jaeger := jaegertest.Start(t)
	bin := buildBinaries(t)
	runID := testkit.RandomHex(t, 6)
	// A resource attribute from the standard variable: every span must
	// carry it.
	resourceAttrs := "toolwire.test.run=" + runID

	root := sandboxtest.Dir(t)
	// toolsvc exports over OTLP/HTTP and the orchestrator over OTLP/gRPC,
	// so that one run covers both exporters and both of Jaeger's receivers.
	toolsvc := startToolsvc(t, bin.toolsvc, root, []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + jaeger.HTTPEndpoint(),
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_SERVICE_NAME=" + spancontract.Toolsvc,
		"OTEL_RESOURCE_ATTRIBUTES=" + resourceAttrs,
		"OTEL_TRACES_SAMPLER=parentbased_always_on",
		// Export toolsvc's spans within 200ms instead of the SDK's 5s,
		// and its metrics every half second instead of every minute, so
		// that both arrive soon after the turn.
		"OTEL_BSP_SCHEDULE_DELAY=200",
		"OTEL_METRIC_EXPORT_INTERVAL=500",
	})

	fake := fakeapi.New(t, spancontract.Script()...)
	cmd := exec.Command(bin.orchestrator, "-p", spancontract.Prompt,
		"--executor", toolsvc, "--executor-insecure",
		"--model", spancontract.Model,
		"--permission-mode", "bypassPermissions",
		"--output-format", "json",
		"--sessions-dir", t.TempDir(),
		"--log-format", "json")
	// No OTEL_SERVICE_NAME: the orchestrator names itself.
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"ANTHROPIC_API_KEY=test-key",
		"ANTHROPIC_BASE_URL=" + fake.URL,
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + jaeger.GRPCEndpoint(),
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_RESOURCE_ATTRIBUTES=" + resourceAttrs,
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := runBounded(cmd, 2*time.Minute); err != nil {
		t.Fatalf("orchestrator -p: %v\nstdout: %s\nstderr: %s", err, stdout.String(), testkit.Tail(stderr.String(), 4000))
	}
	var res struct {
		Subtype   string `json:"subtype"`
		IsError   bool   `json:"is_error"`
		Result    string `json:"result"`
		SessionID string `json:"session_id"`
		NumTurns  int    `json:"num_turns"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not one JSON result: %v\n%s", err, stdout.String())
	}
	if res.Subtype != "success" || res.IsError || res.Result != spancontract.FinalText || res.SessionID == "" ||
		res.NumTurns != len(spancontract.Requests) {
		t.Fatalf("result = %+v\nstderr: %s", res, testkit.Tail(stderr.String(), 4000))
	}
	checkConversation(t, fake, root)

	ctx, cancel := context.WithTimeout(context.Background(), traceWait)
	defer cancel()
	tr, err := jaeger.Query.WaitTrace(ctx, spancontract.Search(res.SessionID), spancontract.Complete)
	if err != nil {
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		t.Fatalf("%v\n%s\nWhat Jaeger holds:\n%s", err, tr, jaeger.Query.Describe(dctx, 20))
	}
	t.Logf("%s", tr)
	if err := spancontract.Check(tr, res.SessionID); err != nil {
		t.Error(err)
	}
	for _, s := range tr.Spans {
		if got := s.Resource["toolwire.test.run"]; got != runID {
			t.Errorf("%s: resource toolwire.test.run = %v, want %s (OTEL_RESOURCE_ATTRIBUTES)", s, got, runID)
		}
	}

	// otelgrpc traces the Execute stream on both of its ends.
	for _, service := range []string{spancontract.Orchestrator, spancontract.Toolsvc} {
		s := jaegertest.Search{Service: service, Operation: "toolwire.executor.v1.ExecutorService/Execute"}
		if _, err := waitFound(ctx, jaeger.Query, s); err != nil {
			t.Errorf("no span of the Execute RPC from %s: %v", service, err)
		}
	}

	// The metrics went to the same endpoint; Jaeger shows the latest
	// values on its Prometheus endpoint, labelled with the service as job.
	page, missing := waitMetrics(ctx, jaeger.MetricsURL, wantMetrics)
	if len(missing) > 0 {
		t.Errorf("metrics not received: %v", missing)
	}
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "# TYPE gen_ai_") || strings.HasPrefix(line, "# TYPE toolwire_") {
			t.Logf("metric %s", strings.TrimPrefix(line, "# TYPE "))
		}
	}
}

// wantMetrics are the metrics docs/observability.md lists that the
// conversation must produce, by the name Prometheus gives them (dots become
// underscores; a unit suffix and _bucket, _sum, _count or _total may
// follow), and the service that records them. toolwire.tool.aborts is not
// among them: the conversation aborts nothing.
var wantMetrics = map[string]string{
	"toolwire_tool_duration":           spancontract.Toolsvc,
	"toolwire_tool_queue_wait":         spancontract.Toolsvc,
	"toolwire_tool_in_flight":          spancontract.Toolsvc,
	"toolwire_tool_output_bytes":       spancontract.Toolsvc,
	"toolwire_permission_decisions":    spancontract.Toolsvc,
	"gen_ai_client_operation_duration": spancontract.Orchestrator,
	"gen_ai_client_token_usage":        spancontract.Orchestrator,
}

// waitMetrics polls the Prometheus endpoint until it shows every metric of
// want for its service, or ctx ends. It returns the last page it read and
// the metrics that page lacks.
func waitMetrics(ctx context.Context, url string, want map[string]string) (string, []string) {
	for {
		page, err := fetch(ctx, url)
		var missing []string
		for name, job := range want {
			if err != nil || !hasSeries(page, name, job) {
				missing = append(missing, name+"{job="+job+"}")
			}
		}
		if len(missing) == 0 {
			return page, nil
		}
		select {
		case <-ctx.Done():
			slices.Sort(missing)
			return page, missing
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// hasSeries reports whether a Prometheus text page has a sample of a metric
// whose name starts with prefix, labelled job="job".
func hasSeries(page, prefix, job string) bool {
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, prefix) && strings.Contains(line, `job="`+job+`"`) {
			return true
		}
	}
	return false
}

// fetch GETs url without keep-alive (no idle connection outlives the test)
// and returns the body.
func fetch(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// checkConversation checks that the conversation really happened as
// scripted: the requests the fake API received and the files the tools
// wrote. A trace is only worth checking for a conversation that worked.
func checkConversation(t *testing.T, fake *fakeapi.Server, root string) {
	t.Helper()
	if errs := fake.Errors(); len(errs) > 0 {
		t.Fatalf("fake API: %v", errs)
	}
	reqs := fake.Requests()
	if len(reqs) != len(spancontract.Requests) {
		t.Fatalf("%d model requests, want %d", len(reqs), len(spancontract.Requests))
	}
	if b, err := os.ReadFile(filepath.Join(root, "notes.txt")); err != nil || string(b) != spancontract.NotesContent {
		t.Fatalf("notes.txt = %q, %v", b, err)
	}
	results := map[string]bool{} // tool_use_id -> is_error
	for _, r := range reqs {
		for _, m := range r.Body.Messages {
			for _, b := range m.Content {
				if b.Type == "tool_result" {
					results[b.ToolUseID] = b.IsError != nil && *b.IsError
				}
			}
		}
	}
	for _, c := range spancontract.Calls() {
		isErr, ok := results[c.ID]
		if !ok || isErr != c.IsError {
			t.Fatalf("tool result of %s (%s): sent %v, is_error %v; want is_error %v", c.ID, c.Name, ok, isErr, c.IsError)
		}
	}
}

// waitFound polls until a trace matches s.
func waitFound(ctx context.Context, c *jaegertest.Client, s jaegertest.Search) ([]string, error) {
	for {
		ids, err := c.FindTraceIDs(ctx, s)
		if err == nil {
			return ids, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// binaries are the programs under test, built for this test.
type binaries struct {
	toolsvc, orchestrator string
}

// buildBinaries builds toolsvc and orchestrator into a temporary directory.
func buildBinaries(t *testing.T) binaries {
	t.Helper()
	root, err := jaegertest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b := binaries{toolsvc: filepath.Join(dir, "toolsvc"), orchestrator: filepath.Join(dir, "orchestrator")}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, p := range [][2]string{{b.toolsvc, "./cmd/toolsvc"}, {b.orchestrator, "./cmd/orchestrator"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command("go", "build", "-o", p[0], p[1])
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("go build %s: %v\n%s", p[1], err, out)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return b
}

// startToolsvc runs `toolsvc serve` on a free loopback port with the given
// extra environment, waits until it serves, and stops it (SIGTERM, which
// also flushes its telemetry) when the test ends.
func startToolsvc(t *testing.T, bin, root string, env []string) string {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(jaegertest.FreePorts(t, 1)[0]))
	cmd := exec.Command(bin, "serve", "--listen", addr, "--insecure", "--root", root, "--log-format", "json")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	logs := &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if err := stopProcess(cmd.Process, done, 30*time.Second); err != nil {
			t.Errorf("toolsvc: %v", err)
		}
		if t.Failed() {
			t.Logf("toolsvc log:\n%s", testkit.Tail(logs.String(), 8000))
		}
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rpcserver.WaitServing(ctx, conn, "toolwire.executor.v1.ExecutorService"); err != nil {
		t.Fatalf("toolsvc at %s not serving: %v\nlog:\n%s", addr, err, testkit.Tail(logs.String(), 4000))
	}
	return addr
}

// stopProcess sends SIGTERM and waits for done; after grace it kills the
// process and reports that it had to.
func stopProcess(p *os.Process, done <-chan error, grace time.Duration) error {
	if err := p.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(grace):
	}
	_ = p.Kill()
	<-done
	return fmt.Errorf("pid %d ignored SIGTERM for %v and was killed", p.Pid, grace)
}

// runBounded runs cmd and kills it if it has not finished within limit: a
// hang is a failure of its own, not a reason to hang the test binary.
func runBounded(cmd *exec.Cmd, limit time.Duration) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("still running after %v: killed", limit)
	}
}
