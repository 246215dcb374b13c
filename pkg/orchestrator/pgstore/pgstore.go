// Package pgstore keeps the conversations of orchestrator replicas in
// PostgreSQL (through pgx): an orchestrator.Store that several processes
// share, so that any replica serves any session and a turn whose replica
// dies is taken over by another.
//
// Each session is a row of sessions (its summary for listing, its binding
// to an executor session, the lease of the replica running its turn), the
// records of its transcript are rows of records, only ever inserted, and
// the events of its turns are rows of events, numbered without gaps. Times
// of leases are the database's, so the replicas' clocks do not matter.
// The schema is versioned in migrations/ and applied by Open.
//
// Why one package of this size (about 570 lines): it is one Store, and its
// queries, migrations and the lease they keep are one schema's reader and
// writer, tested by the same suite as the file store.
package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwire/toolwire/pkg/model"
	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/orchestrator/transcript"
)

// Store is an orchestrator.Store in PostgreSQL.
type Store struct {
	pool *pgxpool.Pool
	conn *pgx.ConnConfig // of the pool's connections, for Listen's own
}

// notesChannel is the NOTIFY channel of orchestrator.Notes.
const notesChannel = "toolwire_notes"

var _ orchestrator.Store = (*Store)(nil)

// Options tunes a Store.
type Options struct {
	// MaxConns caps the connection pool (pgxpool's default when zero:
	// the larger of 4 and the number of CPUs).
	MaxConns int32
	// Logger receives the migrations applied; nil discards.
	Logger *slog.Logger
}

// Open connects to the database at dsn (a postgres:// URL or key=value
// connection string), applies the migrations it lacks and returns the
// Store.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres connection string: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	applied, err := migrate(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres schema: %w", err)
	}
	if opts.Logger != nil && len(applied) > 0 {
		opts.Logger.Info("postgres schema migrated", "applied", applied)
	}
	return &Store{pool: pool, conn: cfg.ConnConfig}, nil
}

// Shared is true: replicas share the database.
func (st *Store) Shared() bool { return true }

// Close closes the connection pool.
func (st *Store) Close() error {
	st.pool.Close()
	return nil
}

func notFound(id string) error { return fmt.Errorf("%w: %s", orchestrator.ErrNotFound, id) }

