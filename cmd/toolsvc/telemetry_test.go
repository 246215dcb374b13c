package main_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
	"github.com/toolwire/toolwire/pkg/telemetry/otlptest"
)

// TestTracesAcrossCallAndServe runs toolsvc serve and toolsvc call --addr
// as real processes exporting to an OTLP receiver in the test, and follows
// one trace from the caller's TRACEPARENT through the call command, the
// Execute stream and the run_tool span down to the sandboxed process.
func TestTracesAcrossCallAndServe(t *testing.T) {
	r := otlptest.StartGRPC(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.Endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	const traceID, callerSpan = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
	t.Setenv("TRACEPARENT", "00-"+traceID+"-"+callerSpan+"-01")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	serve := exec.Command(toolsvcBin, "serve", "--listen", addr, "--insecure", "--root", sandboxtest.Dir(t), "--log-format", "json")
	var logs bytes.Buffer
	serve.Stderr = &logs
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = serve.Process.Signal(syscall.SIGTERM)
			_ = serve.Wait()
		}
	}
	t.Cleanup(stop)
	waitServing(t, addr)

	rs := runCall(t, `{"type":"tool_use","id":"toolu_t","name":"Bash","input":{"command":"echo traced"}}`, "--insecure", "--addr", addr)
	if len(rs) != 1 || rs[0].Content != "traced" {
		t.Fatalf("results %+v", rs)
	}
	stop() // flushes toolsvc's spans and metrics

	byName := map[string]otlptest.Span{}
	for _, s := range r.Spans() {
		byName[s.Resource["service.name"]+" "+s.GetName()] = s
	}
	get := func(key string) otlptest.Span {
		t.Helper()
		s, ok := byName[key]
		if !ok {
			var keys []string
			for k := range byName {
				keys = append(keys, k)
			}
			t.Fatalf("no span %q among %q", key, keys)
		}
		if got := hex.EncodeToString(s.GetTraceId()); got != traceID {
			t.Errorf("%s: trace %s, want the caller's %s", key, got, traceID)
		}
		return s
	}
	id := func(b []byte) string { return hex.EncodeToString(b) }
	root := get("toolsvc-call toolsvc call")
	client := get("toolsvc-call toolwire.executor.v1.ExecutorService/Execute")
	server := get("toolsvc toolwire.executor.v1.ExecutorService/Execute")
	run := get("toolsvc run_tool Bash")
	proc := get("toolsvc process")
	for _, link := range []struct {
		name          string
		child, parent string
	}{
		{"toolsvc call under the caller", id(root.GetParentSpanId()), callerSpan},
		{"Execute client under toolsvc call", id(client.GetParentSpanId()), id(root.GetSpanId())},
		{"Execute server under its client", id(server.GetParentSpanId()), id(client.GetSpanId())},
		{"run_tool under the span its ToolUse carried", id(run.GetParentSpanId()), id(root.GetSpanId())},
		{"process under run_tool", id(proc.GetParentSpanId()), id(run.GetSpanId())},
	} {
		if link.child != link.parent {
			t.Errorf("%s: parent %s, want %s", link.name, link.child, link.parent)
		}
	}
	if run.Attr("toolwire.outcome") != "success" || run.Attr("gen_ai.tool.call.id") != "toolu_t" {
		t.Errorf("run_tool attributes %v", run.GetAttributes())
	}
	if !r.MetricNames()["toolwire.tool.duration"] {
		t.Errorf("metrics received: %v", r.MetricNames())
	}

	// toolsvc's log line about the call carries its trace.
	var found bool
	sc := bufio.NewScanner(&logs)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec["msg"] != "call allowed" {
			continue
		}
		found = true
		if rec["trace_id"] != traceID || rec["span_id"] != id(run.GetSpanId()) {
			t.Errorf("log line %v", rec)
		}
	}
	if !found {
		t.Errorf("no \"call allowed\" line in\n%s", logs.String())
	}
}

func TestServeUsageDocumentsTelemetry(t *testing.T) {
	out, err := exec.Command(toolsvcBin, "serve", "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("serve -h: %v\n%s", err, out)
	}
	for _, want := range []string{"-trace-content", "TOOLWIRE_TRACE_CONTENT", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_SERVICE_NAME"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("serve -h does not mention %s:\n%s", want, out)
		}
	}
}
