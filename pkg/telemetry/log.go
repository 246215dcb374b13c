// Package telemetry sets up what the binaries report about themselves:
// structured logs (log/slog, JSON or text) that carry the trace and span
// ids of the call they belong to, and OpenTelemetry traces and metrics
// exported over OTLP as the standard OTEL_* environment variables say.
// It also carries a trace context onto a ToolUse for the executor.
//
// The instrumented packages themselves use only the OpenTelemetry API
// (otel.Tracer, otel.Meter): without Setup their spans and measurements are
// no-ops.
package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// NewLogger returns a process logger writing to w in format ("json" or
// "text") at level ("debug", "info", "warn", "error"). A record logged with
// a context that holds a span (slog's *Context methods) carries trace_id
// and span_id.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "json":
		return slog.New(TraceHandler(slog.NewJSONHandler(w, opts))), nil
	case "text":
		return slog.New(TraceHandler(slog.NewTextHandler(w, opts))), nil
	}
	return nil, fmt.Errorf("--log-format must be json or text, not %q", format)
}

// Log attribute keys of the trace context.
const (
	TraceIDKey = "trace_id"
	SpanIDKey  = "span_id"
)

// TraceHandler wraps h so that records logged with a context holding a
// valid span context get trace_id and span_id attributes (inside the
// group, after WithGroup). Wrapping a handler that TraceHandler already
// wrapped returns it unchanged.
func TraceHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(traceHandler); ok {
		return h
	}
	return traceHandler{h}
}

type traceHandler struct{ inner slog.Handler }

func (h traceHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String(TraceIDKey, sc.TraceID().String()), slog.String(SpanIDKey, sc.SpanID().String()))
	}
	return h.inner.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{h.inner.WithAttrs(as)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.inner.WithGroup(name)}
}
