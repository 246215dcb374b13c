// Package orchestrator holds conversations with the model and drives an
// executor for their tool calls: Claude Code's query loop.
//
// A Session streams each model response and forwards every tool_use block
// to its executor the moment the block is complete, long before the message
// ends; when the model stops for tool use it waits for every Result, sends
// them back as one user message (one tool_result per tool_use, matched by
// id) and asks again, until the model ends its turn, a max-turns guard trips,
// an error ends the turn or the client interrupts. A stream cut keeps the
// complete tool_use blocks; interrupts abort running calls; in every case
// each tool_use of the transcript gets a tool_result, so the conversation
// can always go on. Background-task notifications from the executor reach
// the model as a tagged text block in the next user message.
//
// Transcripts are appended to JSONL files (Store) message by message, so an
// Orchestrator that restarts resumes every session where it stopped.
// Clients follow a session through its ordered Events.
//
// The package talks to executors only through the generated
// ExecutorService client and to the model only through pkg/model. It holds
// no gRPC server code: pkg/orchgrpc exposes it as OrchestratorService, and
// cmd/orchestrator wires both together.
package orchestrator