// Create starts a session's row and its transcript's header record.
func (st *Store) Create(ctx context.Context, id string, cfg orchestrator.SessionConfig, created time.Time) error {
	if err := transcript.CheckID(id); err != nil {
		return err
	}
	rec := transcript.Record{Kind: transcript.KindSession, Time: created, ID: id, Config: &cfg}
	body, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode session record: %w", err)
	}
	conf, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode configuration: %w", err)
	}
	err = pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO sessions (id, created_at, updated_at, config, model, directory, executor)
			VALUES ($1, $2, $2, $3, $4, $5, $6)`, id, created, string(conf), cfg.Model, cfg.Directory, cfg.Executor); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO records (session_id, kind, body) VALUES ($1, $2, $3)", id, rec.Kind, string(body))
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("%w: %s", orchestrator.ErrExists, id)
	}
	if err != nil {
		return fmt.Errorf("create session %s: %w", id, err)
	}
	return nil
}

// Append inserts a record and brings the session's summary up to date.
func (st *Store) Append(ctx context.Context, id string, rec transcript.Record) error {
	body, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode %s record: %w", rec.Kind, err)
	}
	update, args, err := summaryUpdate(id, rec)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, update, args...)
		if err != nil {
			return fmt.Errorf("append to session %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return notFound(id)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO records (session_id, kind, body) VALUES ($1, $2, $3)", id, rec.Kind, string(body)); err != nil {
			return fmt.Errorf("append to session %s: %w", id, err)
		}
		return nil
	})
}

// summaryUpdate returns the UPDATE of a session's row for rec, as
// transcript.Transcript.Add folds it. In an UPDATE every column on the
// right is the row's old value.
func summaryUpdate(id string, rec transcript.Record) (string, []any, error) {
	when := rec.Time
	if when.IsZero() {
		when = time.Now()
	}
	switch rec.Kind {
	case transcript.KindMessage:
		if rec.Message == nil || len(rec.Message.Content) == 0 {
			break
		}
		return `UPDATE sessions SET updated_at = $2,
			message_count = message_count + CASE WHEN $3 = 'user' AND last_role = 'user' THEN 0 ELSE 1 END,
			prompt = CASE WHEN message_count = 0 THEN $4 ELSE prompt END,
			last_role = $3
			WHERE id = $1`, []any{id, when, string(rec.Message.Role), rec.Message.Text()}, nil
	case transcript.KindTurn:
		var u model.Usage
		if rec.Turn != nil {
			u = rec.Turn.Usage
		}
		return `UPDATE sessions SET updated_at = $2, turns = turns + 1,
			input_tokens = input_tokens + $3, output_tokens = output_tokens + $4,
			cache_read_tokens = cache_read_tokens + $5, cache_creation_tokens = cache_creation_tokens + $6
			WHERE id = $1`, []any{id, when, u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens}, nil
	case transcript.KindPlaced:
		return "UPDATE sessions SET updated_at = $2, executor = $3 WHERE id = $1", []any{id, when, rec.Executor}, nil
	case transcript.KindConfig:
		if rec.Config == nil {
			break
		}
		conf, err := json.Marshal(rec.Config)
		if err != nil {
			return "", nil, fmt.Errorf("encode configuration: %w", err)
		}
		return `UPDATE sessions SET updated_at = $2, config = $3, model = $4, directory = $5, executor = $6 WHERE id = $1`,
			[]any{id, when, string(conf), rec.Config.Model, rec.Config.Directory, rec.Config.Executor}, nil
	}
	return "UPDATE sessions SET updated_at = $2 WHERE id = $1", []any{id, when}, nil
}

// Load reads a session's records in order and folds them.
func (st *Store) Load(ctx context.Context, id string) (*transcript.Transcript, error) {
	if err := transcript.CheckID(id); err != nil {
		return nil, err
	}
	rows, err := st.pool.Query(ctx, "SELECT body::text FROM records WHERE session_id = $1 ORDER BY n", id)
	if err != nil {
		return nil, fmt.Errorf("load session %s: %w", id, err)
	}
	bodies, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("load session %s: %w", id, err)
	}
	if len(bodies) == 0 {
		return nil, notFound(id)
	}
	t := &transcript.Transcript{ID: id}
	for i, b := range bodies {
		var rec transcript.Record
		if err := json.Unmarshal([]byte(b), &rec); err != nil {
			return nil, fmt.Errorf("session %s record %d: %w", id, i+1, err)
		}
		t.Add(rec)
	}
	if t.Created.IsZero() {
		return nil, fmt.Errorf("session %s has no session record", id)
	}
	return t, nil
}

// List reads every session's summary, most recently updated first.
func (st *Store) List(ctx context.Context) ([]transcript.Summary, error) {
	rows, err := st.pool.Query(ctx, `SELECT id, directory, model, executor, created_at, updated_at, turns, message_count, prompt,
		input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens
		FROM sessions ORDER BY updated_at DESC, id`)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (transcript.Summary, error) {
		var s transcript.Summary
		var turns, msgs int32
		err := r.Scan(&s.ID, &s.Directory, &s.Model, &s.Executor, &s.Created, &s.Updated, &turns, &msgs, &s.Prompt,
			&s.Usage.InputTokens, &s.Usage.OutputTokens, &s.Usage.CacheReadInputTokens, &s.Usage.CacheCreationInputTokens)
		s.Turns, s.Messages = int(turns), int(msgs)
		s.Created, s.Updated = s.Created.UTC(), s.Updated.UTC()
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// Remove deletes a session with its records and events.
func (st *Store) Remove(ctx context.Context, id string) error {
	if err := transcript.CheckID(id); err != nil {
		return err
	}
	tag, err := st.pool.Exec(ctx, "DELETE FROM sessions WHERE id = $1", id)
	if err != nil {
		return fmt.Errorf("remove session %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return notFound(id)
	}
	return nil
}

// Release does nothing: the store holds nothing open per session.
func (st *Store) Release(string) {}

// Bind records the session's executor session.
func (st *Store) Bind(ctx context.Context, id string, b orchestrator.Binding) error {
	tag, err := st.pool.Exec(ctx, "UPDATE sessions SET exec_address = $2, exec_session_id = $3, exec_seq = $4 WHERE id = $1",
		id, b.Executor, b.SessionID, int64(b.Seq))
	if err != nil {
		return fmt.Errorf("bind session %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return notFound(id)
	}
	return nil
}

// Binding reads the session's executor session.
func (st *Store) Binding(ctx context.Context, id string) (orchestrator.Binding, error) {
	var b orchestrator.Binding
	var seq int64
	err := st.pool.QueryRow(ctx, "SELECT exec_address, exec_session_id, exec_seq FROM sessions WHERE id = $1", id).
		Scan(&b.Executor, &b.SessionID, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, notFound(id)
	}
	if err != nil {
		return b, fmt.Errorf("binding of session %s: %w", id, err)
	}
	b.Seq = uint64(seq)
	return b, nil
}

func interval(ttl time.Duration) string { return fmt.Sprintf("%d microseconds", ttl.Microseconds()) }

// Acquire takes the lease when it is free or holder's. A lease freed
// between the attempt and the look at its holder (the turn before ending
// on another replica) is tried for again.
func (st *Store) Acquire(ctx context.Context, id, holder string, ttl time.Duration) error {
	const attempts = 3
	for range attempts {
		tag, err := st.pool.Exec(ctx, `UPDATE sessions SET lease_holder = $2, lease_expiry = now() + $3::interval
			WHERE id = $1 AND (lease_holder = '' OR lease_holder = $2)`, id, holder, interval(ttl))
		if err != nil {
			return fmt.Errorf("lease of session %s: %w", id, err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		h, exp, err := st.Lease(ctx, id)
		if err != nil {
			return err
		}
		if h != "" {
			return &orchestrator.LeaseError{Holder: h, Expiry: exp}
		}
	}
	return fmt.Errorf("lease of session %s: freed and taken %d times meanwhile: %w", id, attempts, &orchestrator.LeaseError{})
}

// Renew extends holder's lease.
func (st *Store) Renew(ctx context.Context, id, holder string, ttl time.Duration) error {
	tag, err := st.pool.Exec(ctx, `UPDATE sessions SET lease_expiry = now() + $3::interval
		WHERE id = $1 AND lease_holder = $2`, id, holder, interval(ttl))
	if err != nil {
		return fmt.Errorf("renew the lease of session %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("session %s: %w", id, orchestrator.ErrLeaseLost)
	}
	return nil
}

// TakeOver gives holder a lease that has expired.
func (st *Store) TakeOver(ctx context.Context, id, holder string, ttl time.Duration) (bool, error) {
	tag, err := st.pool.Exec(ctx, `UPDATE sessions SET lease_holder = $2, lease_expiry = now() + $3::interval
		WHERE id = $1 AND lease_holder <> '' AND lease_expiry < now()`, id, holder, interval(ttl))
	if err != nil {
		return false, fmt.Errorf("take over the lease of session %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// EndLease frees holder's lease.
func (st *Store) EndLease(ctx context.Context, id, holder string) error {
	if _, err := st.pool.Exec(ctx, `UPDATE sessions SET lease_holder = '', lease_expiry = NULL
		WHERE id = $1 AND lease_holder = $2`, id, holder); err != nil {
		return fmt.Errorf("end the lease of session %s: %w", id, err)
	}
	return nil
}

// Expired lists the sessions whose lease has expired.
func (st *Store) Expired(ctx context.Context) ([]string, error) {
	rows, err := st.pool.Query(ctx, "SELECT id FROM sessions WHERE lease_holder <> '' AND lease_expiry < now() ORDER BY lease_expiry")
	if err != nil {
		return nil, fmt.Errorf("expired leases: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("expired leases: %w", err)
	}
	return ids, nil
}

// Lease reads the session's lease.
func (st *Store) Lease(ctx context.Context, id string) (string, time.Time, error) {
	var holder string
	var exp *time.Time
	err := st.pool.QueryRow(ctx, "SELECT lease_holder, lease_expiry FROM sessions WHERE id = $1", id).Scan(&holder, &exp)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", time.Time{}, notFound(id)
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("lease of session %s: %w", id, err)
	}
	if exp == nil {
		return holder, time.Time{}, nil
	}
	return holder, exp.UTC(), nil
}

// AddEvent inserts an event if its Seq is the next, with the binding's
// sequence when ExecSeq is set, in one transaction.
func (st *Store) AddEvent(ctx context.Context, id string, ev orchestrator.StoredEvent) error {
	return pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO events (session_id, seq, data)
			SELECT $1, $2, $3 WHERE $2 = (SELECT coalesce(max(seq), 0) + 1 FROM events WHERE session_id = $1)`,
			id, int64(ev.Seq), ev.Data)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "23503":
			return notFound(id)
		case errors.As(err, &pgErr) && pgErr.Code == "23505":
			return fmt.Errorf("%w: session %s: event %d is stored already", orchestrator.ErrEventConflict, id, ev.Seq)
		case err != nil:
			return fmt.Errorf("store event of session %s: %w", id, err)
		case tag.RowsAffected() == 0:
			return fmt.Errorf("%w: session %s: event %d is not the next", orchestrator.ErrEventConflict, id, ev.Seq)
		}
		if ev.ExecSeq > 0 {
			if _, err := tx.Exec(ctx, "UPDATE sessions SET exec_seq = $2 WHERE id = $1", id, int64(ev.ExecSeq)); err != nil {
				return fmt.Errorf("store event of session %s: %w", id, err)
			}
		}
		return nil
	})
}

