package orchestrator

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolwire/toolwire/pkg/execapi"
)

// instrumentation is the name of this package's tracer.
const instrumentation = "github.com/toolwire/toolwire/pkg/orchestrator"

// Attribute keys: the OpenTelemetry semantic conventions (v1.41.0, the
// newest of the otel module's semconv packages that holds the GenAI
// conventions), and ours where they have none.
const (
	attrOperation      = semconv.GenAIOperationNameKey
	attrAgentName      = semconv.GenAIAgentNameKey
	attrConversationID = semconv.GenAIConversationIDKey
	attrToolName       = semconv.GenAIToolNameKey
	attrToolCallID     = semconv.GenAIToolCallIDKey
	attrToolType       = semconv.GenAIToolTypeKey
	attrErrorType      = semconv.ErrorTypeKey
	attrStopReason     = attribute.Key("toolwire.turn.stop_reason")
	attrRequests       = attribute.Key("toolwire.turn.requests")
	attrOutcome        = attribute.Key("toolwire.outcome")
)

func tracer() trace.Tracer { return otel.Tracer(instrumentation) }

// startTurn opens the span of one conversation turn ("invoke_agent"); the
// model requests and tool calls of the turn are its children.
func (s *Session) startTurn(ctx context.Context) (context.Context, trace.Span) {
	return tracer().Start(ctx, "invoke_agent", trace.WithAttributes(
		attrOperation.String("invoke_agent"),
		attrAgentName.String("toolwire"),
		attrConversationID.String(s.id),
	))
}

// endTurn records how the turn ended and closes its span.
func endTurn(span trace.Span, res *TurnResult) {
	span.SetAttributes(attrStopReason.String(string(res.StopReason)), attrRequests.Int(res.Requests))
	if res.StopReason == StopError || res.StopReason == StopMaxTurns {
		span.SetAttributes(attrErrorType.String(string(res.StopReason)))
		msg := string(res.StopReason)
		if res.Err != nil {
			msg = res.Err.Error()
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End()
}

// startToolCall opens the span of one tool call ("execute_tool {name}").
// The link sends the call with the returned context's trace context, so
// the executor's spans of the call are its children although many calls
// share one stream.
func startToolCall(ctx context.Context, use execapi.ToolUse) (context.Context, trace.Span) {
	return tracer().Start(ctx, "execute_tool "+use.Name, trace.WithAttributes(
		attrOperation.String("execute_tool"),
		attrToolName.String(use.Name),
		attrToolCallID.String(use.ID),
		attrToolType.String("function"),
	))
}

// endToolCall records a call's result on its span and closes it.
func endToolCall(span trace.Span, r *execapi.CallResult) {
	outcome := r.FinalOutcome().String()
	span.SetAttributes(attrOutcome.String(outcome))
	if r.IsError {
		span.SetAttributes(attrErrorType.String(outcome))
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}
