package telemetry

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/telemetry/otlptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// otelEnv are the variables Setup and the exporters read; each test starts
// with all of them empty.
var otelEnv = []string{
	"OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
	"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER",
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
	"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	"OTEL_EXPORTER_PROMETHEUS_HOST", "OTEL_EXPORTER_PROMETHEUS_PORT", "OTEL_METRICS_PRODUCERS",
}

// cleanGlobals clears the OTEL_* environment and puts the global
// providers and propagator back to no-ops when the test ends.
func cleanGlobals(t *testing.T) {
	t.Helper()
	for _, k := range otelEnv {
		t.Setenv(k, "")
	}
	otel.SetTracerProvider(tracenoop.NewTracerProvider())
	otel.SetMeterProvider(metricnoop.NewMeterProvider())
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	t.Cleanup(func() {
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	})
}

func setup(t *testing.T) func(context.Context) error {
	t.Helper()
	shutdown, err := Setup(context.Background(), Options{ServiceName: "svc-under-test", ServiceVersion: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	return shutdown
}

func TestSetupWithoutEndpointExportsNothing(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"no endpoint":       {},
		"sdk disabled":      {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"},
		"exporters none":    {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"},
		"otlp, no endpoint": {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp"},
		"only a log target": {"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://127.0.0.1:1"},
	} {
		t.Run(name, func(t *testing.T) {
			cleanGlobals(t)
			for k, v := range env {
				t.Setenv(k, v)
			}
			// A provider from before is replaced by the no-op one.
			before := sdktrace.NewTracerProvider()
			defer before.Shutdown(context.Background())
			otel.SetTracerProvider(before)
			shutdown := setup(t)
			if _, ok := otel.GetTracerProvider().(tracenoop.TracerProvider); !ok {
				t.Errorf("tracer provider is %T, want the no-op one", otel.GetTracerProvider())
			}
			// Its spans carry the parent's trace context and cost nothing.
			parent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true}))
			tracer := otel.Tracer("test")
			if allocs := testing.AllocsPerRun(100, func() {
				ctx, span := tracer.Start(parent, "not exported")
				if trace.SpanContextFromContext(ctx).TraceID() != (trace.TraceID{1}) {
					t.Fatal("a span lost its parent's trace id")
				}
				span.End()
			}); allocs != 0 {
				t.Errorf("a span costs %v allocations, want 0", allocs)
			}
			if _, ok := otel.GetMeterProvider().(*sdkmetric.MeterProvider); ok {
				t.Error("a meter provider was installed")
			}
			// The propagator is installed all the same.
			if f := otel.GetTextMapPropagator().Fields(); !slices.Contains(f, "traceparent") || !slices.Contains(f, "baggage") {
				t.Errorf("propagator fields %v", f)
			}
			if err := shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			// No exporter goroutine runs (goleak checks again at the end).
			goleak.VerifyNone(t)
		})
	}
}

func TestSetupRejectsWhatItCannotExport(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"json protocol":           {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
		"console exporter":        {"OTEL_TRACES_EXPORTER": "console"},
		"console metrics":         {"OTEL_METRICS_EXPORTER": "console"},
		"prometheus for traces":   {"OTEL_TRACES_EXPORTER": "prometheus"},
		"unknown exporter":        {"OTEL_METRICS_EXPORTER": "statsd"},
		"invalid Prometheus port": {"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1", "OTEL_EXPORTER_PROMETHEUS_PORT": "none"},
	} {
		t.Run(name, func(t *testing.T) {
			cleanGlobals(t)
			for k, v := range env {
				t.Setenv(k, v)
			}
			if _, err := Setup(context.Background(), Options{ServiceName: "x"}); err == nil {
				t.Fatal("Setup accepted it")
			}
		})
	}
}

// exportOnce sets up telemetry with the environment given, makes one span
// and one measurement, shuts down, and returns what the receiver got.
func exportOnce(t *testing.T, r *otlptest.Receiver, env map[string]string) []otlptest.Span {
	t.Helper()
	cleanGlobals(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	shutdown := setup(t)
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); !ok {
		t.Fatalf("tracer provider is %T", otel.GetTracerProvider())
	}
	ctx, span := otel.Tracer("test").Start(context.Background(), "exported span", trace.WithAttributes())
	counter, err := otel.Meter("test").Int64Counter("test.exported.count")
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(ctx, 3, metric.WithAttributes())
	span.End()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Shutdown flushes: the batch processor's delay and the metric
	// reader's interval (a minute by default) are not waited for.
	if err := shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if !r.MetricNames()["test.exported.count"] {
		t.Errorf("metrics received: %v", r.MetricNames())
	}
	return r.Spans()
}

func TestSetupExportsOverGRPC(t *testing.T) {
	r := otlptest.StartGRPC(t)
	spans := exportOnce(t, r, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": r.Endpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_RESOURCE_ATTRIBUTES":    "deployment.environment.name=test",
	})
	if len(spans) != 1 || spans[0].GetName() != "exported span" {
		t.Fatalf("spans received: %v", spans)
	}
	res := spans[0].Resource
	if res["service.name"] != "svc-under-test" || res["service.version"] != "1.2.3" ||
		res["deployment.environment.name"] != "test" || res["telemetry.sdk.language"] != "go" {
		t.Errorf("resource %v", res)
	}
}

