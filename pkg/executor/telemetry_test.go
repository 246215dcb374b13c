package executor

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/toolwire/toolwire/pkg/tool"
)

// BenchmarkCallTelemetry is the telemetry work of one call alone — the
// run_tool span and its queue_wait, validate and permission children, a
// W3C extraction, and the call's measurements — without the call itself:
// the part of BenchmarkTracingPerCall (pkg/execgrpc) that tracing adds,
// measured where a busy machine's noise does not drown it.
func BenchmarkCallTelemetry(b *testing.B) {
	for _, mode := range []string{"off", "traces", "traces+metrics"} {
		b.Run("telemetry="+mode, func(b *testing.B) {
			var tp *sdktrace.TracerProvider
			var mp *sdkmetric.MeterProvider
			if mode != "off" {
				tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				otel.SetTracerProvider(tp)
			}
			if mode == "traces+metrics" {
				mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				otel.SetMeterProvider(mp)
			}
			defer func() {
				otel.SetTracerProvider(tracenoop.NewTracerProvider())
				otel.SetMeterProvider(metricnoop.NewMeterProvider())
				if tp != nil {
					_ = tp.Shutdown(context.Background())
				}
				if mp != nil {
					_ = mp.Shutdown(context.Background())
				}
			}()
			tel, err := newTelemetry(false)
			if err != nil {
				b.Fatal(err)
			}
			use := ToolUse{ID: "toolu_1", Name: "Read", Input: `{"file_path":"a"}`,
				TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
			res := &tool.Result{Content: []tool.Content{{Text: "1\tline\n"}}}
			for b.Loop() {
				now := time.Now()
				ctx, span := tel.startCall(context.Background(), "s1", use, now, false)
				_, wait := tel.tracer.Start(ctx, spanQueueWait, trace.WithTimestamp(now))
				wait.End()
				_, v := tel.tracer.Start(ctx, spanValidate)
				v.End()
				_, p := tel.tracer.Start(ctx, spanPermission)
				tel.recordDecision(ctx, p, permissionVerdict{behavior: "allow", by: "mode", decidedBy: "mode:bypassPermissions"})
				p.End()
				cr := &CallResult{ToolUseID: use.ID, ToolName: "Read", Result: res, ReceivedAt: now, StartedAt: now, FinishedAt: time.Now()}
				tel.queueWait.Record(ctx, 0)
				tel.recordResult(ctx, "Read", cr)
				tel.endCall(span, cr)
			}
		})
	}
}

// TestSpansUnderTheNoopProvider checks the executor's spans under the
// no-op tracer provider, which telemetry.Setup installs when it exports no
// traces: a call's span carries the trace context of its ToolUse, its
// children carry the call's, and none of it allocates. Under an SDK
// provider the same spans are recorded.
func TestSpansUnderTheNoopProvider(t *testing.T) {
	otel.SetTracerProvider(tracenoop.NewTracerProvider())
	defer otel.SetTracerProvider(tracenoop.NewTracerProvider())
	tel, err := newTelemetry(false)
	if err != nil {
		t.Fatal(err)
	}
	use := ToolUse{ID: "toolu_1", Name: "Read", Input: `{"file_path":"a"}`,
		TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	ctx, span := tel.startCall(context.Background(), "s1", use, time.Now(), false)
	if got := span.SpanContext().TraceID().String(); got != "0af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("call span's trace id %q, want the ToolUse's", got)
	}
	if span.IsRecording() {
		t.Fatal("call span records under the no-op provider")
	}
	allocs := testing.AllocsPerRun(100, func() {
		cctx, child := tel.tracer.Start(ctx, spanValidate)
		if !trace.SpanContextFromContext(cctx).Equal(span.SpanContext()) {
			t.Fatal("a child span lost the call's trace context")
		}
		child.End()
	})
	if allocs != 0 {
		t.Errorf("a child span under the no-op provider costs %v allocations, want 0", allocs)
	}

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	otel.SetTracerProvider(tp)
	tel, err = newTelemetry(false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, span = tel.startCall(context.Background(), "s1", use, time.Now(), false)
	_, s := tel.tracer.Start(ctx, spanValidate)
	s.End()
	span.End()
	if got := rec.Ended(); len(got) != 2 || got[0].Name() != spanValidate || got[0].Parent().SpanID() != span.SpanContext().SpanID() ||
		got[1].Parent().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("an SDK provider's spans: %v", got)
	}
}
