package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolwire/toolwire/pkg/tool"
)

// The executor's spans and metrics. Each call gets a "run_tool <tool>"
// span, a child of the W3C trace context its ToolUse carries (else of the
// span in the context given to Submit, the Execute stream's), with the
// children queue_wait, validate, permission and "hook <event>"; the Bash
// tool adds "process". They come from the global tracer and meter
// providers, so without telemetry.Setup they cost next to nothing, and
// when Setup exports no traces (it then installs the no-op tracer
// provider) the spans cost nothing at all.
//
// Metric attributes are bounded: tool names (unknown tools count as
// "_OTHER"), outcomes, reasons and permission classes — never ids, paths,
// commands or rule texts.

// instrumentationName names the executor's tracer and meter.
const instrumentationName = "github.com/toolwire/toolwire/pkg/executor"

// TraceContentEnv is the environment variable that, set to true, makes
// every executor record tool inputs and results on its spans (see
// Config.TraceContent).
const TraceContentEnv = "TOOLWIRE_TRACE_CONTENT"

// maxTraceContent caps each content attribute, in bytes.
const maxTraceContent = 8 << 10

// otherTool is the metric label of a tool name the executor does not know:
// the model may write anything there.
const otherTool = "_OTHER"

// Span and metric attribute keys: the OpenTelemetry semantic conventions'
// (v1.41.0, the newest of the otel module's semconv packages that holds the
// GenAI conventions), and toolwire's own where they have none.
const (
	keyToolName       = semconv.GenAIToolNameKey
	keyCallID         = semconv.GenAIToolCallIDKey
	keyArguments      = semconv.GenAIToolCallArgumentsKey
	keyResult         = semconv.GenAIToolCallResultKey
	keyErrorType      = semconv.ErrorTypeKey
	keySessionID      = attribute.Key("toolwire.session.id")
	keyOutcome        = attribute.Key("toolwire.outcome")
	keyDuplicate      = attribute.Key("toolwire.duplicate")
	keyAbortReason    = attribute.Key("toolwire.abort.reason")
	keyPermBehavior   = attribute.Key("toolwire.permission.behavior")
	keyPermRule       = attribute.Key("toolwire.permission.rule")
	keyPermDecidedBy  = attribute.Key("toolwire.permission.decided_by")
	keyPermGranted    = attribute.Key("toolwire.permission.granted")
	keyHookEvent      = attribute.Key("toolwire.hook.event")
	keyHookCommands   = attribute.Key("toolwire.hook.commands")
	keyHookBlocked    = attribute.Key("toolwire.hook.blocked")
	keyHookDecision   = attribute.Key("toolwire.hook.decision")
	errValidation     = "validation_error"
	errHook           = "hook_error"
	spanQueueWait     = "queue_wait"
	spanValidate      = "validate"
	spanPermission    = "permission"
	spanRunToolPrefix = "run_tool "
	spanHookPrefix    = "hook "
)

// telemetry holds an executor's tracer and instruments.
type telemetry struct {
	tracer  trace.Tracer
	content bool // record tool inputs and results on run_tool spans

	duration    metric.Float64Histogram
	queueWait   metric.Float64Histogram
	inFlight    metric.Int64UpDownCounter
	aborts      metric.Int64Counter
	outputBytes metric.Int64Counter
	decisions   metric.Int64Counter

	mu    sync.Mutex // guards attrs
	attrs map[attrsKey]metric.MeasurementOption
}

// attrsKey names the attributes of a measurement: one or two bounded
// values under the given keys.
type attrsKey struct {
	k1, k2 attribute.Key
	v1, v2 string
}

// with returns the measurement option carrying key's attributes. The
// values are few (tool names, outcomes, reasons), so each attribute set is
// built once and then shared, sparing every measurement an allocation.
func (t *telemetry) with(key attrsKey) metric.MeasurementOption {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o, ok := t.attrs[key]; ok {
		return o
	}
	kvs := []attribute.KeyValue{key.k1.String(key.v1)}
	if key.k2 != "" {
		kvs = append(kvs, key.k2.String(key.v2))
	}
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	t.attrs[key] = o
	return o
}

// toolAttrs is the option of a measurement labelled with a tool name.
func (t *telemetry) toolAttrs(toolName string) metric.MeasurementOption {
	return t.with(attrsKey{k1: keyToolName, v1: toolName})
}

