package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/pgstore"
)

// TestClaimManyRefusalTakesNoTransactionID: a batch whose every key is refused by its
// record (replays, a live lease, the tombstone of a claim's own release) takes no row lock
// and no transaction ID, as a single claim's refusal does; a batch mixing such keys with a
// new one answers each as Claim would.
func TestClaimManyRefusalTakesNoTransactionID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	completeAt("A", t0)(t, s, "done1")
	completeAt("A2", t0)(t, s, "done2")
	claimAt("L", t0)(t, s, "live")
	releasedAt("R", "", t0)(t, s, "gone")
	now := t0.Add(time.Second)
	batch := func(keys ...string) []*idemstore.Record {
		recs := make([]*idemstore.Record, len(keys))
		for i, k := range keys {
			tok := "B" + k
			if k == "gone" {
				tok = "R" // a late attempt of R's own claim
			}
			recs[i] = inProgress(k, tok, now)
		}
		return recs
	}
	claim := func(recs []*idemstore.Record) ([]idemstore.ClaimResult, *int64) {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		txStore, err := pgstore.New(tx, s.Table())
		require.NoError(t, err)
		res := txStore.ClaimMany(ctx, recs, now)
		var xid *int64
		require.NoError(t, tx.QueryRow(ctx, `SELECT txid_current_if_assigned()`).Scan(&xid))
		require.NoError(t, tx.Commit(ctx))
		return res, xid
	}

	res, xid := claim(batch("live", "done1", "gone", "done2"))
	want := []struct {
		status idemstore.Status
		token  string
	}{
		{idemstore.StatusInProgress, "L"}, {idemstore.StatusCompleted, "A"},
		{idemstore.StatusInProgress, idemstore.ReleasedToken("R")}, {idemstore.StatusCompleted, "A2"},
	}
	for i, r := range res {
		require.NoError(t, r.Err)
		require.False(t, r.Claimed)
		require.NotNil(t, r.Prev)
		assert.Equal(t, want[i].status, r.Prev.Status)
		assert.Equal(t, want[i].token, r.Prev.LeaseToken)
	}
	assert.Nil(t, xid, "a batch of refused claims took a row lock or wrote")

	res, xid = claim(batch("done1", "new", "live"))
	require.NoError(t, res[0].Err)
	assert.False(t, res[0].Claimed)
	assert.Equal(t, idemstore.StatusCompleted, res[0].Prev.Status)
	require.NoError(t, res[1].Err)
	assert.True(t, res[1].Claimed)
	require.NoError(t, res[2].Err)
	assert.False(t, res[2].Claimed)
	assert.Equal(t, "L", res[2].Prev.LeaseToken)
	assert.NotNil(t, xid, "the new key was written")
}
