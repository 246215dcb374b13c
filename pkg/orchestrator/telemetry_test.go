package orchestrator_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolwire/toolwire/pkg/model/fakeapi"
	"github.com/toolwire/toolwire/pkg/orchestrator"
)

// One turn is one trace: invoke_agent holds the model requests (chat) and
// one execute_tool span per tool call, and each call's W3C context reaches
// the executor, whose run_tool span is the execute_tool span's child.
// Not parallel: it installs the global tracer provider.
func TestTurnTrace(t *testing.T) {
	rec := recordSpans(t)

	h := newHarness(t)
	a := h.write("a.txt", "alpha\n")
	h.fake.Push(fakeapi.ToolTurn(
		fakeapi.ToolUse("toolu_read", "Read", map[string]any{"file_path": a}),
		fakeapi.ToolUse("toolu_bad", "Read", map[string]any{"path": a}),
	), fakeapi.EndTurn(fakeapi.Text("done")))
	s := h.session(orchestrator.SessionConfig{})
	if res := h.run(s, "read it"); res.StopReason != orchestrator.StopEndTurn {
		t.Fatalf("turn = %+v", res)
	}
	h.close()

	spans := rec.Ended()
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		byName[sp.Name()] = append(byName[sp.Name()], sp)
	}
	turns := byName["invoke_agent"]
	if len(turns) != 1 {
		t.Fatalf("%d invoke_agent spans; spans: %v", len(turns), names(spans))
	}
	turn := turns[0]
	if got := attr(turn, "gen_ai.conversation.id"); got != s.ID() {
		t.Errorf("gen_ai.conversation.id = %q, want %q", got, s.ID())
	}
	chats := byName["chat claude-test"]
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want 2; spans: %v", len(chats), names(spans))
	}
	for _, c := range chats {
		if c.Parent().SpanID() != turn.SpanContext().SpanID() || c.SpanKind() != trace.SpanKindClient {
			t.Errorf("chat span parent %v kind %v", c.Parent().SpanID(), c.SpanKind())
		}
		if attr(c, "gen_ai.operation.name") != "chat" || attr(c, "gen_ai.usage.input_tokens") == "" || attr(c, "gen_ai.response.finish_reasons") == "" {
			t.Errorf("chat attributes: %v", c.Attributes())
		}
	}
	calls := byName["execute_tool Read"]
	if len(calls) != 2 {
		t.Fatalf("%d execute_tool spans, want 2; spans: %v", len(calls), names(spans))
	}
	runTools := byName["run_tool Read"]
	for _, c := range calls {
		if c.Parent().SpanID() != turn.SpanContext().SpanID() {
			t.Errorf("execute_tool is not a child of the turn")
		}
		id := attr(c, "gen_ai.tool.call.id")
		if attr(c, "gen_ai.operation.name") != "execute_tool" || attr(c, "gen_ai.tool.name") != "Read" {
			t.Errorf("execute_tool attributes: %v", c.Attributes())
		}
		switch id {
		case "toolu_read":
			if attr(c, "error.type") != "" {
				t.Errorf("a successful call has error.type %q", attr(c, "error.type"))
			}
		case "toolu_bad":
			if attr(c, "error.type") == "" {
				t.Errorf("a failed call has no error.type: %v", c.Attributes())
			}
		default:
			t.Errorf("unexpected call id %q", id)
		}
		var child bool
		for _, r := range runTools {
			if r.Parent().SpanID() == c.SpanContext().SpanID() && r.SpanContext().TraceID() == turn.SpanContext().TraceID() {
				child = true
			}
		}
		if !child {
			t.Errorf("no executor run_tool span under execute_tool %s; spans: %v", id, names(spans))
		}
	}
}

func attr(sp sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range sp.Attributes() {
		if kv.Key == attribute.Key(key) {
			return kv.Value.String()
		}
	}
	return ""
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, sp := range spans {
		out = append(out, sp.Name())
	}
	return out
}

// recordSpans installs, until the end of t, a global tracer provider that
// records every span, and the W3C propagator; tests that use it cannot run
// in parallel.
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
		_ = tp.Shutdown(context.Background())
	})
	return rec
}
