package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// TestBehaviour runs the shared state-machine suite against a real PostgreSQL, through Do
// and through one-request batches, with pgx's default query mode (cached prepared
// statements), with QueryExecModeExec, the mode the package documentation recommends
// behind RDS Proxy, and with QueryExecModeSimpleProtocol, which it says also works.
func TestBehaviour(t *testing.T) {
	modes := map[string]pgx.QueryExecMode{"cache": pgx.QueryExecModeCacheStatement, "exec": pgx.QueryExecModeExec,
		"simple": pgx.QueryExecModeSimpleProtocol}
	for name, mode := range modes {
		for _, batch := range []bool{false, true} {
			t.Run(fmt.Sprintf("mode=%s/batch=%t", name, batch), func(t *testing.T) { runBehaviour(t, mode, batch) })
		}
	}
}

func runBehaviour(t *testing.T, mode pgx.QueryExecMode, batch bool) {
	pool := pgtest.PoolFor(t, pgtest.URL(t), func(c *pgxpool.Config) {
		c.ConnConfig.DefaultQueryExecMode = mode
		c.MaxConns = 16
	})
	var (
		mu     sync.Mutex
		stores = map[idemstore.Store]bool{}
	)
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) idemstore.Store {
			table := pgtest.Name("idem")
			require.NoError(t, pgstore.CreateTable(context.Background(), pool, table))
			s, err := pgstore.New(pool, table)
			require.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			stores[s] = true
			return s
		},
		NewCounter: func(t *testing.T, store idemstore.Store) (func(context.Context, int, bool) error, func() int) {
			mu.Lock()
			ok := stores[store]
			mu.Unlock()
			require.True(t, ok, "the counter's store comes from NewStore")
			l := newLedger(t, pool)
			add := func(ctx context.Context, n int, failCond bool) error {
				return pgstore.Attach(ctx, l.add("acct", n, failCond))
			}
			return add, func() int { return l.balance(t, "acct") }
		},
		Batch: batch,
	})
}
