package egress

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// instrumentationName names the package's meter.
const instrumentationName = "github.com/toolwire/toolwire/pkg/egress"

// Outcomes of a connection, the values of toolwire.egress.outcome.
const (
	outcomeAllowed = "allowed"
	outcomeDenied  = "denied"
	outcomeFailed  = "failed" // allowed, but the name did not resolve or the dial failed
)

var (
	keyOutcome = attribute.Key("toolwire.egress.outcome")
	keyReason  = attribute.Key("toolwire.egress.reason")
)

// telemetry counts connections through the proxy, by outcome and, for
// refusals, reason: both take a few fixed values.
type telemetry struct {
	connections metric.Int64Counter
}

// newTelemetry takes the counter from the global meter provider as it is
// now. Without one it costs next to nothing; an instrument that cannot be
// made is replaced by a no-op one, never a failure of the proxy.
func newTelemetry() *telemetry {
	c, _ := otel.Meter(instrumentationName).Int64Counter("toolwire.egress.connections", metric.WithUnit("{connection}"),
		metric.WithDescription("Connections tools asked the egress proxy for, by outcome (allowed, denied, failed) and reason of a refusal."))
	return &telemetry{connections: c}
}

func (t *telemetry) count(ctx context.Context, outcome string, reason Reason) {
	if t.connections == nil {
		return
	}
	attrs := []attribute.KeyValue{keyOutcome.String(outcome)}
	if reason != "" {
		attrs = append(attrs, keyReason.String(string(reason)))
	}
	t.connections.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attrs...))
}
