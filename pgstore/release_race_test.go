package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/pgstore"
)

// TestReleaseRaces interleaves a release of A's lease with another transaction that holds
// the key's row: the release starts while the other writer's change is uncommitted, waits
// for its row lock, and then judges the record as committed.
func TestReleaseRaces(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// hold makes the other writer's change through txStore.
		hold  func(t *testing.T, txStore *pgstore.Store)
		check func(t *testing.T, err error, got *idemstore.Record)
	}{
		{
			// A's own checkpoint commits while the release waits: the record is kept for
			// it, its lease ended and its token replaced.
			name: "CheckpointCommitsFirst",
			hold: func(t *testing.T, txStore *pgstore.Store) {
				require.NoError(t, txStore.SetCheckpoint(context.Background(), "k", "A", "c1", 1))
			},
			check: func(t *testing.T, err error, got *idemstore.Record) {
				require.NoError(t, err)
				require.NotNil(t, got, "the release deleted a record whose checkpoint committed before it")
				assert.Equal(t, "c1", got.Checkpoint)
				assert.Equal(t, idemstore.ReleasedToken("A"), got.LeaseToken)
			},
		},
		{
			// B's takeover (A's lease ended) commits while the release waits: the release
			// is refused and B's record is untouched.
			name: "TakeoverCommitsFirst",
			hold: func(t *testing.T, txStore *pgstore.Store) {
				now := t0.Add(2 * time.Minute)
				_, ok, err := txStore.Claim(context.Background(), inProgress("k", "B", now), now)
				require.NoError(t, err)
				require.True(t, ok)
			},
			check: func(t *testing.T, err error, got *idemstore.Record) {
				require.ErrorIs(t, err, idem.ErrLeaseLost)
				require.NotNil(t, got)
				assert.Equal(t, "B", got.LeaseToken)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, pool := newStore(t, nil)
			claimAt("A", t0)(t, s, "k")

			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			txStore, err := pgstore.New(tx, s.Table())
			require.NoError(t, err)
			tc.hold(t, txStore)

			done := make(chan error, 1)
			go func() { done <- s.Release(ctx, "k", "A", t0) }()
			waitForLockWait(t, pool, s.Table())
			require.NoError(t, tx.Commit(ctx))
			rerr := <-done
			got, err := s.Get(ctx, "k")
			require.NoError(t, err)
			tc.check(t, rerr, got)
		})
	}
}
