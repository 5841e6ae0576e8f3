package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/pgstore"
)

type out struct {
	N int `json:"n"`
}

// newGuard returns a guard on a store of a fresh table, with a settable clock.
func newGuard(t *testing.T, db pgstore.DB, opts ...idem.Option) (*idem.Guard, *pgstore.Store, *ledger, *storetest.Clock) {
	t.Helper()
	s, pool := newStore(t, db)
	c := storetest.NewClock()
	g, err := idem.New(s, "attach", append([]idem.Option{idem.WithClock(c), idem.WithScope("test")}, opts...)...)
	require.NoError(t, err)
	return g, s, newLedger(t, pool), c
}

// TestAttachedWriteSeesTheCompletion shows the order inside the completion's transaction:
// the record is already completed in it when the writes run.
func TestAttachedWriteSeesTheCompletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, s, _, _ := newGuard(t, nil)
	var seen string
	_, _, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (out, error) {
		return out{N: 1}, pgstore.Attach(ctx, func(ctx context.Context, tx pgx.Tx) error {
			return tx.QueryRow(ctx, fmt.Sprintf(`SELECT status FROM %s`, pgx.Identifier{s.Table()}.Sanitize())).Scan(&seen)
		})
	})
	require.NoError(t, err)
	assert.Equal(t, string(idemstore.StatusCompleted), seen)
}

// TestAttachedWriteOfFencedOwner: an owner whose lease was taken over never runs its
// writes, and nothing of it commits.
func TestAttachedWriteOfFencedOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, _, l, clock := newGuard(t, nil, idem.WithLease(time.Minute))
	var lateRan atomic.Bool
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, _, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (out, error) {
			err := pgstore.Attach(ctx, func(ctx context.Context, tx pgx.Tx) error {
				lateRan.Store(true)
				return l.add("acct", 100, false)(ctx, tx)
			})
			close(started)
			<-release
			return out{N: 100}, err
		})
		done <- err
	}()
	<-started
	clock.Advance(2 * time.Minute)
	v, _, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (out, error) {
		return out{N: 5}, pgstore.Attach(ctx, l.add("acct", 5, false))
	})
	require.NoError(t, err)
	assert.Equal(t, 5, v.N)
	close(release)
	require.ErrorIs(t, <-done, idem.ErrLeaseLost)
	assert.False(t, lateRan.Load(), "the fenced owner's write never runs")
	assert.Equal(t, 5, l.balance(t, "acct"))
}

