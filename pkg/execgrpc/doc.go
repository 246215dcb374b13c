// Package execgrpc is the gRPC edge of the executor, both sides of
// ExecutorService:
//
//   - Server serves it over pkg/executor;
//   - Client is what the orchestrator (or any Go client) uses: it lists an
//     executor's tools and opens execapi.Links to sessions, which resume a
//     broken stream where it stopped (replaying by sequence number), open
//     a session anew between turns when the executor lost it, inject each
//     call's W3C trace context, and turn status reasons into the error
//     classes of pkg/execapi;
//   - the conversion between the protobuf messages and pkg/execapi, with
//     the converters the orchestrator's edge needs for the executor
//     messages its own protocol carries;
//   - the one mapping from executor errors to gRPC status codes and
//     pkg/rpcerr reasons, and its inverse for the client;
//   - helpers that turn Results into Anthropic tool_result blocks.
package execgrpc
