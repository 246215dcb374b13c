// Package rpcerr gives the gRPC errors of toolwire's two services a stable,
// machine-readable reason, and lets clients read it back.
//
// Every status ExecutorService and OrchestratorService return carries a
// google.rpc.ErrorInfo detail whose Domain is "toolwire.dev" and whose
// Reason is one of the constants below, with metadata where it helps (the
// session id, the offending field). A client decides by Reason, never by
// the status message, which is for people and may change. The status code
// stays the coarse class (retry, fix the request, re-authenticate); the
// reason says exactly what happened.
//
// Statuses made by gRPC itself rather than by our handlers — a connection
// that broke (Unavailable), a deadline the client set, a message above the
// size limit (ResourceExhausted), an unknown method (Unimplemented) — have
// no ErrorInfo: Reason returns "" and the code is all there is.
//
// The servers' edges (pkg/execgrpc, pkg/orchgrpc, pkg/rpcauth,
// pkg/rpcserver) build statuses with New and Error; docs/protocol.md lists
// every reason with its code and what a client should do.
package rpcerr

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Domain is the ErrorInfo domain of every reason in this package.
const Domain = "toolwire.dev"

// Reasons of the session life cycle.
const (
	// SessionNotFound (NotFound): no session has that id, or the
	// executor's retention window for it expired.
	SessionNotFound = "SESSION_NOT_FOUND"
	// SessionExists (AlreadyExists): a session with that id exists.
	SessionExists = "SESSION_EXISTS"
	// SessionBusy (FailedPrecondition): the session is running a turn.
	SessionBusy = "SESSION_BUSY"
	// RewindFailed (FailedPrecondition): the files of a rewind could not
	// all be restored (a checkpoint was dropped, a deny rule refused a
	// file), so the conversation was not cut.
	RewindFailed = "REWIND_FAILED"
	// SessionClosed (FailedPrecondition from the executor, Unavailable from
	// the orchestrator): the session has ended or is ending.
	SessionClosed = "SESSION_CLOSED"
	// SessionSuperseded (Aborted): another stream resumed the session.
	SessionSuperseded = "SESSION_SUPERSEDED"
	// SessionSetupFailed (FailedPrecondition): the executor could not set
	// up the session's sandbox or scratch space.
	SessionSetupFailed = "SESSION_SETUP_FAILED"
	// WorkspaceInvalid (FailedPrecondition): the requested workspace is
	// outside the executor's root or cannot be used.
	WorkspaceInvalid = "WORKSPACE_INVALID"
)

// Reasons for a request the client must change.
const (
	// InvalidFirstMessage (InvalidArgument): a stream's first message is
	// not the one that opens it (Open or Resume; Attach).
	InvalidFirstMessage = "INVALID_FIRST_MESSAGE"
	// UnexpectedMessage (InvalidArgument): a message that only opens a
	// stream came later, or the message kind is unknown.
	UnexpectedMessage = "UNEXPECTED_MESSAGE"
	// InvalidOpen (InvalidArgument): Open's settings are malformed or do
	// not compile (rules, hooks).
	InvalidOpen = "INVALID_OPEN"
	// PermissionModeDisabled (InvalidArgument): the session asks for a
	// permission mode the executor's operator disabled.
	PermissionModeDisabled = "PERMISSION_MODE_DISABLED"
	// InvalidToolUse (InvalidArgument): a ToolUse lacks its id.
	InvalidToolUse = "INVALID_TOOL_USE"
	// InvalidArgument (InvalidArgument): a malformed session id or
	// session configuration.
	InvalidArgument = "INVALID_ARGUMENT"
)

// Reasons of the services' own state.
const (
	// Draining (Unavailable): the executor is shutting down and takes no
	// new sessions; open the session on another executor.
	Draining = "DRAINING"
	// ShuttingDown (Unavailable): the orchestrator is shutting down.
	ShuttingDown = "SHUTTING_DOWN"
	// ExecutorUnavailable (Unavailable): the orchestrator cannot reach the
	// session's executor.
	ExecutorUnavailable = "EXECUTOR_UNAVAILABLE"
	// ExecutorRefused (FailedPrecondition): the executor refused the
	// orchestrator's own credentials; metadata executor_reason says how.
	ExecutorRefused = "EXECUTOR_REFUSED"
	// ModelCredentialsMissing (FailedPrecondition): the orchestrator has no
	// API key for the model.
	ModelCredentialsMissing = "MODEL_CREDENTIALS_MISSING"
	// SandboxRequirementUnmet (FailedPrecondition): the executor's Hello
	// does not show a protection the client or the orchestrator requires
	// (--require-sandbox, SessionConfig.require_sandbox); metadata missing
	// lists the requirements not met, comma-separated.
	SandboxRequirementUnmet = "SANDBOX_REQUIREMENT_UNMET"
)

// Reasons of authentication (all Unauthenticated).
const (
	// TokenMissing: the server wants a bearer token and got none.
	TokenMissing = "TOKEN_MISSING"
	// TokenInvalid: the bearer token is wrong or malformed.
	TokenInvalid = "TOKEN_INVALID"
	// ClientCertRequired: the server wants mutual TLS and the connection
	// has no client certificate.
	ClientCertRequired = "CLIENT_CERT_REQUIRED"
	// ClientCertInvalid: the client certificate is expired, from another
	// CA, or not meant for client authentication.
	ClientCertInvalid = "CLIENT_CERT_INVALID"
)

// Reasons that mirror a context or a bug.
const (
	// Canceled (Canceled): the RPC was cancelled.
	Canceled = "CANCELED"
	// DeadlineExceeded (DeadlineExceeded): the RPC's deadline passed.
	DeadlineExceeded = "DEADLINE_EXCEEDED"
	// Internal (Internal): a bug, or a panic recovered in a handler.
	Internal = "INTERNAL"
)

// New returns a status with code and message msg that carries an ErrorInfo
// with reason and the metadata given as key, value pairs (a key without a
// value is dropped).
func New(code codes.Code, reason, msg string, kv ...string) *status.Status {
	info := &errdetails.ErrorInfo{Reason: reason, Domain: Domain}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			continue
		}
		if info.Metadata == nil {
			info.Metadata = make(map[string]string)
		}
		info.Metadata[kv[i]] = kv[i+1]
	}
	s := status.New(code, msg)
	withInfo, err := s.WithDetails(info)
	if err != nil {
		// Only a nil or unmarshalable detail fails, and an ErrorInfo is
		// neither; keep the bare status rather than lose the error.
		return s
	}
	return withInfo
}

// Error is New as an error.
func Error(code codes.Code, reason, msg string, kv ...string) error {
	return New(code, reason, msg, kv...).Err()
}

// Info returns the toolwire ErrorInfo of err, which may wrap a status
// error, or nil when it has none.
func Info(err error) *errdetails.ErrorInfo {
	var se interface{ GRPCStatus() *status.Status }
	if err == nil || !errors.As(err, &se) {
		return nil
	}
	for _, d := range se.GRPCStatus().Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain {
			return info
		}
	}
	return nil
}

// Reason returns the toolwire reason of err, or "" when it carries none
// (not a status, or a status gRPC made itself).
func Reason(err error) string {
	return Info(err).GetReason()
}

// Metadata returns the value of key in err's ErrorInfo metadata, or "".
func Metadata(err error, key string) string {
	return Info(err).GetMetadata()[key]
}
