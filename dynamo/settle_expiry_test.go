package dynamo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
)

// TestSettleCountsExpiryFromRecording: a batch outcome's expiry ([idem.WithExpiry],
// "counted from completion") counts from when Settle records it on DynamoDB, through the
// store's batch completion (x0), its batch completion with attached writes (x1) and a
// result kept in an item of its own (x2, over the inline limit): while the batch's last
// handler runs longer than the expiry, the completions wait, and each is then replayed
// right after Settle, not run again. (The root test of the same name covers the single
// completion sent again after a failed batch call.)
func TestSettleCountsExpiryFromRecording(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newLedger(t, e.client)
	clock := storetest.NewClock()
	g, err := idem.New(e.store, "op", idem.WithClock(clock), idem.WithExpiry(time.Minute))
	require.NoError(t, err)
	ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(10*time.Minute))
	defer cancel()

	big := strings.Repeat("r", 4096) // over the 1 KB inline limit: kept apart
	results := []string{"plain", "attached", big}
	reqs := []idem.Request{{Key: "x0"}, {Key: "x1"}, {Key: "x2"}, {Key: "slow"}}
	b := g.Claim(ctx, reqs)
	for i, want := range results {
		_, _, err := idem.DoClaimed(ctx, b, i, func(ctx context.Context) (string, error) {
			if i == 1 {
				return want, idem.Attach(ctx, l.add("acct-x1", 1, false))
			}
			return want, nil
		})
		require.NoError(t, err)
	}
	_, _, err = idem.DoClaimed(ctx, b, 3, func(context.Context) (string, error) {
		clock.Advance(2 * time.Minute) // a long message in the same batch
		return "slow", nil
	})
	require.NoError(t, err)
	settledAt := clock.Now()
	for i, err := range b.Settle(ctx) {
		require.NoError(t, err, "request %d recorded", i)
	}

	for i, want := range results {
		sk, err := g.StoredKey(reqs[i])
		require.NoError(t, err)
		rec, err := e.store.Get(ctx, sk)
		require.NoError(t, err)
		require.NotNil(t, rec)
		assert.Equal(t, idemstore.StatusCompleted, rec.Status)
		// The store keeps the expiry in whole seconds.
		assert.False(t, rec.Expires.Before(settledAt.Add(time.Minute).Truncate(time.Second)), "%s's expiry, %s after Settle, counts from before Settle recorded it", reqs[i].Key, rec.Expires.Sub(settledAt))

		v, replayed, err := idem.Do(ctx, g, reqs[i], func(context.Context) (string, error) { return "again", nil })
		require.NoError(t, err)
		assert.True(t, replayed, "%s ran again right after Settle recorded it", reqs[i].Key)
		assert.Equal(t, want, v)
	}
	assert.Equal(t, 1, l.balance(t, "acct-x1"), "x1's attached write committed once")
}
