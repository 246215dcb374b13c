package rpcserver_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/toolwire/toolwire/internal/testkit"
	"github.com/toolwire/toolwire/pkg/rpcerr"
	"github.com/toolwire/toolwire/pkg/rpcserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestServerSpansAndLogLinesCarryTheTrace calls a server whose handler
// panics, from a client inside a span: the server span continues the
// client's trace, and the recovery and logging lines carry its ids.
func TestServerSpansAndLogLinesCarryTheTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
		_ = tp.Shutdown(context.Background())
	})

	var logs testkit.Buffer
	// A plain handler: New adds the trace ids itself.
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	srv := rpcserver.New(log, grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error { panic("boom") }))
	lis := bufconn.Listen(1 << 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	defer func() {
		srv.Stop()
		<-done
	}()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	ctx, parent := tp.Tracer("test").Start(context.Background(), "caller")
	err = conn.Invoke(ctx, "/test.Panicky/Call", &emptypb.Empty{}, &emptypb.Empty{})
	parent.End()
	if status.Code(err) != codes.Internal || rpcerr.Reason(err) != rpcerr.Internal {
		t.Fatalf("call: %v (reason %q), want Internal from the recovery handler", err, rpcerr.Reason(err))
	}
	srv.Stop()
	<-done

	// The server span ends just after the call, perhaps after the client
	// saw its status.
	var server tracetest.SpanStub
	for deadline := time.Now().Add(20 * time.Second); !server.SpanContext.IsValid() && time.Now().Before(deadline); {
		for _, s := range exp.GetSpans() {
			if s.Name == "test.Panicky/Call" && s.SpanKind == trace.SpanKindServer {
				server = s
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !server.SpanContext.IsValid() || server.SpanContext.TraceID() != parent.SpanContext().TraceID() {
		t.Fatalf("server span %+v not in the caller's trace %v", server, parent.SpanContext().TraceID())
	}
	var lines int
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		lines++
		if rec["trace_id"] != server.SpanContext.TraceID().String() || rec["span_id"] != server.SpanContext.SpanID().String() {
			t.Errorf("log line without the server span's ids: %s", line)
		}
	}
	if lines < 2 { // the panic, and the finished call
		t.Errorf("log lines:\n%s", logs.String())
	}
}
