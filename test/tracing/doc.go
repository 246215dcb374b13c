// Package tracing holds the end-to-end test of toolwire's traces; it has no
// code of its own besides its helper packages jaegertest (a Jaeger v2 per
// test, and a client of its query API) and spancontract (the span contract
// and a scripted conversation that exercises it).
//
// The test builds toolsvc and orchestrator, starts Jaeger (built by
// scripts/jaeger) on loopback, starts `toolsvc serve` on loopback TCP, runs
// one conversation with `orchestrator -p` against a scripted fake of the
// Messages API, both services exporting over OTLP as the OTEL_* environment
// says, and reads the conversation's trace back from Jaeger's query API. It
// fails, never skips, when the Jaeger binary is missing.
package tracing
