package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// TestReview6_SettleWritesACompletionAlreadyExpired: WithExpiry is "how long a completed
// or failed record is kept and replayed, counted from completion". A batch outcome that
// waits for Settle gets its Expires when its handler returns (completedRecord: now plus
// the expiry), not when Settle records it. When the batch's other handlers run longer
// than the expiry, Settle writes a completed record that has already expired: it counts
// as absent the moment it lands, and a duplicate delivered right after Settle runs the
// key again. Until Settle the claim record held the key; after it nothing does.
//
//  1. WithExpiry(1 min); Claim [x0, x1] with a deadline 10 min ahead.
//  2. DoClaimed(0) returns at t0: its completion, Expires t0+1 min, waits for Settle.
//  3. DoClaimed(1)'s handler runs 2 minutes.
//  4. Settle at t0+2 min records x0's completion (no error): expired already.
//  5. A duplicate of request 0 (Do, right after Settle) runs its handler again.
func TestReview6_SettleWritesACompletionAlreadyExpired(t *testing.T) {
	clock := storetest.NewClock()
	s := memstore.New()
	g, err := idem.New(s, "op", idem.WithScope("test"), idem.WithClock(clock), idem.WithExpiry(time.Minute))
	require.NoError(t, err)
	ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(10*time.Minute)) // on the guard's clock
	defer cancel()

	b := g.Claim(ctx, reqs("x", 2))
	v, _, err := idem.DoClaimed(ctx, b, 0, func(context.Context) (int, error) { return 1, nil })
	require.NoError(t, err)
	require.Equal(t, 1, v)
	_, _, err = idem.DoClaimed(ctx, b, 1, func(context.Context) (int, error) {
		clock.Advance(2 * time.Minute) // a long message in the same batch
		return 2, nil
	})
	require.NoError(t, err)
	for i, err := range b.Settle(ctx) {
		require.NoError(t, err, "request %d recorded", i)
	}

	sk, err := g.StoredKey(idem.Request{Key: "x0"})
	require.NoError(t, err)
	rec, err := s.Get(ctx, sk)
	require.NoError(t, err)
	t.Logf("x0 as Settle left it: status %s, expires %s after now", rec.Status, rec.Expires.Sub(clock.Now()))

	runs := 0
	v, replayed, err := idem.Do(ctx, g, idem.Request{Key: "x0"}, func(context.Context) (int, error) {
		runs++
		return 9, nil
	})
	require.NoError(t, err)
	assert.Zero(t, runs, "x0 ran again right after Settle recorded its completion: the record was born expired")
	assert.True(t, replayed)
	assert.Equal(t, 1, v, "a duplicate right after Settle gets the first result")
}