// durationBuckets are histogram bounds in seconds, from a fast Read to a
// long Bash command.
var durationBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// newTelemetry takes the tracer and creates the instruments from the
// global providers as they are now.
func newTelemetry(content bool) (*telemetry, error) {
	m := otel.Meter(instrumentationName)
	t := &telemetry{tracer: otel.Tracer(instrumentationName), content: content, attrs: make(map[attrsKey]metric.MeasurementOption)}
	var errs [6]error
	// The GenAI conventions define no metric for tool calls: ours is in
	// toolwire's namespace.
	t.duration, errs[0] = m.Float64Histogram("toolwire.tool.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a tool call's arrival to its result."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	t.queueWait, errs[1] = m.Float64Histogram("toolwire.tool.queue_wait", metric.WithUnit("s"),
		metric.WithDescription("Time a tool call waited in the session's queue before it started."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	t.inFlight, errs[2] = m.Int64UpDownCounter("toolwire.tool.in_flight", metric.WithUnit("{call}"),
		metric.WithDescription("Tool calls running (left the queue, no result yet)."))
	t.aborts, errs[3] = m.Int64Counter("toolwire.tool.aborts", metric.WithUnit("{call}"),
		metric.WithDescription("Tool calls stopped by an abort, a sibling's failure or the session's end."))
	t.outputBytes, errs[4] = m.Int64Counter("toolwire.tool.output_bytes", metric.WithUnit("By"),
		metric.WithDescription("Bytes of tool_result content returned."))
	t.decisions, errs[5] = m.Int64Counter("toolwire.permission.decisions", metric.WithUnit("{decision}"),
		metric.WithDescription("Permission decisions on tool calls."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("executor metrics: %w", err)
	}
	return t, nil
}

// traceContentFromEnv reports whether TraceContentEnv asks for content.
func traceContentFromEnv() bool {
	on, _ := strconv.ParseBool(strings.TrimSpace(os.Getenv(TraceContentEnv)))
	return on
}

// startCall starts the run_tool span of use at its arrival. The parent is
// the W3C context use carries, linked to the span of ctx (the stream's);
// without one, the span of ctx. Only the span context of ctx is kept: the
// call outlives a stream that breaks.
func (t *telemetry) startCall(ctx context.Context, sessionID string, use ToolUse, at time.Time, duplicate bool) (context.Context, trace.Span) {
	stream := trace.SpanContextFromContext(ctx)
	parent := trace.ContextWithSpanContext(context.Background(), stream)
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(at)}
	if use.TraceParent != "" {
		carried := propagation.TraceContext{}.Extract(context.Background(),
			propagation.MapCarrier{"traceparent": use.TraceParent, "tracestate": use.TraceState})
		if sc := trace.SpanContextFromContext(carried); sc.IsValid() {
			parent = carried
			if stream.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: stream}))
			}
		}
	}
	callCtx, span := t.tracer.Start(parent, spanRunToolPrefix+use.Name, opts...)
	if span.IsRecording() {
		span.SetAttributes(keyToolName.String(use.Name), keyCallID.String(use.ID), keySessionID.String(sessionID))
		if duplicate {
			span.SetAttributes(keyDuplicate.Bool(true))
		}
		if t.content {
			span.SetAttributes(keyArguments.String(clip(use.Input)))
		}
	}
	return callCtx, span
}

// endCall ends a run_tool span with the call's result.
func (t *telemetry) endCall(span trace.Span, cr *CallResult) {
	if !span.IsRecording() {
		span.End()
		return
	}
	outcome := cr.Result.FinalOutcome().String()
	span.SetAttributes(keyOutcome.String(outcome))
	if cr.Result.IsError {
		span.SetAttributes(keyErrorType.String(outcome))
		span.SetStatus(codes.Error, "tool call ended with outcome "+outcome)
	}
	if t.content {
		span.SetAttributes(keyResult.String(clip(resultText(cr.Result))))
	}
	span.End(trace.WithTimestamp(cr.FinishedAt))
}

// recordResult records the metrics of a finished call.
func (t *telemetry) recordResult(ctx context.Context, toolName string, cr *CallResult) {
	t.duration.Record(ctx, cr.FinishedAt.Sub(cr.ReceivedAt).Seconds(),
		t.with(attrsKey{k1: keyToolName, v1: toolName, k2: keyOutcome, v2: cr.Result.FinalOutcome().String()}))
	var n int
	for _, c := range cr.Result.Content {
		n += len(c.Text) + len(c.Data)
	}
	t.outputBytes.Add(ctx, int64(n), t.toolAttrs(toolName))
}

// recordDecision records a permission decision on the permission span and
// in the decisions metric.
func (t *telemetry) recordDecision(ctx context.Context, span trace.Span, v permissionVerdict) {
	if v.behavior == "" {
		return // interrupted before anything decided
	}
	t.decisions.Add(ctx, 1, t.with(attrsKey{k1: keyPermBehavior, v1: v.behavior, k2: keyPermDecidedBy, v2: v.by}))
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(keyPermBehavior.String(v.behavior), keyPermDecidedBy.String(v.decidedBy))
	if v.rule != "" {
		span.SetAttributes(keyPermRule.String(v.rule))
	}
	if v.behavior == "ask" {
		span.SetAttributes(keyPermGranted.Bool(v.granted))
	}
}

// fail marks span as failed with errType.
func fail(span trace.Span, errType, msg string) {
	span.SetAttributes(keyErrorType.String(errType))
	span.SetStatus(codes.Error, msg)
}

// mcpTool is the metric label of every MCP tool: their names come from
// the servers a client configures, so they are not bounded.
const mcpTool = "_MCP"

// metricToolName is the tool name label of c.
func (c *call) metricToolName() string {
	switch {
	case c.tool == nil:
		return otherTool
	case strings.HasPrefix(c.tool.spec.Name, mcpToolPrefix):
		return mcpTool
	}
	return c.tool.spec.Name
}

// resultText is the content of a result as text: text blocks as they are,
// images and documents as a short note.
func resultText(r *tool.Result) string {
	var b strings.Builder
	for _, c := range r.Content {
		if !c.IsText() {
			fmt.Fprintf(&b, "[%s, %d bytes]", c.MediaType, len(c.Data))
			continue
		}
		b.WriteString(c.Text)
	}
	return b.String()
}

// clip cuts s to maxTraceContent bytes at a character boundary, saying how
// much was left out.
func clip(s string) string {
	if len(s) <= maxTraceContent {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	cut := maxTraceContent
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "\uFFFD") + fmt.Sprintf("… [%d more bytes]", len(s)-cut)
}
