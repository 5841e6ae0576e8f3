package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// TestClaimRefusedByConcurrentWriter interleaves a claim with another transaction that
// holds the key's row: the claim starts (its statement snapshot taken) while the other
// writer's change is uncommitted, waits for its row lock, and is refused once it commits.
// The claim must return the record that refused it, as committed, from its one statement
// or (for a row it could not see at all) by sending the claim again: never the stale
// version its snapshot held, and never nothing.
func TestClaimRefusedByConcurrentWriter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		existing   bool // a claimable record exists before the other writer changes it
		statements int  // claim statements sent
	}{
		// The snapshot holds a record whose lease has ended (claimable); the other
		// writer takes it over. A plain read would return the ended lease.
		{name: "TakenOverMeanwhile", existing: true, statements: 1},
		// The snapshot holds no record; the other writer creates it. The statement
		// cannot see it, so the claim is sent again.
		{name: "CreatedMeanwhile", existing: false, statements: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := pgtest.Pool(t)
			c := newCounter(pool)
			s, _ := newStore(t, c)
			key := "race"
			if tc.existing {
				claimAt("a", t0)(t, s, key)
			}
			now := t0.Add(2 * time.Minute) // a's lease has ended
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			other := inProgress(key, "other", now)
			_, err = tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, status, expires_at, lease_expires_at, lease_token, version)
				VALUES ($1, 'INPROGRESS', $2, $3, 'other', 1)
				ON CONFLICT (id) DO UPDATE SET lease_token = 'other', lease_expires_at = $3, expires_at = $2`, pgx.Identifier{s.Table()}.Sanitize()),
				key, other.Expires, other.LeaseExpires)
			require.NoError(t, err)

			c.take()
			type answer struct {
				prev    *idemstore.Record
				claimed bool
				err     error
			}
			done := make(chan answer, 1)
			go func() {
				prev, claimed, err := s.Claim(ctx, inProgress(key, "b", now), now)
				done <- answer{prev, claimed, err}
			}()
			waitForLockWait(t, pool, s.Table())
			require.NoError(t, tx.Commit(ctx))
			a := <-done
			require.NoError(t, a.err)
			assert.False(t, a.claimed)
			require.NotNil(t, a.prev, "the refusing record comes back")
			assert.Equal(t, "other", a.prev.LeaseToken, "as committed, not as the claim's snapshot had it")
			assert.Equal(t, tc.statements, c.take()["query"])
		})
	}
}

// waitForLockWait polls until a statement on table waits for a lock: the store's statement,
// which the test then lets through by committing the transaction that holds the row.
func waitForLockWait(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Helper()
	for range 1000 {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, table).Scan(&n))
		if n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the store's statement never waited for the row lock")
}

// claimWith returns a claim record of key for token at now carrying checkpoint.
func claimWith(key, token, checkpoint string, now time.Time) *idemstore.Record {
	rec := inProgress(key, token, now)
	rec.Checkpoint = checkpoint
	return rec
}

// claimAnswer is what a Claim returned.
type claimAnswer struct {
	prev    *idemstore.Record
	claimed bool
	err     error
}

// claimWhileHeld claims rec at now in a goroutine, waits until the claim waits for the row
// lock tx holds, commits tx, and returns the claim's answer.
func claimWhileHeld(t *testing.T, s *pgstore.Store, pool *pgxpool.Pool, tx pgx.Tx, rec *idemstore.Record, now time.Time) claimAnswer {
	t.Helper()
	ctx := context.Background()
	done := make(chan claimAnswer, 1)
	go func() {
		prev, claimed, err := s.Claim(ctx, rec, now)
		done <- claimAnswer{prev, claimed, err}
	}()
	waitForLockWait(t, pool, s.Table())
	require.NoError(t, tx.Commit(ctx))
	return <-done
}

// TestClaimRefusedByConcurrentCheckpoint: a claim carrying checkpoint c0 waits for the row
// while the owner moves the checkpoint to c1, its lease ended by the claim's clock. The
// claim is refused (it does not carry c1), and prev is the record that refused it, with
// c1, not the statement's older snapshot.
func TestClaimRefusedByConcurrentCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	claimAt("A", t0)(t, s, "k")
	require.NoError(t, s.SetCheckpoint(ctx, "k", "A", "c0", 1))

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	txStore, err := pgstore.New(tx, s.Table())
	require.NoError(t, err)
	require.NoError(t, txStore.SetCheckpoint(ctx, "k", "A", "c1", 2))

	// The claim carries c0 with its number, so the record its snapshot holds does not
	// refuse it (a refusal there would be answered from the snapshot, without waiting).
	now := t0.Add(2 * time.Minute)
	rec := claimWith("k", "B", "c0", now)
	rec.CheckpointSeq = 1
	a := claimWhileHeld(t, s, pool, tx, rec, now)
	require.NoError(t, a.err)
	assert.False(t, a.claimed, "a claim carrying the stale checkpoint took the record over")
	require.NotNil(t, a.prev)
	assert.Equal(t, "c1", a.prev.Checkpoint)
}

// TestClaimRefusedByReinsertedRecord: a claim whose snapshot holds the record of A, its
// lease ended by the claim's clock, which is released and claimed again by B while the
// claim waits. The claim is refused with prev = B's record.
func TestClaimRefusedByReinsertedRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	claimAt("A", t0)(t, s, "k")

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	txStore, err := pgstore.New(tx, s.Table())
	require.NoError(t, err)
	require.NoError(t, txStore.Release(ctx, "k", "A", t0))
	_, ok, err := txStore.Claim(ctx, inProgress("k", "B", t0.Add(50*time.Second)), t0.Add(50*time.Second))
	require.NoError(t, err)
	require.True(t, ok)

	now := t0.Add(90 * time.Second) // A's lease has ended, B's has not

	a := claimWhileHeld(t, s, pool, tx, inProgress("k", "C", now), now)
	require.NoError(t, a.err)
	assert.False(t, a.claimed, "C took over B's live lease")
	require.NotNil(t, a.prev)
	assert.Equal(t, "B", a.prev.LeaseToken)
}
