-- Conversations of orchestrator replicas: one row per session with its
-- summary, its binding to an executor session and its turn's lease; the
-- transcript's records, only ever appended; the events of its turns.

CREATE TABLE sessions (
	id              text PRIMARY KEY,
	created_at      timestamptz NOT NULL,
	updated_at      timestamptz NOT NULL,
	-- The latest configuration (settings included), as transcript.Config.
	config          json NOT NULL,
	model           text NOT NULL DEFAULT '',
	directory       text NOT NULL DEFAULT '',
	executor        text NOT NULL DEFAULT '',
	-- Summary kept up to date by every append, for listing without
	-- reading transcripts.
	turns           integer NOT NULL DEFAULT 0,
	message_count   integer NOT NULL DEFAULT 0,
	last_role       text NOT NULL DEFAULT '',
	prompt          text NOT NULL DEFAULT '',
	input_tokens    bigint NOT NULL DEFAULT 0,
	output_tokens   bigint NOT NULL DEFAULT 0,
	cache_read_tokens     bigint NOT NULL DEFAULT 0,
	cache_creation_tokens bigint NOT NULL DEFAULT 0,
	-- The executor session the conversation runs on, and the sequence
	-- number of the newest executor event handled.
	exec_address    text NOT NULL DEFAULT '',
	exec_session_id text NOT NULL DEFAULT '',
	exec_seq        bigint NOT NULL DEFAULT 0,
	-- The lease of the replica running the current turn; empty between
	-- turns.
	lease_holder    text NOT NULL DEFAULT '',
	lease_expiry    timestamptz
);

CREATE INDEX sessions_updated ON sessions (updated_at DESC);
CREATE INDEX sessions_leased ON sessions (lease_expiry) WHERE lease_holder <> '';

-- The transcript: one row per record, in the order appended. The record is
-- kept as written (json, not jsonb), so tool inputs stay byte for byte.
CREATE TABLE records (
	session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	n          bigint GENERATED ALWAYS AS IDENTITY,
	kind       text NOT NULL,
	body       json NOT NULL,
	PRIMARY KEY (session_id, n)
);

-- Session events, numbered from 1 per session without gaps, for clients
-- that attach to any replica.
CREATE TABLE events (
	session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	seq        bigint NOT NULL,
	data       bytea NOT NULL,
	PRIMARY KEY (session_id, seq)
);
