package pgstoretest_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore/pgstoretest"
)

func TestMain(m *testing.M) { os.Exit(pgstoretest.Main(m)) }

// TestIsolation: two tests of one binary that use the same job id each run their handler
// and store their own result: neither replays the other's record, run one after the other
// or side by side.
func TestIsolation(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		name := "Sequential"
		if parallel {
			name = "Parallel"
		}
		t.Run(name, func(t *testing.T) {
			for _, test := range []string{"first", "second"} {
				t.Run(test, func(t *testing.T) {
					if parallel {
						t.Parallel()
					}
					pool := pgstoretest.Pool(t)
					_, err := pool.Exec(context.Background(), `CREATE TABLE jobs (id text PRIMARY KEY, by text NOT NULL)`)
					require.NoError(t, err, "the table name is the test's own, in its schema")
					guard, err := idem.New(pgstoretest.NewStore(t, pool), "run-job")
					require.NoError(t, err)
					got, replayed, err := idem.Do(context.Background(), guard, idem.Request{Key: "job-1"},
						func(ctx context.Context) (string, error) { return test, nil })
					require.NoError(t, err)
					assert.False(t, replayed, "no other test's record is seen")
					assert.Equal(t, test, got)
				})
			}
		})
	}
}

// TestNewStoreOwnPool: NewStore without a pool makes one, in a schema of its own.
func TestNewStoreOwnPool(t *testing.T) {
	store := pgstoretest.NewStore(t, nil)
	guard, err := idem.New(store, "run-job")
	require.NoError(t, err)
	for i, want := range []bool{false, true} {
		_, replayed, err := idem.Do(context.Background(), guard, idem.Request{Key: "job-1"},
			func(ctx context.Context) (int, error) { return i, nil })
		require.NoError(t, err)
		assert.Equal(t, want, replayed, "call %d", i)
	}
}

// TestCleanup: what a test made is gone once it ends: its schema, its tables and its
// idempotency table.
func TestCleanup(t *testing.T) {
	var schema, table string
	t.Run("Inner", func(t *testing.T) {
		pool := pgstoretest.Pool(t)
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT current_schema()`).Scan(&schema))
		table = pgstoretest.NewStore(t, pool).Table()
	})
	require.NotEmpty(t, schema)
	check := pgstoretest.Pool(t)
	var n int
	require.NoError(t, check.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n))
	assert.Zero(t, n, "schema %s dropped", schema)
	require.NoError(t, check.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_class WHERE relname = $1`, table).Scan(&n))
	assert.Zero(t, n, "table %s dropped", table)
}
