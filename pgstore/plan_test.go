package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// TestStatementsPlannedOnce runs completions with attached writes on one connection and
// reads the connection's prepared statements: in pgx's default mode every statement the
// store sends, the check that travels with COMMIT included, is a prepared statement
// executed again, not text parsed and planned per completion (the check used to carry the
// key and token as literals); in QueryExecModeExec, the mode for RDS Proxy, the store
// prepares nothing, so nothing pins.
func TestStatementsPlannedOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		mode     pgx.QueryExecMode
		prepared bool
	}{
		{name: "cache", mode: pgx.QueryExecModeCacheStatement, prepared: true},
		{name: "exec", mode: pgx.QueryExecModeExec},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := pgtest.PoolFor(t, pgtest.URL(t), func(c *pgxpool.Config) {
				c.ConnConfig.DefaultQueryExecMode = tc.mode
				c.MaxConns = 1 // every statement on one connection, whose statements we read
			})
			s, _ := newStore(t, pool)
			l := newLedger(t, pool)
			g, err := idem.New(s, "plan", idem.WithScope("test"), idem.WithLease(time.Minute))
			require.NoError(t, err)
			const n = 8
			for i := range n {
				_, _, err := idem.Do(ctx, g, idem.Request{Key: fmt.Sprint("k", i)}, func(ctx context.Context) (out, error) {
					return out{N: i}, pgstore.Attach(ctx, l.add("acct", 1, false))
				})
				require.NoError(t, err)
			}
			require.Equal(t, n, l.balance(t, "acct"))
			rows, err := pool.Query(ctx, `SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements`,
				pgx.QueryExecModeSimpleProtocol)
			require.NoError(t, err)
			runs := map[string]int64{}
			for rows.Next() {
				var sql string
				var k int64
				require.NoError(t, rows.Scan(&sql, &k))
				runs[sql] = k
			}
			require.NoError(t, rows.Err())
			var check int64
			for sql, k := range runs {
				if assert.NotContains(t, sql, "E'", "a statement with literals") && strings.Contains(sql, s.Table()) && strings.Contains(sql, "HAVING count(*) = 0") {
					check += k
				}
			}
			if !tc.prepared {
				for sql := range runs {
					assert.NotContains(t, sql, s.Table(), "exec mode prepares nothing of the store's")
				}
				return
			}
			assert.EqualValues(t, n, check, "the commit check, prepared once and run %d times; statements: %v", n, runs)
		})
	}
}
