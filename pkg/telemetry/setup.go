package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// EnvUsage is a short description of the environment variables Setup
// reads, for the usage text of the binaries.
const EnvUsage = `OpenTelemetry (traces and metrics over OTLP) is configured by the standard
environment variables; nothing is exported unless an endpoint is set:
  OTEL_EXPORTER_OTLP_ENDPOINT           collector endpoint for traces and metrics,
                                        e.g. http://localhost:4318 (or _TRACES_/_METRICS_ENDPOINT)
  OTEL_EXPORTER_OTLP_PROTOCOL           http/protobuf (default) or grpc
  OTEL_EXPORTER_OTLP_HEADERS            extra headers, e.g. authorization tokens
  OTEL_SERVICE_NAME                     service.name (default: the program's name)
  OTEL_RESOURCE_ATTRIBUTES              more resource attributes, k1=v1,k2=v2
  OTEL_TRACES_SAMPLER, _SAMPLER_ARG     e.g. parentbased_traceidratio and 0.1
  OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER
                                        otlp (default) or none
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
// the OTEL_* environment asks for an OTLP export — a global tracer provider
// (batching span processor; sampler from OTEL_TRACES_SAMPLER) and a global
// meter provider (periodic reader). Without an endpoint, with
// OTEL_SDK_DISABLED=true or with the signal's exporter set to "none",
// nothing is exported and no exporter or background goroutine exists: the
// global providers stay the no-op ones.
//
// shutdown flushes what is buffered and stops the exporters; call it once,
// before the process exits, with a context that bounds the wait.
func Setup(ctx context.Context, opts Options) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	nothing := func(context.Context) error { return nil }
	if disabled, _ := strconv.ParseBool(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED"))); disabled {
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
	if !traces.enabled && !metrics.enabled {
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
	if traces.enabled {
		exp, err := newTraceExporter(ctx, traces.protocol)
		if err != nil {
			return nil, err
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		otel.SetTracerProvider(tp)
		shutdowns = append(shutdowns, tp.Shutdown)
	}
	if metrics.enabled {
		exp, err := newMetricExporter(ctx, metrics.protocol)
		if err != nil {
			return nil, errors.Join(err, shutdown(ctx))
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)), sdkmetric.WithResource(res))
		otel.SetMeterProvider(mp)
		shutdowns = append(shutdowns, mp.Shutdown)
	}
	return shutdown, nil
}

// Protocols of OTLP export.
const (
	protocolGRPC = "grpc"
	protocolHTTP = "http/protobuf"
)

// export is what the environment says about exporting one signal.
type export struct {
	enabled  bool
	protocol string
}

// exportFromEnv reads OTEL_<signal>_EXPORTER, the endpoint and the protocol
// of one signal ("TRACES" or "METRICS"); the per-signal variables win over
// the general ones, as the specification says.
func exportFromEnv(signal string) (export, error) {
	switch exp := strings.TrimSpace(os.Getenv("OTEL_" + signal + "_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		return export{}, nil
	default:
		return export{}, fmt.Errorf("OTEL_%s_EXPORTER=%q: only otlp and none are supported", signal, exp)
	}
	endpoint := firstEnv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	if endpoint == "" {
		return export{}, nil
	}
	protocol := firstEnv("OTEL_EXPORTER_OTLP_"+signal+"_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	switch protocol {
	case "":
		protocol = protocolHTTP
	case protocolGRPC, protocolHTTP:
	default:
		return export{}, fmt.Errorf("OTLP protocol %q for %s: want grpc or http/protobuf", protocol, strings.ToLower(signal))
	}
	return export{enabled: true, protocol: protocol}, nil
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
		attrs = append(attrs, attribute.String("service.name", opts.ServiceName))
	}
	if opts.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", opts.ServiceVersion))
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

// newTraceExporter builds the OTLP span exporter; it reads the endpoint,
// headers, TLS and timeout from the environment itself.
func newTraceExporter(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	var (
		exp sdktrace.SpanExporter
		err error
	)
	if protocol == protocolGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter (%s): %w", protocol, err)
	}
	return exp, nil
}

// newMetricExporter builds the OTLP metric exporter from the environment.
func newMetricExporter(ctx context.Context, protocol string) (sdkmetric.Exporter, error) {
	var (
		exp sdkmetric.Exporter
		err error
	)
	if protocol == protocolGRPC {
		exp, err = otlpmetricgrpc.New(ctx)
	} else {
		exp, err = otlpmetrichttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP metric exporter (%s): %w", protocol, err)
	}
	return exp, nil
}
