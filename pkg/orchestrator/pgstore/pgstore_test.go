package pgstore_test

import (
	"context"
	"os"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
	"testing"

	"github.com/toolwire/toolwire/pkg/orchestrator"
	"github.com/toolwire/toolwire/pkg/orchestrator/pgstore"
	"github.com/toolwire/toolwire/pkg/orchestrator/pgstore/pgtest"
	"github.com/toolwire/toolwire/pkg/orchestrator/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func open(t *testing.T, dsn string) *pgstore.Store {
	t.Helper()
	st, err := pgstore.Open(context.Background(), dsn, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestPostgresStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) orchestrator.Store { return open(t, pgtest.DSN(t)) })
}

// TestMigrationsOnce: replicas that start together apply each migration
// once, and a later start applies none.
func TestMigrationsOnce(t *testing.T) {
	dsn := pgtest.DSN(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			st, err := pgstore.Open(context.Background(), dsn, pgstore.Options{})
			if err != nil {
				t.Error(err)
				return
			}
			st.Close()
		})
	}
	wg.Wait()
	st := open(t, dsn)
	defer st.Close()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, _ := conn.Query(context.Background(), "SELECT version FROM schema_migrations ORDER BY version")
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(versions, []int32{1}) {
		t.Errorf("schema_migrations %v, want [1]", versions)
	}
}
