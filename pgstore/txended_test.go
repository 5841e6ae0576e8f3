package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// Attached writes that end the completion's transaction themselves, each one way.

// execWrite returns a write that sends sql through the transaction.
func execWrite(sql string) pgstore.Write {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, sql)
		return err
	}
}

// connTxWrite returns a write that runs inner in a transaction begun on tx.Conn() (as a
// library taking a *pgx.Conn would): the server ignores the BEGIN, already in the store's
// transaction, and the inner transaction's COMMIT (or, with rollback, ROLLBACK) ends the
// store's. With rollback, the write returns err.
func connTxWrite(inner pgstore.Write, rollback bool, err error) pgstore.Write {
	return func(ctx context.Context, tx pgx.Tx) error {
		itx, berr := tx.Conn().Begin(ctx)
		if berr != nil {
			return berr
		}
		if werr := inner(ctx, itx); werr != nil {
			return werr
		}
		if rollback {
			_ = itx.Rollback(ctx)
			return err
		}
		return itx.Commit(ctx)
	}
}

// noBeginTx is a [pgstore.DB] without BeginTx: the store then checks the transaction with a
// statement of its own before COMMIT.
type noBeginTx struct{ pgstore.DB }

// TestAttachedWriteEndsTransaction: a write that ends the completion's transaction (a
// misuse the package documentation forbids) never makes Complete report success for a
// completion that did not commit, nor "nothing committed" for one that did, but in the one
// case Attach documents. The store runs no write after the end and reads the record back:
// a completion that did not commit is ErrNotCommitted (the guard releases the key); one
// that committed is a plain error naming the misuse (the guard, resending, finds it
// completed); nil only when the store's own COMMIT committed the completion.
func TestAttachedWriteEndsTransaction(t *testing.T) {
	t.Parallel()
	declined := errors.New("balance too low")
	type outcome int
	const (
		notCommitted outcome = iota // ErrNotCommitted, record in progress, nothing of the writes
		committedErr                // a plain error, record completed, the writes before the end
		committed                   // nil, record completed, every write
		// ErrConditionFailed though the record is completed: the one report the store does
		// not verify (see Attach), which the guard's release corrects
		conditionFailed
	)
	cases := []struct {
		name    string
		writes  func(l *ledger) []pgstore.Write
		noBegTx bool // through a DB without BeginTx
		want    outcome
		balance int   // after Complete
		cause   error // reachable from the error, if not nil
		// lateRuns is how often a last write ran: in a transaction a write began after
		// ending the store's, which the store finds only at COMMIT, and rolls back.
		lateRuns int
		index    int // of the write the TxEndedError names (-1: found at COMMIT)
	}{
		{
			name: "RollbackStatement",
			writes: func(l *ledger) []pgstore.Write {
				return []pgstore.Write{l.add("acct", 5, false), execWrite("ROLLBACK")}
			},
			index:   1,
			want:    notCommitted,
			balance: 0,
		},
		{
			name: "RollbackOnConn",
			writes: func(l *ledger) []pgstore.Write {
				return []pgstore.Write{l.add("acct", 5, false), connTxWrite(l.add("acct", 3, false), true, declined)}
			},
			index:   1,
			want:    notCommitted,
			balance: 0,
			cause:   declined,
		},
		{
			name: "RollbackThenBegin",
			writes: func(l *ledger) []pgstore.Write {
				return []pgstore.Write{l.add("acct", 5, false), execWrite("ROLLBACK; BEGIN"), l.add("acct", 2, false)}
			},
			index:    -1,
			want:     notCommitted,
			balance:  0,
			lateRuns: 1,
		},
		{
			name: "RollbackThenBeginWithoutBeginTx",
			writes: func(l *ledger) []pgstore.Write {
				return []pgstore.Write{l.add("acct", 5, false), execWrite("ROLLBACK; BEGIN"), l.add("acct", 2, false)}
			},
			index:    -1,
			noBegTx:  true,
			want:     notCommitted,
			balance:  0,
			lateRuns: 1,
		},
		{
			name: "CommitStatement",
			writes: func(l *ledger) []pgstore.Write {
				return []pgstore.Write{l.add("acct", 5, false), execWrite("COMMIT"), l.add("acct", 100, true)}
			},
			index:   1,
			want:    committedErr,
			balance: 5,
		},
		{
			name: "CommitOnConn",
			writes: func(l *ledger) []pgstore.Write {
				return []pgstore.Write{connTxWrite(l.add("acct", 5, false), false, nil), l.add("acct", 100, true)}
			},
			index:   0,
			want:    committedErr,
			balance: 5,
		},
		{
			name:    "CommitLast",
			writes:  func(l *ledger) []pgstore.Write { return []pgstore.Write{l.add("acct", 5, false), execWrite("COMMIT")} },
			want:    committedErr,
			balance: 5,
			index:   1,
		},
		{
			name: "CommitThenBegin",
			writes: func(l *ledger) []pgstore.Write {
				return []pgstore.Write{l.add("acct", 5, false), execWrite("COMMIT; BEGIN"), l.add("acct", 2, false)}
			},
			want:    committed,
			balance: 7,
		},
		{
			name: "CommitThenBeginThenFails",
			writes: func(l *ledger) []pgstore.Write {
				return []pgstore.Write{l.add("acct", 5, false), execWrite("COMMIT; BEGIN"), l.add("acct", 2, true)}
			},
			want:    conditionFailed,
			balance: 5,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := pgtest.Pool(t)
			var db pgstore.DB = pool
			if tc.noBegTx {
				db = noBeginTx{pool}
			}
			s, _ := newStore(t, db)
			l := newLedger(t, pool)
			claimAt("A", t0)(t, s, "k")
			done := completed(inProgress("k", "A", t0), t0)
			var after int // runs of a write placed after every other
			attached := []any{}
			for _, w := range tc.writes(l) {
				attached = append(attached, w)
			}
			attached = append(attached, pgstore.Write(func(context.Context, pgx.Tx) error { after++; return nil }))

			err := s.Complete(ctx, done, attached)
			got, gerr := s.Get(ctx, "k")
			require.NoError(t, gerr)
			t.Logf("Complete: %v; record %s; balance %d", err, got.Status, l.balance(t, "acct"))
			assert.Equal(t, tc.balance, l.balance(t, "acct"))
			if tc.cause != nil {
				assert.ErrorIs(t, err, tc.cause)
			}
			if tc.want == notCommitted || tc.want == committedErr {
				var te *pgstore.TxEndedError
				if assert.ErrorAs(t, err, &te) {
					assert.Equal(t, tc.index, te.Index)
				}
			}
			switch tc.want {
			case notCommitted:
				assert.ErrorIs(t, err, idemstore.ErrNotCommitted)
				assert.ErrorIs(t, err, idem.ErrStore)
				assert.Equal(t, idemstore.StatusInProgress, got.Status)
				assert.Equal(t, tc.lateRuns, after, "a write after the end ran")
			case committedErr:
				require.Error(t, err)
				assert.NotErrorIs(t, err, idemstore.ErrNotCommitted)
				assert.NotErrorIs(t, err, idem.ErrConditionFailed)
				assert.NotErrorIs(t, err, idem.ErrLeaseLost)
				assert.Equal(t, idemstore.StatusCompleted, got.Status)
				assert.Equal(t, 0, after, "a write after the end ran")
				require.NoError(t, s.Complete(ctx, done, attached), "a resend finds the completion committed")
				assert.Equal(t, 0, after, "a resend ran a write")
			case committed:
				require.NoError(t, err)
				assert.Equal(t, idemstore.StatusCompleted, got.Status)
				assert.Equal(t, 1, after)
			case conditionFailed:
				assert.ErrorIs(t, err, idem.ErrConditionFailed)
				assert.Equal(t, idemstore.StatusCompleted, got.Status)
				assert.Equal(t, 0, after)
			}
		})
	}
}

