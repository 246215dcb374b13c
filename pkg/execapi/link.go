package execapi

import (
	"context"
	"time"
)

// EventFunc receives the events of a session, one at a time and in order,
// on the link's own goroutine, together with the link (to answer a
// permission request at once). It must not wait for the link's other
// methods that reconnect or close it.
type EventFunc func(Link, Event)

// Link is a client's connection to one session on one executor. It lives
// across breaks of the stream beneath it: Resume and Reconnect attach a new
// stream to the same Link, and the events the client missed in between are
// handed to its EventFunc as if they had never been missed.
//
// Its methods are safe for concurrent use.
type Link interface {
	// Hello is what the executor said when the current stream attached.
	Hello() Hello
	// Submit sends a call. The executor runs an id once per session, so a
	// call sent again after a Resume runs once. ctx carries the call's
	// trace context, not a deadline. A send that fails breaks the stream
	// (Broken closes), so that the caller resumes and sends again.
	Submit(ctx context.Context, use ToolUse) error
	// Abort stops calls.
	Abort(a Abort) error
	// Decide answers a permission request.
	Decide(d PermissionDecision) error
	// Background asks a running foreground Bash call to go on in the
	// background; a BackgroundAck event answers.
	Background(b Background) error
	// ListCheckpoints asks for the session's file checkpoints; a
	// CheckpointList event answers.
	ListCheckpoints(r ListCheckpoints) error
	// RestoreCheckpoint restores the session's files to their state before
	// a tool_use; a RestoreResult event answers.
	RestoreCheckpoint(r RestoreCheckpoint) error
	// Broken is closed when the current stream has ended; after a Resume
	// or Reconnect it is the new stream's.
	Broken() <-chan struct{}
	// Resume reattaches to the session after the stream broke, receiving
	// the events missed in between. It never opens a new session: calls
	// already sent may have run and must not run again. It retries for
	// window (capped by Hello.Retention) and gives up at once, with
	// ErrSessionNotFound or ErrSessionClosed, when the executor no longer
	// has the session. A stream that still works is kept.
	Resume(ctx context.Context, window time.Duration) error
	// Reconnect reattaches after the stream broke when no call waits for
	// a result (between turns): it resumes the session, or opens it anew
	// with the link's OpenRequest when the executor no longer has it.
	// Failures that may pass by themselves (ErrUnavailable, ErrDraining)
	// are retried for window; zero makes one attempt.
	Reconnect(ctx context.Context, window time.Duration) error
	// Close half-closes the stream, which ends the executor's session once
	// its calls have their results, and waits a bounded time for that.
	Close()
}
