package execgrpc_test

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/internal/testkit"
	"github.com/toolwire/toolwire/pkg/execsvc"
	"github.com/toolwire/toolwire/pkg/executor"
	"github.com/toolwire/toolwire/pkg/permission"
	"github.com/toolwire/toolwire/pkg/settings"
	"github.com/toolwire/toolwire/pkg/telemetry"
)

// These tests run real calls through the real Execute stream with an SDK
// tracer provider (in-memory exporter) and meter provider (manual reader)
// installed as the global ones, and check the spans, metrics and log lines
// the executor produces.

// captured is what the global providers recorded during a test.
type captured struct {
	t      *testing.T
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
}

// captureTelemetry installs the recording providers and the W3C
// propagator; build the harness after it (the executor and the gRPC stats
// handler take the providers when they are built).
func captureTelemetry(t *testing.T) *captured {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t.Cleanup(func() {
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	return &captured{t: t, spans: exp, reader: reader}
}

// runTool returns the run_tool span of the call id (the first one when the
// id was sent twice).
func (c *captured) runTool(id string) tracetest.SpanStub {
	c.t.Helper()
	for _, s := range c.spans.GetSpans() {
		if strings.HasPrefix(s.Name, "run_tool ") && attrs(s)["gen_ai.tool.call.id"] == id {
			return s
		}
	}
	c.t.Fatalf("no run_tool span for %s among %v", id, names(c.spans.GetSpans()))
	return tracetest.SpanStub{}
}

// children returns the spans whose parent is s, by name.
func (c *captured) children(s tracetest.SpanStub) map[string]tracetest.SpanStub {
	out := map[string]tracetest.SpanStub{}
	for _, x := range c.spans.GetSpans() {
		if x.Parent.SpanID() == s.SpanContext.SpanID() && x.Parent.TraceID() == s.SpanContext.TraceID() {
			out[x.Name] = x
		}
	}
	return out
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// attrs returns a span's attributes as strings.
func attrs(s tracetest.SpanStub) map[string]string {
	return attrStrings(s.Attributes)
}

func attrStrings(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// wantAttrs fails unless s has every attribute of want with that value.
func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[string]string) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %s: %s = %q, want %q (all: %v)", s.Name, k, got[k], v, got)
		}
	}
}

// parentContext is a made-up caller's span: what an orchestrator's
// execute_tool span would inject.
func parentContext(t *testing.T) trace.SpanContext {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled,
		TraceState: mustTraceState(t, "vendor=value")})
}

func mustTraceState(t *testing.T, s string) trace.TraceState {
	t.Helper()
	ts, err := trace.ParseTraceState(s)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// useTraced sends a tool_use that carries the trace context of sc.
func (s *stream) useTraced(sc trace.SpanContext, id, msg, name, input string) {
	s.t.Helper()
	u := &executorv1.ToolUse{Id: id, Name: name, InputJson: input, AssistantMessageId: msg}
	telemetry.InjectToolUse(trace.ContextWithSpanContext(context.Background(), sc), u)
	if u.GetTraceparent() == "" {
		s.t.Fatal("nothing injected")
	}
	s.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: u}})
}

