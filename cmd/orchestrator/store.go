package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/orchestrator/pgstore"
)

// storeEnv names the environment variable that gives serve its --store,
// so that a Kubernetes Secret can hold the database's password.
const storeEnv = "TOOLWIRE_STORE"

// openStore opens where serve keeps conversations: PostgreSQL for a
// postgres:// URL, else the transcript files of --sessions-dir. It returns
// the store and a description of it for logs, without the password.
func openStore(ctx context.Context, c *common, dsn string, log *slog.Logger) (orchestrator.Store, string, error) {
	if dsn == "" {
		st, err := c.store()
		if err != nil {
			return nil, "", err
		}
		return orchestrator.FileStore(st), st.Dir(), nil
	}
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return nil, "", fmt.Errorf("--store: want a postgres:// URL, got %q", redact(dsn))
	}
	st, err := pgstore.Open(ctx, dsn, pgstore.Options{Logger: log})
	if err != nil {
		return nil, "", fmt.Errorf("--store %s: %w", redact(dsn), err)
	}
	return st, redact(dsn), nil
}

// redact returns a connection URL without its password.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
