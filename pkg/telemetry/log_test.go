package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "json", "warn")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "k", "v")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil || rec["msg"] != "shown" || rec["k"] != "v" {
		t.Fatalf("log output %q: %v", buf.String(), err)
	}
	if _, ok := rec[TraceIDKey]; ok {
		t.Fatalf("a record without a span has a trace id: %q", buf.String())
	}
	if _, err := NewLogger(&buf, "xml", "info"); err == nil || !strings.Contains(err.Error(), "xml") {
		t.Fatalf("bad format accepted: %v", err)
	}
	if _, err := NewLogger(&buf, "text", "loud"); err == nil {
		t.Fatal("bad level accepted")
	}
}

// spanContext returns ctx with a made-up sampled span context.
func spanContext(t *testing.T, traceID, spanID string) context.Context {
	t.Helper()
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		t.Fatal(err)
	}
	sid, err := trace.SpanIDFromHex(spanID)
	if err != nil {
		t.Fatal(err)
	}
	return trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
}

func TestLogsCarryTraceAndSpanIDs(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx := spanContext(t, tid, sid)
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		log, err := NewLogger(&buf, format, "info")
		if err != nil {
			t.Fatal(err)
		}
		// Through With and a wrapped handler too: the ids are added once.
		log = slog.New(TraceHandler(log.With("session_id", "s1").Handler()))
		log.InfoContext(ctx, "in a span")
		log.Info("outside")
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 2 {
			t.Fatalf("%s: %d lines: %q", format, len(lines), buf.String())
		}
		if strings.Count(lines[0], tid) != 1 || strings.Count(lines[0], sid) != 1 || !strings.Contains(lines[0], "s1") {
			t.Errorf("%s: line in a span %q lacks the ids once each", format, lines[0])
		}
		if strings.Contains(lines[1], TraceIDKey) {
			t.Errorf("%s: line outside a span has a trace id: %q", format, lines[1])
		}
	}
}