// Events reads stored events after a sequence number.
func (st *Store) Events(ctx context.Context, id string, after uint64, limit int) ([]orchestrator.StoredEvent, error) {
	rows, err := st.pool.Query(ctx, "SELECT seq, data FROM events WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
		id, int64(after), limit)
	if err != nil {
		return nil, fmt.Errorf("events of session %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (orchestrator.StoredEvent, error) {
		var ev orchestrator.StoredEvent
		var seq int64
		err := r.Scan(&seq, &ev.Data)
		ev.Seq = uint64(seq)
		return ev, err
	})
	if err != nil {
		return nil, fmt.Errorf("events of session %s: %w", id, err)
	}
	return out, nil
}

// Notify sends n with NOTIFY.
func (st *Store) Notify(ctx context.Context, n orchestrator.Note) error {
	payload, err := json.Marshal(n)
	if err != nil {
		return err
	}
	if _, err := st.pool.Exec(ctx, "SELECT pg_notify($1, $2)", notesChannel, string(payload)); err != nil {
		return fmt.Errorf("notify session %s: %w", n.SessionID, err)
	}
	return nil
}

// Listen LISTENs on a connection of its own.
func (st *Store) Listen(ctx context.Context, ready func(), f func(orchestrator.Note)) error {
	conn, err := pgx.ConnectConfig(ctx, st.conn.Copy())
	if err != nil {
		return fmt.Errorf("listen for notes: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+notesChannel); err != nil {
		return fmt.Errorf("listen for notes: %w", err)
	}
	ready()
	for {
		msg, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("listen for notes: %w", err)
		}
		var n orchestrator.Note
		if err := json.Unmarshal([]byte(msg.Payload), &n); err != nil {
			continue // not one of ours
		}
		f(n)
	}
}

// LastEvent reads the newest event's sequence number.
func (st *Store) LastEvent(ctx context.Context, id string) (uint64, error) {
	var last int64
	if err := st.pool.QueryRow(ctx, "SELECT coalesce(max(seq), 0) FROM events WHERE session_id = $1", id).Scan(&last); err != nil {
		return 0, fmt.Errorf("events of session %s: %w", id, err)
	}
	return uint64(last), nil
}
