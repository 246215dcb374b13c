package model

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
	"go.opentelemetry.io/otel/trace"
)

// instrumentation is the name of this package's tracer and meter.
const instrumentation = "github.com/toolwire/toolwire/pkg/model"

// The spans and metrics follow the OpenTelemetry GenAI semantic
// conventions, with the keys and instruments of the otel module's semconv
// v1.41.0: the newest of its semconv packages that holds them (v1.42.0
// moved them out).

// meters holds the model client's instruments; without a configured
// meter provider they record nothing.
type meters struct {
	duration genaiconv.ClientOperationDuration
	tokens   genaiconv.ClientTokenUsage
}

func newMeters() meters {
	m := otel.Meter(instrumentation)
	var ms meters
	// Errors only come from an invalid instrument name; the conventions'
	// names are valid, and a failed instrument records nothing.
	ms.duration, _ = genaiconv.NewClientOperationDuration(m)
	ms.tokens, _ = genaiconv.NewClientTokenUsage(m)
	return ms
}

// startChat opens the span of one model request ("chat {model}").
func startChat(ctx context.Context, req Request) (context.Context, trace.Span) {
	return otel.Tracer(instrumentation).Start(ctx, "chat "+req.Model,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			semconv.GenAIOperationNameChat,
			semconv.GenAIProviderNameAnthropic,
			semconv.GenAIRequestModel(req.Model),
			semconv.GenAIRequestMaxTokens(req.MaxTokens),
		))
}

// endChat records the outcome of a model request on its span and in the
// metrics: gen_ai.client.operation.duration (retries included) and
// gen_ai.client.token.usage.
func (ms meters) endChat(ctx context.Context, span trace.Span, req Request, start time.Time, resp *Response, err error) {
	common := []attribute.KeyValue{ms.duration.AttrRequestModel(req.Model)}
	if resp != nil {
		span.SetAttributes(
			semconv.GenAIResponseID(resp.ID),
			semconv.GenAIResponseModel(resp.Model),
			semconv.GenAIUsageInputTokensKey.Int64(resp.Usage.InputTokens),
			semconv.GenAIUsageOutputTokensKey.Int64(resp.Usage.OutputTokens),
		)
		if resp.StopReason != "" {
			span.SetAttributes(semconv.GenAIResponseFinishReasons(string(resp.StopReason)))
		}
		ms.tokens.Record(ctx, resp.Usage.InputTokens, genaiconv.OperationNameChat, genaiconv.ProviderNameAnthropic, genaiconv.TokenTypeInput, common...)
		ms.tokens.Record(ctx, resp.Usage.OutputTokens, genaiconv.OperationNameChat, genaiconv.ProviderNameAnthropic, genaiconv.TokenTypeOutput, common...)
	}
	if err != nil {
		kind := errorType(err)
		span.SetAttributes(semconv.ErrorTypeKey.String(kind))
		span.SetStatus(codes.Error, kind)
		common = append(common, ms.duration.AttrErrorType(genaiconv.ErrorTypeAttr(kind)))
	}
	ms.duration.Record(ctx, time.Since(start).Seconds(), genaiconv.OperationNameChat, genaiconv.ProviderNameAnthropic, common...)
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
	return semconv.ErrorTypeOther.Value.AsString()
}
