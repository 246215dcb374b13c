// Package execgrpc is the gRPC edge of the executor: the ExecutorService
// server over pkg/executor, the conversion between protobuf messages and the
// executor's types, the one mapping from executor errors to gRPC status
// codes and pkg/rpcerr reasons, and helpers clients use to turn Results
// into Anthropic tool_result blocks.
package execgrpc