// records returns the JSON log records written to b so far.
func records(t *testing.T, b *testkit.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

func TestTraceRunToolIsAChildOfTheToolUseContext(t *testing.T) {
	c := captureTelemetry(t)
	var logs testkit.Buffer
	log, err := telemetry.NewLogger(&logs, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	h, _ := permHarness(t, execsvc.Config{Logger: log, Operator: settings.Settings{Permissions: settings.Permissions{
		DefaultMode: permission.ModeDefault, Allow: []string{"Bash(echo:*)"}}}})
	s := h.openWith(settings.Settings{})
	parent := parentContext(t)
	s.useTraced(parent, "b1", "m1", "Bash", bashInput("echo traced"))
	if r := s.results(1)[0]; r.GetIsError() {
		t.Fatalf("call failed: %q", text(r))
	}

	run := c.runTool("b1")
	if run.Name != "run_tool Bash" || run.SpanKind != trace.SpanKindInternal {
		t.Errorf("span %q of kind %v", run.Name, run.SpanKind)
	}
	if run.Parent.TraceID() != parent.TraceID() || run.Parent.SpanID() != parent.SpanID() || !run.Parent.IsRemote() {
		t.Errorf("parent %v/%v (remote %v), want %v/%v", run.Parent.TraceID(), run.Parent.SpanID(), run.Parent.IsRemote(),
			parent.TraceID(), parent.SpanID())
	}
	if run.SpanContext.TraceID() != parent.TraceID() {
		t.Errorf("trace id %v, want the caller's %v", run.SpanContext.TraceID(), parent.TraceID())
	}
	if got := run.SpanContext.TraceState().Get("vendor"); got != "value" {
		t.Errorf("tracestate vendor=%q, want the caller's", got)
	}
	// The Execute stream's server span is linked.
	if len(run.Links) != 1 || !run.Links[0].SpanContext.IsValid() {
		t.Errorf("links %v", run.Links)
	}
	wantAttrs(t, run, map[string]string{
		"gen_ai.tool.name": "Bash", "gen_ai.tool.call.id": "b1",
		"toolwire.session.id": s.hello.GetSessionId(), "toolwire.outcome": "success",
	})
	for _, k := range []string{"error.type", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "toolwire.duplicate"} {
		if v, ok := attrs(run)[k]; ok {
			t.Errorf("run_tool has %s=%q", k, v)
		}
	}
	if run.Status.Code == codes.Error {
		t.Errorf("status %v", run.Status)
	}

	kids := c.children(run)
	for _, name := range []string{"queue_wait", "validate", "permission", "process"} {
		k, ok := kids[name]
		if !ok {
			t.Fatalf("no %s span under run_tool; children %v", name, kids)
		}
		if k.StartTime.Before(run.StartTime) || k.EndTime.After(run.EndTime) {
			t.Errorf("%s [%v, %v] lies outside run_tool [%v, %v]", name, k.StartTime, k.EndTime, run.StartTime, run.EndTime)
		}
	}
	if !kids["queue_wait"].StartTime.Equal(run.StartTime) {
		t.Errorf("queue_wait starts at %v, run_tool (the arrival) at %v", kids["queue_wait"].StartTime, run.StartTime)
	}
	wantAttrs(t, kids["permission"], map[string]string{
		"toolwire.permission.behavior":   "allow",
		"toolwire.permission.rule":       "Bash(echo:*)",
		"toolwire.permission.decided_by": "operator:Bash(echo:*)",
	})
	wantAttrs(t, kids["process"], map[string]string{"process.exit.code": "0"})
	if pid := attrs(kids["process"])["process.pid"]; pid == "" || pid == "0" {
		t.Errorf("process.pid %q", pid)
	}
	if _, bad := attrs(kids["validate"])["error.type"]; bad {
		t.Errorf("validate failed: %v", attrs(kids["validate"]))
	}

	// The executor's per-call log line carries the call's trace and span.
	var found bool
	for _, rec := range records(t, &logs) {
		if rec["msg"] == "call allowed" && rec["tool_use_id"] == "b1" {
			found = true
			if rec["trace_id"] != parent.TraceID().String() || rec["span_id"] != run.SpanContext.SpanID().String() {
				t.Errorf("log line %v: want trace_id %v span_id %v", rec, parent.TraceID(), run.SpanContext.SpanID())
			}
		}
	}
	if !found {
		t.Errorf("no \"call allowed\" line in %v", records(t, &logs))
	}
}

// waitSpan returns the first span named name, waiting for it to end (a
// server span ends just after its stream).
func (c *captured) waitSpan(name string) tracetest.SpanStub {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, s := range c.spans.GetSpans() {
			if s.Name == name {
				return s
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no span %q among %v", name, names(c.spans.GetSpans()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// endStream half-closes s and reads it to its end.
func (s *stream) endStream() {
	s.t.Helper()
	if err := s.s.CloseSend(); err != nil {
		s.t.Fatal(err)
	}
	for range s.events {
	}
	if err := <-s.errc; err != io.EOF {
		s.t.Fatalf("stream ended with %v", err)
	}
}

func TestTraceWithoutToolUseContextTheStreamSpanIsTheParent(t *testing.T) {
	c := captureTelemetry(t)
	h := newHarness(t, executor.Config{})
	s := h.open(nil)
	s.use("a", "m1", `{"output":"x"}`)
	s.results(1)
	s.endStream()
	server := c.waitSpan("toolwire.executor.v1.ExecutorService/Execute")
	run := c.runTool("a")
	if server.SpanKind != trace.SpanKindServer {
		t.Errorf("stream span kind %v", server.SpanKind)
	}
	if run.Parent.SpanID() != server.SpanContext.SpanID() || run.SpanContext.TraceID() != server.SpanContext.TraceID() {
		t.Errorf("run_tool parent %v, want the stream span %v", run.Parent.SpanID(), server.SpanContext.SpanID())
	}
	if len(run.Links) != 0 {
		t.Errorf("links %v", run.Links)
	}
	wantAttrs(t, run, map[string]string{"toolwire.outcome": "success"})
	if _, ok := attrs(run)["gen_ai.tool.call.arguments"]; ok {
		t.Error("content recorded without the opt-in")
	}
}

func TestTraceValidationFailures(t *testing.T) {
	c := captureTelemetry(t)
	h := newHarness(t, executor.Config{})
	s := h.open(&executorv1.SessionOptions{ResultOrder: executorv1.ResultOrder_RESULT_ORDER_COMPLETION})
	s.use("bad", "m1", `{"no_such_field":1}`)
	s.useTool("unknown", "m1", "NoSuchTool", `{}`)
	s.results(2)
	for id, outcome := range map[string]string{"bad": "invalid_input", "unknown": "unknown_tool"} {
		run := c.runTool(id)
		wantAttrs(t, run, map[string]string{"toolwire.outcome": outcome, "error.type": outcome})
		if run.Status.Code != codes.Error || run.Status.Description == "" {
			t.Errorf("%s: status %+v", id, run.Status)
		}
		v, ok := c.children(run)["validate"]
		if !ok {
			t.Fatalf("%s: no validate span", id)
		}
		wantAttrs(t, v, map[string]string{"error.type": "validation_error"})
		if v.Status.Code != codes.Error {
			t.Errorf("%s: validate status %+v", id, v.Status)
		}
		if _, ran := c.children(run)["permission"]; ran {
			t.Errorf("%s: an invalid call reached the permission step", id)
		}
	}
}

func TestTraceToolErrorAndDuplicate(t *testing.T) {
	c := captureTelemetry(t)
	h := newHarness(t, executor.Config{})
	s := h.open(nil)
	s.use("f", "m1", `{"fail":true}`)
	first := s.results(1)[0]
	s.use("f", "m1", `{"fail":true}`)
	if again := s.results(1)[0]; again.GetOutcome() != first.GetOutcome() {
		t.Fatalf("replayed outcome %v, first %v", again.GetOutcome(), first.GetOutcome())
	}
	var runs []tracetest.SpanStub
	for _, sp := range c.spans.GetSpans() {
		if sp.Name == "run_tool Bash" && attrs(sp)["gen_ai.tool.call.id"] == "f" {
			runs = append(runs, sp)
		}
	}
	if len(runs) != 2 {
		t.Fatalf("%d run_tool spans for f", len(runs))
	}
	for i, run := range runs {
		wantAttrs(t, run, map[string]string{"toolwire.outcome": "tool_error", "error.type": "tool_error"})
		if run.Status.Code != codes.Error {
			t.Errorf("run %d: status %+v", i, run.Status)
		}
	}
	if _, dup := attrs(runs[0])["toolwire.duplicate"]; dup {
		t.Error("the first call is marked duplicate")
	}
	wantAttrs(t, runs[1], map[string]string{"toolwire.duplicate": "true"})
	if len(c.children(runs[1])) != 0 {
		t.Errorf("the duplicate ran steps: %v", c.children(runs[1]))
	}
}

func TestTraceContentIsRecordedOnlyWhenAskedFor(t *testing.T) {
	for _, on := range []bool{false, true} {
		c := captureTelemetry(t)
		h := newHarness(t, executor.Config{TraceContent: on})
		s := h.open(nil)
		in := `{"output":"` + strings.Repeat("x", 20<<10) + `"}`
		s.use("big", "m1", in)
		s.use("small", "m1", `{"output":"hello"}`)
		s.results(2)
		big, small := attrs(c.runTool("big")), attrs(c.runTool("small"))
		if !on {
			for _, k := range []string{"gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} {
				if _, ok := small[k]; ok {
					t.Errorf("%s recorded without the opt-in", k)
				}
			}
			continue
		}
		if small["gen_ai.tool.call.arguments"] != `{"output":"hello"}` || small["gen_ai.tool.call.result"] != "ok small hello" {
			t.Errorf("content attributes %q, %q", small["gen_ai.tool.call.arguments"], small["gen_ai.tool.call.result"])
		}
		// Large content is cut to 8 KiB and says so.
		for _, k := range []string{"gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} {
			if v := big[k]; len(v) < 8<<10 || len(v) > 8<<10+64 || !strings.Contains(v, "more bytes]") {
				t.Errorf("%s of a 20 KiB call: %d bytes, ends %q", k, len(v), v[max(0, len(v)-40):])
			}
		}
	}
}

func TestTraceContentFromTheEnvironment(t *testing.T) {
	t.Setenv(executor.TraceContentEnv, "true")
	c := captureTelemetry(t)
	h := newHarness(t, executor.Config{})
	s := h.open(nil)
	s.use("a", "m1", `{"output":"hi"}`)
	s.results(1)
	if got := attrs(c.runTool("a"))["gen_ai.tool.call.arguments"]; got != `{"output":"hi"}` {
		t.Fatalf("arguments %q", got)
	}
}

func TestTraceHooksAskingAndTimeouts(t *testing.T) {
	c := captureTelemetry(t)
	h, _ := permHarness(t, execsvc.Config{})
	const hookCmd = `cat >/dev/null; exit 0 # secret-hook-marker`
	s := h.openWith(settings.Settings{
		Permissions: settings.Permissions{DefaultMode: permission.ModeDefault, Ask: []string{"Bash(touch:*)"}, Allow: []string{"Bash(sleep:*)"}},
		Hooks: map[settings.Event][]settings.HookMatcher{settings.PreToolUse: {{
			Matcher: "Bash", Hooks: []settings.HookCommand{{Command: hookCmd}},
		}}},
	})

	// An ask rule: the client is asked and allows.
	s.useTool("ask", "m1", "Bash", bashInput("touch asked.txt"))
	q := s.awaitRequest()
	s.decide(q.GetToolUseId(), allowOnce, "")
	wantResult(t, s.results(1)[0], outcomeOK, false, noOutput, "client")
	run := c.runTool("ask")
	kids := c.children(run)
	wantAttrs(t, kids["permission"], map[string]string{
		"toolwire.permission.behavior":   "ask",
		"toolwire.permission.rule":       "Bash(touch:*)",
		"toolwire.permission.decided_by": "client",
		"toolwire.permission.granted":    "true",
	})
	hook, ok := kids["hook PreToolUse"]
	if !ok {
		t.Fatalf("no hook span under run_tool: %v", kids)
	}
	wantAttrs(t, hook, map[string]string{"toolwire.hook.event": "PreToolUse", "toolwire.hook.commands": "1", "toolwire.hook.blocked": "false"})
	for _, sp := range c.spans.GetSpans() {
		for k, v := range attrs(sp) {
			if strings.Contains(v, "secret-hook-marker") {
				t.Errorf("span %s attribute %s holds the hook command", sp.Name, k)
			}
		}
	}

	// A command past its timeout.
	s.useTool("slow", "m2", "Bash", `{"command":"sleep 60","timeout":300}`)
	if r := s.results(1)[0]; r.GetOutcome() != executorv1.Outcome_OUTCOME_TIMEOUT {
		t.Fatalf("outcome %v: %q", r.GetOutcome(), text(r))
	}
	run = c.runTool("slow")
	wantAttrs(t, run, map[string]string{"toolwire.outcome": "timeout", "error.type": "timeout"})
	proc, ok := c.children(run)["process"]
	if !ok {
		t.Fatalf("no process span: %v", c.children(run))
	}
	wantAttrs(t, proc, map[string]string{"error.type": "timeout"})
	if proc.Status.Code != codes.Error {
		t.Errorf("process status %+v", proc.Status)
	}
}

// executorScope is the instrumentation scope of the executor's metrics.
const executorScope = "github.com/toolwire/toolwire/pkg/executor"

// point is one data point of a collected metric.
type point struct {
	attrs map[string]string
	value float64 // the sum, or the count of a histogram
}

// collect returns the executor's metrics as name → data points.
func (c *captured) collect() map[string][]point {
	c.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := c.reader.Collect(context.Background(), &rm); err != nil {
		c.t.Fatal(err)
	}
	out := map[string][]point{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != executorScope {
			continue
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{attrStrings(dp.Attributes.ToSlice()), float64(dp.Count)})
				}
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{attrStrings(dp.Attributes.ToSlice()), float64(dp.Value)})
				}
			default:
				c.t.Errorf("metric %s has data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

// sumWhere adds the values of the points whose attributes include want.
func sumWhere(ps []point, want map[string]string) float64 {
	var n float64
next:
	for _, p := range ps {
		for k, v := range want {
			if p.attrs[k] != v {
				continue next
			}
		}
		n += p.value
	}
	return n
}

func TestToolMetricsCarryOnlyBoundedAttributes(t *testing.T) {
	c := captureTelemetry(t)
	h := newHarness(t, executor.Config{})
	s := h.open(&executorv1.SessionOptions{ResultOrder: executorv1.ResultOrder_RESULT_ORDER_COMPLETION})
	s.use("ok", "m1", `{"output":"12345"}`)
	s.use("fail", "m2", `{"fail":true}`)
	s.use("invalid", "m3", `{"no_such_field":1}`)
	s.useTool("unknown", "m4", "Secret_Tool_Name_From_The_Model", `{}`)
	s.results(4)
	s.use("held", "m5", `{"gate":"never"}`)
	s.untilStarted("held")
	s.send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Abort{Abort: &executorv1.Abort{
		Target: &executorv1.Abort_ToolUseId{ToolUseId: "held"}, Reason: executorv1.AbortReason_ABORT_REASON_USER_INTERRUPTED}}})
	s.results(1)

	got := c.collect()
	allowed := map[string][]string{
		"toolwire.tool.duration":        {"gen_ai.tool.name", "toolwire.outcome"},
		"toolwire.tool.queue_wait":      {"gen_ai.tool.name"},
		"toolwire.tool.in_flight":       {"gen_ai.tool.name"},
		"toolwire.tool.aborts":          {"gen_ai.tool.name", "toolwire.abort.reason"},
		"toolwire.tool.output_bytes":    {"gen_ai.tool.name"},
		"toolwire.permission.decisions": {"toolwire.permission.behavior", "toolwire.permission.decided_by"},
	}
	for name, keys := range allowed {
		if len(got[name]) == 0 {
			t.Errorf("metric %s was not recorded", name)
		}
		for _, p := range got[name] {
			for k, v := range p.attrs {
				if !slices.Contains(keys, k) {
					t.Errorf("metric %s has attribute %s=%q; allowed: %v", name, k, v, keys)
				}
				if strings.Contains(v, "Secret_Tool") || v == s.hello.GetSessionId() {
					t.Errorf("metric %s carries %s=%q", name, k, v)
				}
			}
		}
	}
	for name := range got {
		if _, ok := allowed[name]; !ok {
			t.Errorf("unexpected metric %s", name)
		}
	}

	d := got["toolwire.tool.duration"]
	for _, want := range []map[string]string{
		{"gen_ai.tool.name": "Bash", "toolwire.outcome": "success"},
		{"gen_ai.tool.name": "Bash", "toolwire.outcome": "tool_error"},
		{"gen_ai.tool.name": "Bash", "toolwire.outcome": "invalid_input"},
		{"gen_ai.tool.name": "Bash", "toolwire.outcome": "interrupted"},
		{"gen_ai.tool.name": "_OTHER", "toolwire.outcome": "unknown_tool"},
	} {
		if n := sumWhere(d, want); n != 1 {
			t.Errorf("duration count for %v: %v, want 1", want, n)
		}
	}
	if n := sumWhere(got["toolwire.tool.aborts"], map[string]string{"gen_ai.tool.name": "Bash", "toolwire.abort.reason": "user_interrupted"}); n != 1 {
		t.Errorf("aborts %v", got["toolwire.tool.aborts"])
	}
	if n := sumWhere(got["toolwire.tool.in_flight"], nil); n != 0 {
		t.Errorf("in flight after every result: %v", n)
	}
	// ok, fail, invalid (its schema failure is reported when it leaves the
	// queue) and held waited in the queue; unknown never queued.
	if n := sumWhere(got["toolwire.tool.queue_wait"], map[string]string{"gen_ai.tool.name": "Bash"}); n != 4 {
		t.Errorf("queue waits recorded: %v, want 4 (the invalid call also queued)", n)
	}
	if n := sumWhere(got["toolwire.permission.decisions"], map[string]string{
		"toolwire.permission.behavior": "allow", "toolwire.permission.decided_by": "mode"}); n != 3 {
		t.Errorf("permission decisions %v, want 3 allowed by the mode", got["toolwire.permission.decisions"])
	}
	if n := sumWhere(got["toolwire.tool.output_bytes"], map[string]string{"gen_ai.tool.name": "Bash"}); n < float64(len("ok ok 12345")) {
		t.Errorf("output bytes %v", n)
	}
}
