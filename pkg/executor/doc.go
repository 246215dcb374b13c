// Package executor is the tool-call pipeline of toolsvc, free of gRPC.
//
// An Executor owns the tool registry and the sessions. A Session receives the
// model's tool_use blocks one by one and takes each through the same steps
// Claude Code does: parse and schema-check the input, queue it with the
// concurrency rules (pkg/queue), then, when it leaves the queue, run the
// tool's own checks, the permission decision, the PreToolUse hooks, the tool
// itself and the PostToolUse hooks. Whatever happens on the way (bad input,
// unknown tool, denial, abort, timeout, panic, session end) the call ends in
// exactly one Result.
//
// A Session emits Events (Accepted, Started, Progress, PermissionRequest,
// Result, ...) into an outbox that numbers them and keeps a bounded log, so a
// client that reconnects can resume from the last sequence number it saw.
// The outbox never grows with a call's output: pending progress of a call is
// merged, and what does not fit is counted as dropped (the Result and the
// output file still hold it).
//
// Each call is traced with the OpenTelemetry API (a "run_tool <tool>" span
// with queue_wait, validate, permission and "hook <event>" children, the
// parent taken from the ToolUse's W3C trace context) and measured
// (toolwire.tool.*, toolwire.permission.*);
// see telemetry.go. Without installed providers both are no-ops.
//
// Why one package of this size (about 2,200 lines): the session, its
// outbox and the pipeline steps share the rule that every call ends in
// exactly one Result, and the locks that keep it; split across packages,
// that rule would have to be kept by their callers. The tools, queue,
// permissions, hooks and sandbox it drives are packages of their own.
package executor
