package execapi

import "errors"

// Error classes of an executor session. The executor returns them; the gRPC
// edge carries each as a status reason (pkg/rpcerr) and gives the client
// the same class back, so both sides test them with errors.Is.
var (
	// ErrDraining: the executor takes no new sessions (it is shutting
	// down); another executor may.
	ErrDraining = errors.New("executor is draining")
	// ErrSessionExists: an Open named a session the executor has already.
	ErrSessionExists = errors.New("session already exists")
	// ErrSessionNotFound: the executor does not have the session (never
	// opened, its retention ran out, or the executor restarted).
	ErrSessionNotFound = errors.New("session not found")
	// ErrSessionClosed: the session has ended or is ending.
	ErrSessionClosed = errors.New("session closed")
	// ErrUnavailable: the executor could not be reached or did not answer
	// in time. Unlike a refusal, it may pass by itself.
	ErrUnavailable = errors.New("executor unreachable")
	// ErrUnsendable: a ToolUse the transport cannot carry (input that is
	// not UTF-8, or a message past its size limit). Sending it would end
	// the whole stream, so the link refuses it and the client answers the
	// call itself, with the error's text as an invalid-input result.
	ErrUnsendable = errors.New("tool_use cannot be sent")
)

// UnsendableError is ErrUnsendable with what makes the call unsendable,
// in the words of an invalid-input result.
type UnsendableError struct {
	// Text says what is wrong with the call, without the
	// <tool_use_error> tags.
	Text string
}

func (e *UnsendableError) Error() string { return ErrUnsendable.Error() + ": " + e.Text }

// Is makes errors.Is(err, ErrUnsendable) hold.
func (e *UnsendableError) Is(target error) bool { return target == ErrUnsendable }
