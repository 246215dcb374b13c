package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/propagation"

	executorv1 "github.com/toolwire/toolwire/gen/toolwire/executor/v1"
)

// InjectToolUse writes the W3C trace context of ctx's span into the
// ToolUse's traceparent and tracestate, so that the executor's run_tool
// span of this call becomes a child of that span. One Execute stream
// carries the calls of many turns, so each ToolUse carries its own parent.
// Without a valid span in ctx the fields are left as they are.
//
// The W3C format is used whatever global propagator is installed: the
// fields are defined as W3C traceparent and tracestate.
func InjectToolUse(ctx context.Context, u *executorv1.ToolUse) {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	if tp := c.Get("traceparent"); tp != "" {
		u.Traceparent, u.Tracestate = tp, c.Get("tracestate")
	}
}
