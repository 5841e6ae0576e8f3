package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// TestCompleteStatements: a completion without attached writes is one plain UPDATE (an
// Exec, whose row count says it completed the record); only a completion that finds
// nothing to complete reads the record under its token after it, to tell a resend of a
// completion that committed (nil: nothing is written twice) from a lost lease.
func TestCompleteStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCounter(pgtest.Pool(t))
	s, _ := newStore(t, c)
	claimAt("A", t0)(t, s, "k")
	done := completed(inProgress("k", "A", t0), t0)

	c.take()
	require.NoError(t, s.Complete(ctx, done, nil))
	assert.Equal(t, map[string]int{"exec": 1}, c.take(), "a completion that completes the record")

	require.NoError(t, s.Complete(ctx, done, nil), "a resend of the completion")
	assert.Equal(t, map[string]int{"exec": 1, "query": 1}, c.take(), "the UPDATE, then the read under the token")
	got, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, idemstore.StatusCompleted, got.Status)

	claimAt("A", t0)(t, s, "lost")
	now := t0.Add(2 * time.Minute)
	_, ok, err := s.Claim(ctx, inProgress("lost", "B", now), now)
	require.NoError(t, err)
	require.True(t, ok)
	c.take()
	err = s.Complete(ctx, completed(inProgress("lost", "A", t0), t0), nil)
	require.ErrorIs(t, err, idem.ErrLeaseLost)
	assert.Equal(t, map[string]int{"exec": 1, "query": 1}, c.take())
	got, err = s.Get(ctx, "lost")
	require.NoError(t, err)
	assert.Equal(t, "B", got.LeaseToken, "the lost owner's completion changed the new owner's record")
}
