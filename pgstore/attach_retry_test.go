package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// TestAttachedWriteRetryableFailures: a serialization failure (40001) or a deadlock
// (40P01) in an attached write, both provoked for real with a second transaction, is the
// retryable failure of a transaction that committed nothing, as DynamoDB's
// TransactionConflict is: idemstore.ErrNotCommitted inside an idem.StoreError (the HTTP
// wrappers answer 503 with Retry-After), never idem.ErrConditionFailed (a final 409). The
// server's error stays reachable, and the key is released.
func TestAttachedWriteRetryableFailures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		isolation string // the completion's transaction's, through default_transaction_isolation
		code      string
		// write returns an attached write on l that fails with code, with other, a pool on
		// the same server, for the second transaction.
		write func(t *testing.T, l *ledger, other *pgxpool.Pool) pgstore.Write
	}{
		{
			// Under REPEATABLE READ the completion's snapshot is taken by its first
			// statement; a row another transaction changed and committed since then cannot
			// be updated in it.
			name: "SerializationFailure", isolation: "repeatable read", code: "40001",
			write: func(t *testing.T, l *ledger, other *pgxpool.Pool) pgstore.Write {
				return func(ctx context.Context, tx pgx.Tx) error {
					_, err := other.Exec(ctx, fmt.Sprintf(`UPDATE %s SET balance = balance + 1 WHERE account = 'a'`, l.table))
					require.NoError(t, err)
					_, err = tx.Exec(ctx, fmt.Sprintf(`UPDATE %s SET balance = balance + 1 WHERE account = 'a'`, l.table))
					return err
				}
			},
		},
		{
			// The write locks row a, then waits for row b, which the other transaction
			// holds; once the write waits, the other transaction asks for row a. The other
			// transaction checks for deadlocks only after a minute, so the write's check
			// finds the cycle, and the write fails. (Setting deadlock_timeout takes a
			// superuser, as the tests are on the server pgtest starts.)
			name: "Deadlock", isolation: "read committed", code: "40P01",
			write: func(t *testing.T, l *ledger, other *pgxpool.Pool) pgstore.Write {
				return func(ctx context.Context, tx pgx.Tx) error {
					lock := func(q interface {
						Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
					}, account string) error {
						_, err := q.Exec(ctx, fmt.Sprintf(`UPDATE %s SET balance = balance + 1 WHERE account = $1`, l.table), account)
						return err
					}
					otx, err := other.Begin(ctx)
					require.NoError(t, err)
					defer func() { _ = otx.Rollback(context.WithoutCancel(ctx)) }()
					_, err = otx.Exec(ctx, `SET LOCAL deadlock_timeout = '1min'`)
					require.NoError(t, err)
					require.NoError(t, lock(otx, "b"))
					require.NoError(t, lock(tx, "a"))
					var pid uint32
					require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
					otherDone := make(chan error, 1)
					go func() {
						// Wait until the write waits for row b, then ask for row a.
						for {
							var waiting bool
							err := other.QueryRow(ctx, `SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting)
							if err != nil || waiting {
								if err == nil {
									err = lock(otx, "a")
								}
								otherDone <- err
								return
							}
							time.Sleep(10 * time.Millisecond)
						}
					}()
					err = lock(tx, "b")
					assert.NoError(t, <-otherDone, "the other transaction gets row a once the write failed")
					return err
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := pgtest.PoolFor(t, pgtest.URL(t), func(c *pgxpool.Config) {
				c.ConnConfig.RuntimeParams["default_transaction_isolation"] = tc.isolation
			})
			g, _, l, _ := newGuard(t, pool)
			_, err := l.pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s VALUES ('acct', 0), ('a', 0), ('b', 0)`, l.table))
			require.NoError(t, err)
			runs := 0
			_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (out, error) {
				runs++
				return out{N: 1}, pgstore.Attach(ctx, l.add("acct", 100, false), tc.write(t, l, l.pool))
			})
			require.Error(t, err)
			assert.NotErrorIs(t, err, idem.ErrConditionFailed, "retryable, not a final refusal")
			assert.ErrorIs(t, err, idemstore.ErrNotCommitted)
			assert.ErrorIs(t, err, idem.ErrStore)
			var pe *pgconn.PgError
			require.ErrorAs(t, err, &pe, "the server's error is reachable")
			assert.Equal(t, tc.code, pe.Code)
			var awe *pgstore.AttachedWriteError
			require.ErrorAs(t, err, &awe, "the error names the write")
			assert.Equal(t, 1, awe.Index)
			assert.Equal(t, 0, l.balance(t, "acct"), "the attached add did not commit")

			v, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (out, error) {
				runs++
				return out{N: 2}, pgstore.Attach(ctx, l.add("acct", 100, false))
			})
			require.NoError(t, err, "the key was released")
			assert.False(t, replayed)
			assert.Equal(t, 2, v.N)
			assert.Equal(t, 2, runs)
		})
	}
}
