package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// TestClaimWithoutLockingClaimsAnswersFromSnapshot pins the documented default: the owner
// completes a key from sessions with synchronous_commit off; a store at the defaults, with
// no synchronous standby configured, answers the retry's replay from the statement's
// snapshot, taking no transaction ID, so its commit flushes nothing and the replayed
// completion may still be unflushed (TestReview25_ReplayOfUnflushedCompletion shows the
// crash that then loses it). With [pgstore.WithLockingClaims] the same claim, single or
// in a batch, locks the record and takes one, so its commit flushes the WAL up to it.
func TestClaimWithoutLockingClaimsAnswersFromSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	admin := pgtest.Pool(t)
	table := pgtest.Name("idem")
	require.NoError(t, pgstore.CreateTable(ctx, admin, table))
	owner := pgtest.PoolFor(t, url, func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	})
	ownerStore, err := pgstore.New(owner, table)
	require.NoError(t, err)
	completeAt("A", t0)(t, ownerStore, "k")

	retry := pgtest.PoolFor(t, url, nil)
	var standbys, syncCommit string
	require.NoError(t, retry.QueryRow(ctx, `SELECT current_setting('synchronous_standby_names'),
		current_setting('synchronous_commit')`).Scan(&standbys, &syncCommit))
	require.Empty(t, standbys, "the shared server has synchronous standbys")
	require.Equal(t, "on", syncCommit)

	now := t0.Add(time.Second)
	// claim claims k through a store of the retry's pool made with opts, in a transaction,
	// and returns the record that refused it and whether the transaction took an ID.
	claim := func(batch bool, opts ...pgstore.Option) (*idemstore.Record, bool) {
		t.Helper()
		tx, err := retry.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		s, err := pgstore.New(tx, table, opts...)
		require.NoError(t, err)
		var prev *idemstore.Record
		var claimed bool
		if batch {
			res := s.ClaimMany(ctx, []*idemstore.Record{inProgress("k", "B", now)}, now)
			prev, claimed, err = res[0].Prev, res[0].Claimed, res[0].Err
		} else {
			prev, claimed, err = s.Claim(ctx, inProgress("k", "B", now), now)
		}
		require.NoError(t, err)
		require.False(t, claimed)
		var xid *int64
		require.NoError(t, tx.QueryRow(ctx, `SELECT txid_current_if_assigned()`).Scan(&xid))
		require.NoError(t, tx.Commit(ctx))
		return prev, xid != nil
	}
	for _, batch := range []bool{false, true} {
		prev, xid := claim(batch)
		require.NotNil(t, prev)
		assert.Equal(t, idemstore.StatusCompleted, prev.Status)
		assert.False(t, xid, "batch %v: without WithLockingClaims the replay took a transaction ID", batch)

		prev, xid = claim(batch, pgstore.WithLockingClaims())
		require.NotNil(t, prev)
		assert.Equal(t, idemstore.StatusCompleted, prev.Status)
		assert.True(t, xid, "batch %v: with WithLockingClaims the replay took no transaction ID", batch)
	}
}

// TestNewRejectsNilOption: a nil option is an invalid option, not a panic.
func TestNewRejectsNilOption(t *testing.T) {
	t.Parallel()
	_, err := pgstore.New(pgtest.Pool(t), "idem", nil)
	require.ErrorIs(t, err, idem.ErrInvalidOption)
}