// TestAttachedWriteFailures: every way an attached write can fail commits nothing,
// releases the key, and says so with the Store contract's errors.
func TestAttachedWriteFailures(t *testing.T) {
	t.Parallel()
	declined := errors.New("balance too low")
	cases := []struct {
		name  string
		write func(l *ledger) pgstore.Write
		check func(t *testing.T, err error)
	}{
		{
			name: "ReturnsError",
			write: func(l *ledger) pgstore.Write {
				return func(ctx context.Context, tx pgx.Tx) error {
					if err := l.add("acct", 7, false)(ctx, tx); err != nil {
						return err
					}
					return declined
				}
			},
			check: func(t *testing.T, err error) {
				require.ErrorIs(t, err, idem.ErrConditionFailed)
				require.ErrorIs(t, err, declined, "the write's own error is reachable")
				var awe *pgstore.AttachedWriteError
				require.ErrorAs(t, err, &awe)
				assert.Equal(t, 1, awe.Index)
			},
		},
		{
			name:  "ConstraintViolated",
			write: func(l *ledger) pgstore.Write { return l.add("acct", 7, true) },
			check: func(t *testing.T, err error) {
				require.ErrorIs(t, err, idem.ErrConditionFailed)
				var pe *pgconn.PgError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, "23514", pe.Code, "check_violation")
			},
		},
		{
			name: "CommitsItself",
			write: func(l *ledger) pgstore.Write {
				return func(ctx context.Context, tx pgx.Tx) error {
					if err := l.add("acct", 7, false)(ctx, tx); err != nil {
						return err
					}
					return tx.Commit(ctx)
				}
			},
			check: func(t *testing.T, err error) { require.ErrorIs(t, err, idem.ErrConditionFailed) },
		},
		{
			name: "SwallowsError",
			write: func(l *ledger) pgstore.Write {
				return func(ctx context.Context, tx pgx.Tx) error {
					if err := l.add("acct", 7, false)(ctx, tx); err != nil {
						return err
					}
					_, _ = tx.Exec(ctx, fmt.Sprintf(`UPDATE %s SET balance = -1`, l.table)) // fails its CHECK
					return nil
				}
			},
			check: func(t *testing.T, err error) {
				require.ErrorIs(t, err, idemstore.ErrNotCommitted)
				require.ErrorIs(t, err, idem.ErrStore)
			},
		},
		{
			name: "ConnectionBreaks",
			write: func(l *ledger) pgstore.Write {
				return func(ctx context.Context, tx pgx.Tx) error {
					if err := l.add("acct", 7, false)(ctx, tx); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
					return err
				}
			},
			check: func(t *testing.T, err error) {
				require.ErrorIs(t, err, idemstore.ErrNotCommitted)
				require.ErrorIs(t, err, idem.ErrStore)
			},
		},
		{
			name: "CommitRefused",
			write: func(l *ledger) pgstore.Write {
				return func(ctx context.Context, tx pgx.Tx) error {
					if err := l.add("acct", 7, false)(ctx, tx); err != nil {
						return err
					}
					// Checked at COMMIT: the server refuses the whole transaction then.
					_, err := tx.Exec(ctx, fmt.Sprintf(`UPDATE %s SET pair = 'x'`, l.table))
					return err
				}
			},
			check: func(t *testing.T, err error) {
				require.ErrorIs(t, err, idemstore.ErrNotCommitted)
				var pe *pgconn.PgError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, "23505", pe.Code, "unique_violation")
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			g, _, l, _ := newGuard(t, nil)
			_, err := l.pool.Exec(ctx, fmt.Sprintf(`ALTER TABLE %[1]s ADD COLUMN pair text;
				INSERT INTO %[1]s VALUES ('other', 0, 'y'), ('acct', 0, NULL);
				ALTER TABLE %[1]s ADD CONSTRAINT %[1]s_pair UNIQUE (pair) DEFERRABLE INITIALLY DEFERRED`, l.table),
				pgx.QueryExecModeSimpleProtocol)
			require.NoError(t, err)
			_, err = l.pool.Exec(ctx, fmt.Sprintf(`UPDATE %s SET pair = 'x' WHERE account = 'other'`, l.table))
			require.NoError(t, err)
			runs := 0
			_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (out, error) {
				runs++
				return out{N: 1}, pgstore.Attach(ctx, l.add("acct", 1, false), tc.write(l))
			})
			tc.check(t, err)
			assert.Equal(t, 0, l.balance(t, "acct"), "nothing committed")
			v, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (out, error) {
				runs++
				return out{N: 2}, pgstore.Attach(ctx, l.add("acct", 1, false))
			})
			require.NoError(t, err, "the key was released")
			assert.False(t, replayed)
			assert.Equal(t, 2, v.N)
			assert.Equal(t, 2, runs)
			assert.Equal(t, 1, l.balance(t, "acct"))
		})
	}
}

// TestAttachedWriteOfAnotherType is refused: nothing commits, and the guard, finding the
// record still in progress under its token, releases the key.
func TestAttachedWriteOfAnotherType(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, _, _, _ := newGuard(t, nil)
	_, _, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (out, error) {
		return out{N: 1}, idem.Attach(ctx, func() error { return nil })
	})
	require.ErrorIs(t, err, idemstore.ErrInvalidAttach, "refused at Attach, in the handler")
	assert.Contains(t, err.Error(), "func() error", "the error names the type")
	_, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(context.Context) (out, error) { return out{N: 2}, nil })
	require.NoError(t, err)
	assert.False(t, replayed, "the key was released")
}

// TestAttachOutsideHandler returns ErrNoLease.
func TestAttachOutsideHandler(t *testing.T) {
	t.Parallel()
	require.ErrorIs(t, pgstore.Attach(context.Background(), func(context.Context, pgx.Tx) error { return nil }), idem.ErrNoLease)
}