// TestAttachedWriteEndsTransactionGuarded shows what the guard makes of it: a rolled-back
// completion releases the key with ErrNotCommitted, so a retry runs the handler again; a
// committed one succeeds (every retry replays it) without running the writes after the
// one that committed. The misbehaving write runs once either way.
func TestAttachedWriteEndsTransactionGuarded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("Rollback", func(t *testing.T) {
		t.Parallel()
		g, _, l, _ := newGuard(t, nil)
		rollbacks, runs := 0, 0
		_, _, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (out, error) {
			runs++
			return out{N: 1}, pgstore.Attach(ctx, l.add("acct", 5, false), func(ctx context.Context, tx pgx.Tx) error {
				rollbacks++
				_, err := tx.Exec(ctx, "ROLLBACK")
				return err
			})
		})
		t.Logf("Do: %v", err)
		require.ErrorIs(t, err, idemstore.ErrNotCommitted)
		assert.ErrorIs(t, err, idem.ErrStore)
		var te *pgstore.TxEndedError
		if assert.ErrorAs(t, err, &te) {
			assert.Equal(t, 1, te.Index)
		}
		assert.Equal(t, 1, rollbacks, "the misbehaving write ran again")
		assert.Equal(t, 0, l.balance(t, "acct"))

		v, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (out, error) {
			runs++
			return out{N: 2}, pgstore.Attach(ctx, l.add("acct", 5, false))
		})
		require.NoError(t, err)
		assert.False(t, replayed, "the key was released")
		assert.Equal(t, 2, v.N)
		assert.Equal(t, 2, runs)
		assert.Equal(t, 5, l.balance(t, "acct"))
	})

	t.Run("CommitThenBeginThenFails", func(t *testing.T) {
		t.Parallel()
		g, _, l, _ := newGuard(t, nil)
		v, _, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (out, error) {
			return out{N: 1}, pgstore.Attach(ctx, l.add("acct", 5, false), execWrite("COMMIT; BEGIN"), l.add("acct", 2, true))
		})
		require.NoError(t, err, "the release finds the record completed")
		assert.Equal(t, 1, v.N)
		assert.Equal(t, 5, l.balance(t, "acct"))
		_, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(context.Context) (out, error) { return out{N: 2}, nil })
		require.NoError(t, err)
		assert.True(t, replayed)
	})

	t.Run("Commit", func(t *testing.T) {
		t.Parallel()
		g, _, l, _ := newGuard(t, nil)
		commits, after, runs := 0, 0, 0
		v, _, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (out, error) {
			runs++
			return out{N: 1}, pgstore.Attach(ctx,
				connTxWrite(func(ctx context.Context, tx pgx.Tx) error { commits++; return l.add("acct", 5, false)(ctx, tx) }, false, nil),
				func(context.Context, pgx.Tx) error { after++; return errors.New("business condition") })
		})
		t.Logf("Do: %v", err)
		require.NoError(t, err)
		assert.Equal(t, 1, v.N)
		assert.Equal(t, 1, commits, "the misbehaving write ran again")
		assert.Equal(t, 0, after, "a write after the one that committed ran")
		assert.Equal(t, 5, l.balance(t, "acct"))

		v, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(context.Context) (out, error) {
			runs++
			return out{N: 2}, nil
		})
		require.NoError(t, err)
		assert.True(t, replayed)
		assert.Equal(t, 1, v.N)
		assert.Equal(t, 1, runs)
	})
}

// TestCommitCheckRoundTrips counts the statements of a completion with an attached write:
// through a pool (BeginTx) the check that the COMMIT is the store's own transaction's
// travels with the COMMIT; through a DB without BeginTx it is one statement more.
func TestCommitCheckRoundTrips(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		noBegTx bool
		want    map[string]int
	}{
		// BEGIN, the completion, the write, the check with COMMIT
		{name: "BeginTx", want: map[string]int{"begin": 1, "query": 1, "exec": 1, "commit": 1}},
		// BEGIN, the completion, the write, the check, COMMIT
		{name: "WithoutBeginTx", noBegTx: true, want: map[string]int{"begin": 1, "query": 2, "exec": 1, "commit": 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := newCounter(pgtest.Pool(t))
			var db pgstore.DB = c
			if tc.noBegTx {
				db = noBeginTx{c}
			}
			s, pool := newStore(t, db)
			l := newLedger(t, pool)
			claimAt("A", t0)(t, s, "k")
			c.take()
			require.NoError(t, s.Complete(ctx, completed(inProgress("k", "A", t0), t0), []any{l.add("acct", 5, false)}))
			assert.Equal(t, tc.want, c.take())
			assert.Equal(t, 5, l.balance(t, "acct"))
		})
	}
}
