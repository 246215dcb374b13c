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
//
// Why one package of this size (about 1,500 lines): the server and the
// client share the message conversion and the one error mapping, which
// must stay each other's inverse; keeping both sides here is what keeps
// the Execute protocol's edge in a single place.
package execgrpc
