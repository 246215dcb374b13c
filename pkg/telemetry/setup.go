package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// EnvUsage is a short description of the environment variables Setup
// reads, for the usage text of the binaries.
const EnvUsage = `OpenTelemetry (traces and metrics) is configured by the standard environment
variables; nothing is exported unless an endpoint or a Prometheus port is asked for:
  OTEL_EXPORTER_OTLP_ENDPOINT           collector endpoint for traces and metrics,
                                        e.g. http://localhost:4318 (or _TRACES_/_METRICS_ENDPOINT)
  OTEL_EXPORTER_OTLP_PROTOCOL           http/protobuf (default) or grpc
  OTEL_EXPORTER_OTLP_HEADERS            extra headers, e.g. authorization tokens
  OTEL_SERVICE_NAME                     service.name (default: the program's name)
  OTEL_RESOURCE_ATTRIBUTES              more resource attributes, k1=v1,k2=v2
  OTEL_TRACES_SAMPLER, _SAMPLER_ARG     e.g. parentbased_traceidratio and 0.1
  OTEL_TRACES_EXPORTER                  otlp (default) or none
  OTEL_METRICS_EXPORTER                 otlp (default), prometheus or none; prometheus
                                        serves /metrics on OTEL_EXPORTER_PROMETHEUS_HOST
                                        (default localhost) and _PORT (default 9464)
  OTEL_SDK_DISABLED=true                turns all of it off
`

// Options describe the service whose telemetry Setup configures.
type Options struct {
	// ServiceName is service.name unless OTEL_SERVICE_NAME or
	// OTEL_RESOURCE_ATTRIBUTES set it.
	ServiceName string
	// ServiceVersion is service.version.
	ServiceVersion string
	// Logger receives the SDK's own errors (a collector that cannot be
	// reached, a rejected export); nil leaves OpenTelemetry's default,
	// which writes them to standard error.
	Logger *slog.Logger
}

// Setup installs the W3C tracecontext and baggage propagators, and — when
// the OTEL_* environment asks for an export — a global tracer provider
// (batching span processor; sampler from OTEL_TRACES_SAMPLER) and a global
// meter provider (a periodic OTLP reader, or a Prometheus endpoint). The
// exporters themselves come from the OpenTelemetry contrib package
// autoexport, which reads OTEL_*_EXPORTER and the exporters' own variables;
// Setup decides before it whether a signal is exported at all. Without an
// endpoint (or OTEL_METRICS_EXPORTER=prometheus), with
// OTEL_SDK_DISABLED=true or with the signal's exporter set to "none",
// nothing is exported and no exporter or background goroutine exists. A
// signal that is not exported gets no provider, but for traces: the tracer
// provider is then OpenTelemetry's no-op one, whose spans return their
// parent's, allocate nothing and carry the trace context on (the default
// global provider makes and boxes a non-recording span per span started).
//
// shutdown flushes what is buffered and stops the exporters; call it once,
// before the process exits, with a context that bounds the wait.
func Setup(ctx context.Context, opts Options) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	nothing := func(context.Context) error { return nil }
	if disabled, _ := strconv.ParseBool(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED"))); disabled {
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		return nothing, nil
	}
	traces, err := exportFromEnv("TRACES")
	if err != nil {
		return nil, err
	}
	metrics, err := exportFromEnv("METRICS")
	if err != nil {
		return nil, err
	}
	if !traces {
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
	}
	if !traces && !metrics {
		return nothing, nil
	}
	res, err := newResource(ctx, opts)
	if err != nil {
		return nil, err
	}
	if opts.Logger != nil {
		log := opts.Logger
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("opentelemetry export failed", "error", err)
		}))
	}

	var shutdowns []func(context.Context) error
	shutdown = func(ctx context.Context) error {
		var errs []error
		for _, f := range shutdowns {
			errs = append(errs, f(ctx))
		}
		return errors.Join(errs...)
	}
	if traces {
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("trace exporter: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		otel.SetTracerProvider(tp)
		shutdowns = append(shutdowns, tp.Shutdown)
	}
	if metrics {
		reader, err := autoexport.NewMetricReader(ctx)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("metric reader: %w", err), shutdown(ctx))
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
		otel.SetMeterProvider(mp)
		shutdowns = append(shutdowns, mp.Shutdown)
	}
	return shutdown, nil
}

// exportFromEnv reports whether the environment asks to export one
// signal ("TRACES" or "METRICS"): OTEL_<signal>_EXPORTER is otlp (or unset)
// and an OTLP endpoint is set, or it is prometheus (metrics only). It
// checks what autoexport will read, so that a mistake is reported with the
// variable's name.
//
// Two choices differ from autoexport's defaults. OTLP without an endpoint
// exports nothing (autoexport would send to localhost): a binary started
// without telemetry configured starts no exporter. And "console" is
// refused: standard output carries the programs' own output (the JSON of
// toolsvc call and orchestrator -p), which spans would corrupt.
func exportFromEnv(signal string) (bool, error) {
	name := "OTEL_" + signal + "_EXPORTER"
	switch exp := strings.TrimSpace(os.Getenv(name)); {
	case exp == "none":
		return false, nil
	case exp == "prometheus" && signal == "METRICS":
		return true, nil
	case exp == "console":
		return false, fmt.Errorf("%s=console is not supported: standard output carries the program's own output", name)
	case exp != "" && exp != "otlp":
		supported := "otlp and none"
		if signal == "METRICS" {
			supported = "otlp, prometheus and none"
		}
		return false, fmt.Errorf("%s=%q: only %s are supported", name, exp, supported)
	}
	if firstEnv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return false, nil
	}
	switch protocol := firstEnv("OTEL_EXPORTER_OTLP_"+signal+"_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"); protocol {
	case "", "grpc", "http/protobuf":
	default:
		return false, fmt.Errorf("OTLP protocol %q for %s: want grpc or http/protobuf", protocol, strings.ToLower(signal))
	}
	return true, nil
}

// firstEnv returns the first non-empty value of the variables.
func firstEnv(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(os.Getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

// newResource describes the service: its name and version, the SDK, the
// host, then OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, which win.
func newResource(ctx context.Context, opts Options) (*resource.Resource, error) {
	var attrs []attribute.KeyValue
	if opts.ServiceName != "" {
		attrs = append(attrs, semconv.ServiceName(opts.ServiceName))
	}
	if opts.ServiceVersion != "" {
		attrs = append(attrs, semconv.ServiceVersion(opts.ServiceVersion))
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attrs...),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("opentelemetry resource: %w", err)
	}
	return res, nil
}
