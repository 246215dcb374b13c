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
// Conversations are kept in a Store message by message, so an Orchestrator
// that restarts resumes every session where it stopped: FileStore appends
// them to JSONL files (package transcript); a shared store
// (pkg/orchestrator/pgstore) lets replicas serve the same sessions, each
// turn under a lease, its events stored for clients on any replica, and a
// turn whose replica died taken over by another (replica.go). Clients
// follow a session through its ordered Events.
//
// The package talks to executors only through its Executor interface and
// the vocabulary of pkg/execapi (a session's Link: submit, abort, decide,
// events, resume), and to the model only through pkg/model; it imports no
// gRPC. cmd/orchestrator gives it pkg/execgrpc's client of ExecutorService,
// and pkg/orchgrpc exposes it as OrchestratorService.
//
// Its files follow its jobs: the Orchestrator and its sessions
// (orchestrator.go, session.go), the turn (turn.go) and the calls it waits
// for (calls.go), a session's link to its executor (executor.go), the
// events clients follow (events.go), and the tools it runs itself because
// they are conversation state (local.go): the task list (package
// tasklist) and Agent, whose subagents (agent.go; their types in package
// agents) run sub-conversations on the session's executor session or on
// sessions of their own on its pool.
//
// Why one package of this size (about 2,500 lines): the loop and what it
// guarantees, one tool_result for every tool_use whatever breaks, belong
// together, and a subagent is that loop again, under its Agent call;
// what could go without that, the transcript files, the task list, the
// agent types and the executor protocol, is in packages transcript,
// tasklist and agents and behind the Executor interface.
package orchestrator
