// Package orchgrpc is the gRPC edge of the orchestrator: it serves
// OrchestratorService over an orchestrator.Orchestrator, converting between
// the wire messages and the orchestrator's own types, and maps errors to
// status codes and pkg/rpcerr reasons in exactly one place (toStatus). An
// executor's refusal of the caller's request keeps its code and reason.
//
// It holds no conversation logic; that lives in pkg/orchestrator.
//
// Why one package of this size (about 500 lines): it is the one edge of
// OrchestratorService, conversion and error mapping included.
package orchgrpc
