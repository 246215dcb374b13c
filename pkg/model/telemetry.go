package model

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// instrumentation is the name of this package's tracer and meter.
const instrumentation = "github.com/toolwire/toolwire/pkg/model"

// Attribute keys of the OpenTelemetry GenAI conventions used here.
const (
	attrOperation     = attribute.Key("gen_ai.operation.name")
	attrProvider      = attribute.Key("gen_ai.provider.name")
	attrRequestModel  = attribute.Key("gen_ai.request.model")
	attrMaxTokens     = attribute.Key("gen_ai.request.max_tokens")
	attrResponseModel = attribute.Key("gen_ai.response.model")
	attrResponseID    = attribute.Key("gen_ai.response.id")
	attrFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
	attrInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	attrTokenType     = attribute.Key("gen_ai.token.type")
	attrErrorType     = attribute.Key("error.type")
)

// meters holds the model client's instruments; without a configured
// meter provider they record nothing.
type meters struct {
	duration metric.Float64Histogram
	tokens   metric.Int64Histogram
}

func newMeters() meters {
	m := otel.Meter(instrumentation)
	var ms meters
	ms.duration, _ = m.Float64Histogram("gen_ai.client.operation.duration",
		metric.WithUnit("s"), metric.WithDescription("Duration of Messages API requests, retries included."))
	ms.tokens, _ = m.Int64Histogram("gen_ai.client.token.usage",
		metric.WithUnit("{token}"), metric.WithDescription("Tokens per Messages API request, by token type."))
	return ms
}

// startChat opens the span of one model request ("chat {model}").
func startChat(ctx context.Context, req Request) (context.Context, trace.Span) {
	return otel.Tracer(instrumentation).Start(ctx, "chat "+req.Model,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attrOperation.String("chat"),
			attrProvider.String("anthropic"),
			attrRequestModel.String(req.Model),
			attrMaxTokens.Int(req.MaxTokens),
		))
}

// endChat records the outcome of a model request on its span and in the
// metrics.
func (ms meters) endChat(ctx context.Context, span trace.Span, req Request, start time.Time, resp *Response, err error) {
	common := []attribute.KeyValue{attrOperation.String("chat"), attrProvider.String("anthropic"), attrRequestModel.String(req.Model)}
	if resp != nil {
		span.SetAttributes(
			attrResponseID.String(resp.ID),
			attrResponseModel.String(resp.Model),
			attrInputTokens.Int64(resp.Usage.InputTokens),
			attrOutputTokens.Int64(resp.Usage.OutputTokens),
		)
		if resp.StopReason != "" {
			span.SetAttributes(attrFinishReasons.StringSlice([]string{string(resp.StopReason)}))
		}
		ms.tokens.Record(ctx, resp.Usage.InputTokens, metric.WithAttributes(append(common, attrTokenType.String("input"))...))
		ms.tokens.Record(ctx, resp.Usage.OutputTokens, metric.WithAttributes(append(common, attrTokenType.String("output"))...))
	}
	if err != nil {
		kind := errorType(err)
		span.SetAttributes(attrErrorType.String(kind))
		span.SetStatus(codes.Error, kind)
		common = append(common, attrErrorType.String(kind))
	}
	ms.duration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(common...))
	span.End()
}

// errorType names a request's failure for error.type: the API's error type
// when it answered with one, else a coarse class.
func errorType(err error) string {
	var ae *APIError
	switch {
	case errors.As(err, &ae) && ae.Type != "":
		return ae.Type
	case errors.Is(err, ErrStreamCut):
		return "stream_cut"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "_OTHER"
}
