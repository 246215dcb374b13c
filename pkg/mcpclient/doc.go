// Package mcpclient turns the MCP servers configured for a session into
// tools of the session's pool, named mcp__<server>__<tool> as Claude Code
// names them.
//
// A Set is the MCP servers of one session: the operator's (every session
// gets them) and the session's own. Start connects to all of them at once
// and waits, at most the start timeout, until each has answered initialize
// and listed its tools; a server whose configuration is unusable, that
// fails to start, or that is not ready in time is reported in Status and
// leaves the others alone. Stdio servers run through the session's
// sandbox.Runner, so they are confined exactly like the session's Bash
// commands (user, Landlock, network namespace, limits) and die with the
// session. HTTP servers are reached by the executor itself; a session's
// own HTTP servers are held to loopback addresses when the session's
// network policy is "none".
//
// Each MCP tool is a tool.Tool: its input schema and description come from
// the server, it is concurrency-safe when the server annotates it
// readOnlyHint, and a call is a tools/call request with the tool_use id as
// progress token and the caller's W3C trace context in _meta. Progress
// notifications become tool.Progress, cancelling the call's context sends
// notifications/cancelled, and the result's content (text, images,
// embedded resources, structured content) becomes the tool_result, cut to
// the output cap (25,000 tokens by default, as Claude Code) with the whole
// output saved in the session's output directory. A server that dies is
// started again for the next call; tools/list_changed refreshes the tools
// and calls Options.OnChange.
//
// The package knows nothing of gRPC or of the executor's pipeline:
// permissions, hooks, scheduling and schema validation happen around its
// tools as around any other.
//
// Why one package of this size (about 1,400 lines): configuration,
// start-up, restart, the call and the mapping of results are one server's
// life cycle, and each needs the server's connection state.
package mcpclient
