package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/pkg/execapi"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
)

// Store keeps conversations where an Orchestrator can find them again:
// each session's transcript (records only ever appended), its settings, the
// executor session it is bound to with the sequence number of the newest
// executor event handled, the lease of the replica running its turn, and
// the events of its turns for clients that attach anywhere.
//
// FileStore keeps them in files for one process (orchestrator -p and a
// single serve); pkg/orchestrator/pgstore keeps them in PostgreSQL, shared
// by replicas. storetest holds the suite both pass.
type Store interface {
	// Create starts the transcript of a new session: ErrExists when the id
	// has one.
	Create(ctx context.Context, id string, cfg SessionConfig, created time.Time) error
	// Append adds one record to a session's transcript.
	Append(ctx context.Context, id string, rec transcript.Record) error
	// Load reads a session's transcript: ErrNotFound when there is none.
	Load(ctx context.Context, id string) (*transcript.Transcript, error)
	// List describes every stored session, most recently updated first.
	List(ctx context.Context) ([]transcript.Summary, error)
	// Remove deletes a session and all the store holds of it: ErrNotFound
	// when there is none.
	Remove(ctx context.Context, id string) error
	// Release frees what this process holds open for a session (a file);
	// the session stays stored.
	Release(id string)

	// Bind records the executor session a conversation runs on.
	Bind(ctx context.Context, id string, b Binding) error
	// Binding returns the executor session a conversation runs on; the
	// zero Binding when it was never bound.
	Binding(ctx context.Context, id string) (Binding, error)

	// Acquire gives holder the session's lease for ttl, to run a turn: a
	// *LeaseError (ErrBusy) when another holder has it, expired or not (an
	// expired lease is a turn whose replica is gone: TakeOver resumes it).
	// A holder that has the lease renews it.
	Acquire(ctx context.Context, id, holder string, ttl time.Duration) error
	// Renew extends holder's lease by ttl: ErrLeaseLost when holder no
	// longer has it.
	Renew(ctx context.Context, id, holder string, ttl time.Duration) error
	// TakeOver gives holder a lease that expired, and reports whether it
	// did (false when it is free, unexpired, or another took it first).
	TakeOver(ctx context.Context, id, holder string, ttl time.Duration) (bool, error)
	// EndLease frees holder's lease: the turn is over. A lease holder does
	// not have is left alone.
	EndLease(ctx context.Context, id, holder string) error
	// Expired returns the sessions whose lease has expired: turns whose
	// replica stopped renewing.
	Expired(ctx context.Context) ([]string, error)
	// Lease returns the session's lease holder and expiry; an empty holder
	// when no turn runs.
	Lease(ctx context.Context, id string) (holder string, expiry time.Time, err error)

	// AddEvent stores a session event. Its Seq must be the next of the
	// session (one above the last stored): ErrEventConflict otherwise.
	// A non-zero ExecSeq is recorded with it as the binding's sequence.
	AddEvent(ctx context.Context, id string, ev StoredEvent) error
	// Events returns up to limit stored events with Seq above after, in
	// order.
	Events(ctx context.Context, id string, after uint64, limit int) ([]StoredEvent, error)
	// LastEvent returns the Seq of the session's newest stored event (0
	// when none).
	LastEvent(ctx context.Context, id string) (uint64, error)

	// Notify sends a note to every replica that listens (Listen), this one
	// included: how an interrupt or a permission decision that reaches one
	// replica gets to the replica running the session's turn.
	Notify(ctx context.Context, n Note) error
	// Listen calls f with every note sent, from the moment it calls ready,
	// until ctx ends or the store fails.
	Listen(ctx context.Context, ready func(), f func(Note)) error

	// Shared reports whether other processes use the store too (replicas):
	// sessions then keep their events in it, run each turn under a lease,
	// and take turns over from replicas that are gone.
	Shared() bool
	// Close releases the store.
	Close() error
}

// Binding is the executor session a conversation runs on.
type Binding struct {
	// Executor is the executor's address.
	Executor string
	// SessionID is the session's id on the executor.
	SessionID string
	// Seq is the sequence number of the newest executor event handled: a
	// replica that takes the conversation over resumes after it.
	Seq uint64
}

// Note is a request for the replica that runs a session's turn.
type Note struct {
	// SessionID names the session.
	SessionID string `json:"session_id"`
	// Interrupt, when set, stops the turn with this reason.
	Interrupt *string `json:"interrupt,omitempty"`
	// Decision, when set, answers a permission request of the turn.
	Decision *execapi.PermissionDecision `json:"decision,omitempty"`
}

// StoredEvent is a session event as a store keeps it.
type StoredEvent struct {
	// Seq is the event's sequence number in its session.
	Seq uint64
	// Data is the event, encoded by EncodeEvent.
	Data []byte
	// ExecSeq, when not zero, is the executor event the session event
	// came from; the binding's sequence moves to it with the event.
	ExecSeq uint64
}

// Errors of a Store.
var (
	// ErrLeaseLost: the lease of a turn is another replica's now.
	ErrLeaseLost = errors.New("the session's lease was lost")
	// ErrEventConflict: an event's sequence number is not the next one.
	ErrEventConflict = errors.New("event sequence conflict")
)

// LeaseError is ErrBusy with who holds the lease.
type LeaseError struct {
	// Holder is the replica running the session's turn.
	Holder string
	// Expiry is when its lease ends unless renewed.
	Expiry time.Time
}

func (e *LeaseError) Error() string {
	return fmt.Sprintf("%s: replica %s holds its lease until %s", ErrBusy, e.Holder, e.Expiry.UTC().Format(time.RFC3339Nano))
}

// Unwrap makes a LeaseError ErrBusy.
func (e *LeaseError) Unwrap() error { return ErrBusy }
