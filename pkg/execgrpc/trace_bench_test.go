package execgrpc_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
	"github.com/toolwire/toolwire/pkg/sandbox/sandboxtest"
	"github.com/toolwire/toolwire/pkg/telemetry"
)

// BenchmarkTracingPerCall measures what telemetry adds to one call: a Read
// of a 1 KiB file through a real executor on loopback TCP, one call at a
// time on one Execute stream, with
//
//   - off: the no-op global providers (no telemetry.Setup);
//   - traces: an SDK tracer provider sampling everything, its batch span
//     processor feeding an exporter that drops the spans, and a
//     traceparent injected into every ToolUse by the client;
//   - traces+metrics: the same plus an SDK meter provider, so that the
//     executor's and otelgrpc's instruments really aggregate.
//
// The difference between the sub-benchmarks is the per-call cost. Besides
// wall time per call, each reports cpu-ns/op: the CPU time of the whole
// test process (client, server, executor, exporter) per call, which a busy
// machine disturbs much less than wall time.
func BenchmarkTracingPerCall(b *testing.B) {
	for _, mode := range []string{"off", "traces", "traces+metrics"} {
		b.Run("telemetry="+mode, func(b *testing.B) {
			shutdown := installBenchTelemetry(b, mode)
			defer shutdown()
			root := sandboxtest.Dir(b)
			path := filepath.Join(root, "one-kib.txt")
			data := make([]byte, 0, 1024)
			for len(data) < 1024 {
				data = append(data, "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqr\n"...)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				b.Fatal(err)
			}
			client, stop := tracedBenchServer(b, root)
			defer stop()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stream, err := client.Execute(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := stream.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_Open{Open: &executorv1.Open{
				Options: &executorv1.SessionOptions{ResultOrder: executorv1.ResultOrder_RESULT_ORDER_COMPLETION}}}}); err != nil {
				b.Fatal(err)
			}
			// The caller's span, as an orchestrator's turn would have one.
			callerCtx, caller := otel.Tracer("bench").Start(ctx, "caller")
			defer caller.End()
			// Alternate two ranges so no read is the "unchanged" stub.
			inputs := []string{fmt.Sprintf(`{"file_path":%q}`, path), fmt.Sprintf(`{"file_path":%q,"offset":1,"limit":100}`, path)}
			n := 0
			cpu0 := processCPU(b)
			b.ResetTimer()
			for b.Loop() {
				n++
				u := &executorv1.ToolUse{Id: fmt.Sprintf("toolu_%d", n), Name: "Read", InputJson: inputs[n%2],
					AssistantMessageId: fmt.Sprintf("msg_%d", n)}
				telemetry.InjectToolUse(callerCtx, u)
				if err := stream.Send(&executorv1.ExecuteRequest{Msg: &executorv1.ExecuteRequest_ToolUse{ToolUse: u}}); err != nil {
					b.Fatal(err)
				}
				for {
					ev, err := stream.Recv()
					if err != nil {
						b.Fatal(err)
					}
					if r := ev.GetResult(); r != nil {
						if r.GetIsError() {
							b.Fatalf("read failed: %v", r)
						}
						break
					}
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU returns the user and system CPU time of the process so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// installBenchTelemetry installs the global providers of mode and returns
// a function that shuts them down (flushing the batch processor) and puts
// the no-op ones back.
func installBenchTelemetry(b *testing.B, mode string) func() {
	b.Helper()
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	var tp *sdktrace.TracerProvider
	var mp *sdkmetric.MeterProvider
	if mode != "off" {
		tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
			sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		otel.SetTracerProvider(tp)
	}
	if mode == "traces+metrics" {
		mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		otel.SetMeterProvider(mp)
	}
	return func() {
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
		if tp != nil {
			if err := tp.Shutdown(context.Background()); err != nil {
				b.Error(err)
			}
		}
		if mp != nil {
			if err := mp.Shutdown(context.Background()); err != nil {
				b.Error(err)
			}
		}
	}
}

// tracedBenchServer serves a real executor (sandbox off: Read runs no
// process) on loopback TCP and returns a client that, like the
// orchestrator's, carries its trace context in gRPC metadata.
func tracedBenchServer(b *testing.B, root string) (executorv1.ExecutorServiceClient, func()) {
	b.Helper()
	e := serveBench(b, root, "none", grpc.WithStatsHandler(otelgrpc.NewClientHandler()))
	return e.client, e.close
}
