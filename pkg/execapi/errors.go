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
)