func TestSetupExportsOverHTTPAndTheEnvironmentNamesTheService(t *testing.T) {
	r := otlptest.StartHTTP(t)
	spans := exportOnce(t, r, map[string]string{
		// http/protobuf is the default protocol.
		"OTEL_EXPORTER_OTLP_ENDPOINT": r.Endpoint,
		"OTEL_SERVICE_NAME":           "renamed",
	})
	if len(spans) != 1 || spans[0].Resource["service.name"] != "renamed" {
		t.Fatalf("spans received: %v", spans)
	}
}

func TestSetupSamplerFromEnvironment(t *testing.T) {
	r := otlptest.StartGRPC(t)
	spans := exportOnce(t, r, map[string]string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT":  r.Endpoint,
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": r.Endpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL":         "grpc",
		"OTEL_TRACES_SAMPLER":                 "always_off",
	})
	if len(spans) != 0 {
		t.Fatalf("always_off sampler exported %d spans", len(spans))
	}
}

// TestSetupServesPrometheus asks for OTEL_METRICS_EXPORTER=prometheus: the
// metrics are served on the configured address, a second set-up on the same
// port fails, and shutdown stops the server (goleak checks its goroutines).
func TestSetupServesPrometheus(t *testing.T) {
	cleanGlobals(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	_ = l.Close()
	t.Setenv("OTEL_METRICS_EXPORTER", "prometheus")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_PORT", port)
	shutdown := setup(t)
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
		t.Error("a tracer provider was installed without a trace endpoint")
	}
	counter, err := otel.Meter("test").Int64Counter("test.exported.count")
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(context.Background(), 3)
	url := "http://127.0.0.1:" + port + "/metrics"
	page, err := get(url)
	if err != nil {
		t.Fatal(err)
	}
	if !hasLine(page, "test_exported_count_total{", " 3") || !hasLine(page, `target_info{`, "") || !strings.Contains(page, `service_name="svc-under-test"`) {
		t.Errorf("%s does not show the counter and the service:\n%s", url, page)
	}
	if _, err := Setup(context.Background(), Options{ServiceName: "second"}); err == nil || !strings.Contains(err.Error(), port) {
		t.Errorf("a second set-up on port %s: %v, want an error naming the port", port, err)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := get(url); err == nil {
		t.Error("the metrics are still served after shutdown")
	}
}

// get returns the body of an HTTP GET of url.
func get(url string) (string, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}

// hasLine reports whether page has a line starting with prefix and ending
// with suffix.
func hasLine(page, prefix, suffix string) bool {
	for line := range strings.SplitSeq(page, "\n") {
		if strings.HasPrefix(line, prefix) && strings.HasSuffix(line, suffix) {
			return true
		}
	}
	return false
}

func TestInjectToolUse(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	u := &executorv1.ToolUse{Id: "toolu_1"}
	InjectToolUse(context.Background(), u)
	if u.GetTraceparent() != "" {
		t.Fatalf("traceparent %q without a span", u.GetTraceparent())
	}
	InjectToolUse(spanContext(t, tid, sid), u)
	if want := "00-" + tid + "-" + sid + "-01"; u.GetTraceparent() != want {
		t.Fatalf("traceparent %q, want %q", u.GetTraceparent(), want)
	}
	if u.GetTracestate() != "" {
		t.Fatalf("tracestate %q from a span without one", u.GetTracestate())
	}
	// What the executor does with it: a W3C extraction gives the span back.
	got := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
		propagation.MapCarrier{"traceparent": u.GetTraceparent()}))
	if got.TraceID().String() != tid || got.SpanID().String() != sid || !got.IsSampled() {
		t.Fatalf("extracted %+v", got)
	}
}
