package pgstore_test

// Hostile review of pgstore: each test drives one exact interleaving against the real
// server and states what the Store contract (idemstore/store.go) requires.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

var reviewBase = time.Date(2100, 3, 1, 12, 0, 0, 0, time.UTC)

func reviewRec(key, token, checkpoint string) *idemstore.Record {
	return &idemstore.Record{
		Key: key, Status: idemstore.StatusInProgress,
		Expires: reviewBase.Add(time.Hour), LeaseExpires: reviewBase.Add(time.Minute),
		LeaseToken: token, Checkpoint: checkpoint, Version: idemstore.SchemaVersion,
	}
}

// waitBlocked waits until a statement on table waits for a lock.
func waitBlocked(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		err := pool.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`,
			table).Scan(&n)
		require.NoError(t, err)
		if n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the store's statement never blocked on the row lock")
}

// Release racing the owner's own SetCheckpoint: the checkpoint commits while Release waits
// for the row. Contract: a record with a checkpoint is kept (lease ended, token replaced).
func TestReviewReleaseWaitsForCheckpoint(t *testing.T) {
	s, pool := newStore(t, nil)
	ctx := context.Background()
	_, ok, err := s.Claim(ctx, reviewRec("k", "A", ""), reviewBase)
	require.NoError(t, err)
	require.True(t, ok)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	_, err = tx.Exec(ctx, fmt.Sprintf(`UPDATE %s SET checkpoint = 'c1' WHERE id = 'k' AND lease_token = 'A' AND status = 'INPROGRESS'`,
		pgx.Identifier{s.Table()}.Sanitize()))
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() { done <- s.Release(ctx, "k", "A") }()
	waitBlocked(t, pool, s.Table())
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-done)

	got, err := s.Get(ctx, "k")
	require.NoError(t, err)
	t.Logf("after release: %+v", got)
	require.NotNil(t, got, "Release deleted a record whose checkpoint committed before it: checkpoint lost")
	require.Equal(t, "c1", got.Checkpoint)
	require.Equal(t, idemstore.ReleasedToken("A"), got.LeaseToken)
}

// Release of A racing a takeover by B that commits first. Contract: ErrLeaseLost, B's
// record untouched.
func TestReviewReleaseRacesTakeover(t *testing.T) {
	s, pool := newStore(t, nil)
	ctx := context.Background()
	_, ok, err := s.Claim(ctx, reviewRec("k", "A", ""), reviewBase)
	require.NoError(t, err)
	require.True(t, ok)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	// B's takeover, the store's own claim statement, in a transaction we hold open.
	txStore, err := pgstore.New(tx, s.Table())
	require.NoError(t, err)
	_, ok, err = txStore.Claim(ctx, reviewRec("k", "B", ""), reviewBase.Add(2*time.Minute))
	require.NoError(t, err)
	require.True(t, ok)

	done := make(chan error, 1)
	go func() { done <- s.Release(ctx, "k", "A") }()
	waitBlocked(t, pool, s.Table())
	require.NoError(t, tx.Commit(ctx))
	rerr := <-done
	t.Logf("release: %v", rerr)
	require.ErrorIs(t, rerr, idem.ErrLeaseLost)
	got, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.NotNil(t, got)
	require.Equal(t, "B", got.LeaseToken)
}

// A claim carrying checkpoint c0 waits for the row while the old owner moves it to c1.
// Contract: refused, and prev is the record that refused it (checkpoint c1), not the
// statement's older snapshot.
func TestReviewClaimSeesConcurrentCheckpoint(t *testing.T) {
	s, pool := newStore(t, nil)
	ctx := context.Background()
	_, ok, err := s.Claim(ctx, reviewRec("k", "A", "c0"), reviewBase)
	require.NoError(t, err)
	require.True(t, ok)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	txStore, err := pgstore.New(tx, s.Table())
	require.NoError(t, err)
	require.NoError(t, txStore.SetCheckpoint(ctx, "k", "A", "c1"))

	type res struct {
		prev *idemstore.Record
		ok   bool
		err  error
	}
	done := make(chan res, 1)
	go func() {
		p, ok, err := s.Claim(ctx, reviewRec("k", "B", "c0"), reviewBase.Add(2*time.Minute))
		done <- res{p, ok, err}
	}()
	waitBlocked(t, pool, s.Table())
	require.NoError(t, tx.Commit(ctx))
	r := <-done
	require.NoError(t, r.err)
	require.False(t, r.ok, "claim carrying the stale checkpoint took the record over")
	require.NotNil(t, r.prev)
	require.Equal(t, "c1", r.prev.Checkpoint)
}

// A claim whose snapshot holds V1 of the row, which is deleted and replaced by a live V2
// while the claim waits. Contract: refused with prev = V2.
func TestReviewClaimDeleteReinsert(t *testing.T) {
	s, pool := newStore(t, nil)
	ctx := context.Background()
	_, ok, err := s.Claim(ctx, reviewRec("k", "A", ""), reviewBase)
	require.NoError(t, err)
	require.True(t, ok)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	txStore, err := pgstore.New(tx, s.Table())
	require.NoError(t, err)
	require.NoError(t, txStore.Release(ctx, "k", "A"))
	_, ok, err = txStore.Claim(ctx, reviewRec("k", "B", ""), reviewBase.Add(time.Second))
	require.NoError(t, err)
	require.True(t, ok)

	type res struct {
		prev *idemstore.Record
		ok   bool
		err  error
	}
	done := make(chan res, 1)
	go func() {
		p, ok, err := s.Claim(ctx, reviewRec("k", "C", ""), reviewBase.Add(2*time.Second))
		done <- res{p, ok, err}
	}()
	waitBlocked(t, pool, s.Table())
	require.NoError(t, tx.Commit(ctx))
	r := <-done
	require.NoError(t, r.err)
	require.False(t, r.ok, "C took over B's live lease")
	require.NotNil(t, r.prev)
	require.Equal(t, "B", r.prev.LeaseToken)
}

// An attached write that ends the completion's transaction with a statement
// (tx.Exec("ROLLBACK")) rather than tx.Rollback, which ownedTx refuses. Contract:
// "Attached writes commit atomically with it or not at all", and a nil Complete means
// the completion is stored. Here Complete returns nil while nothing is stored.
func TestReviewAttachedRollbackStatement(t *testing.T) {
	s, _ := newStore(t, nil)
	ctx := context.Background()
	rec := reviewRec("k", "A", "")
	_, ok, err := s.Claim(ctx, rec, reviewBase)
	require.NoError(t, err)
	require.True(t, ok)

	done := &idemstore.Record{Key: "k", Status: idemstore.StatusCompleted, Expires: reviewBase.Add(2 * time.Hour),
		Data: []byte(`"ok"`), Encoding: "json", LeaseToken: "A", Version: idemstore.SchemaVersion}
	w := pgstore.Write(func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "ROLLBACK")
		return err
	})
	cerr := s.Complete(ctx, done, []any{w})
	got, err := s.Get(ctx, "k")
	require.NoError(t, err)
	t.Logf("Complete returned %v; stored status %s", cerr, got.Status)
	if cerr == nil {
		require.Equal(t, idemstore.StatusCompleted, got.Status, "Complete returned nil but the completion did not commit: the result is lost")
	}
}

// An attached write that commits through the connection (tx.Conn().Begin + Commit, as a
// library taking a *pgx.Conn would), then a second write that fails. The store reports
// "nothing committed" (ErrConditionFailed), yet the completion and the first write are
// committed.
func TestReviewAttachedConnCommit(t *testing.T) {
	s, pool := newStore(t, nil)
	l := newLedger(t, pool)
	ctx := context.Background()
	_, ok, err := s.Claim(ctx, reviewRec("k", "A", ""), reviewBase)
	require.NoError(t, err)
	require.True(t, ok)

	done := &idemstore.Record{Key: "k", Status: idemstore.StatusCompleted, Expires: reviewBase.Add(2 * time.Hour),
		Data: []byte(`"ok"`), Encoding: "json", LeaseToken: "A", Version: idemstore.SchemaVersion}
	viaConn := pgstore.Write(func(ctx context.Context, tx pgx.Tx) error {
		inner, err := tx.Conn().Begin(ctx)
		if err != nil {
			return err
		}
		if err := l.add("acct", 5, false)(ctx, inner); err != nil {
			return err
		}
		return inner.Commit(ctx)
	})
	fails := pgstore.Write(func(context.Context, pgx.Tx) error { return errors.New("business condition") })
	cerr := s.Complete(ctx, done, []any{viaConn, fails})
	got, err := s.Get(ctx, "k")
	require.NoError(t, err)
	t.Logf("Complete returned %v; stored status %s; balance %d", cerr, got.Status, l.balance(t, "acct"))
	if errors.Is(cerr, idem.ErrConditionFailed) || errors.Is(cerr, idemstore.ErrNotCommitted) {
		require.Equal(t, idemstore.StatusInProgress, got.Status, "store said nothing committed, but the completion committed")
		require.Equal(t, 0, l.balance(t, "acct"), "store said nothing committed, but an attached write committed")
	}
}

// The package documentation says QueryExecModeSimpleProtocol also works; the repository's
// suite runs only the cache and exec modes.
func TestReviewSimpleProtocolSuite(t *testing.T) {
	pool := pgtest.PoolFor(t, pgtest.URL(t), func(c *pgxpool.Config) {
		c.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
		c.MaxConns = 8
	})
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) idemstore.Store {
			table := pgtest.Name("idem")
			require.NoError(t, pgstore.CreateTable(context.Background(), pool, table))
			s, err := pgstore.New(pool, table)
			require.NoError(t, err)
			return s
		},
		NewCounter: func(t *testing.T, store idemstore.Store) (func(context.Context, int, bool) error, func() int) {
			l := newLedger(t, pool)
			add := func(ctx context.Context, n int, failCond bool) error {
				return pgstore.Attach(ctx, l.add("acct", n, failCond))
			}
			return add, func() int { return l.balance(t, "acct") }
		},
	})
}

var _ = strings.Contains
