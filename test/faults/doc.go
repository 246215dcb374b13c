// Package faults runs the orchestrator and executors as separate hosts and
// breaks the link between them while conversations run.
//
// Each executor (toolsvc) runs in a network namespace of its own, reached
// from the orchestrator over a veth pair with addresses of its own; the
// orchestrator runs in the test's namespace and talks to a scripted fake of
// the Messages API on loopback. The tests kill executors with SIGKILL, cut
// links (for less and for more than the executor's retention window),
// restart executors and the orchestrator, and drain an executor of a pool,
// while the model asks for many tool calls. A ledger check runs over every
// conversation: every tool_use got exactly one tool_result, no call ran
// twice (each Bash call appends one line to a file named after its id),
// and none was lost.
//
// The tests need root (network namespaces and veth pairs) and the ip
// command from iproute2.
package faults
