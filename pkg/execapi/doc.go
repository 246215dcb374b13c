// Package execapi is the vocabulary of an executor session, shared by the
// executor (pkg/executor), its clients (pkg/orchestrator) and the gRPC edge
// that carries it between them (pkg/execgrpc): what a client asks for
// (OpenRequest, ToolUse, Abort, PermissionDecision), what a session reports
// (Event and its kinds: Hello, Accepted, Started, Progress,
// PermissionRequest, CallResult, AbortAck, task notices, MCPToolsChanged),
// the error classes both sides share, and Link, a client's connection to
// one session.
//
// Link is declared here, beside the types it carries, rather than in the
// orchestrator that uses it, for the reason database/sql/driver declares
// its interfaces: so that any package can implement it (the gRPC client in
// pkg/execgrpc, an in-process one) without importing its user.
//
// The package holds types, not behaviour. It imports the standard library
// and the domain packages whose types a session carries (pkg/tool,
// pkg/settings, pkg/mcpclient); never gRPC or generated code.
//
// Why one package of this size (about 500 lines): it is the whole vocabulary
// between an executor session and its client; both sides must see one
// definition of each request, event and error class.
package execapi
