package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// TestDoClaimedNowRecordsAtOnce: DoClaimedNow records its request's outcome, with its
// attached writes, before it returns, while DoClaimed's waits for Settle; the batch's
// claims were made together either way.
func TestDoClaimedNowRecordsAtOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := memstore.New()
	g, err := idem.New(store, "now")
	require.NoError(t, err)
	b := g.Claim(ctx, []idem.Request{{Key: "a"}, {Key: "b"}})
	status := func(key string) idemstore.Status {
		sk, err := g.StoredKey(idem.Request{Key: key})
		require.NoError(t, err)
		rec, err := store.Get(ctx, sk)
		require.NoError(t, err)
		require.NotNil(t, rec)
		return rec.Status
	}
	var wrote int
	_, _, err = idem.DoClaimedNow(ctx, b, 0, func(ctx context.Context) (string, error) {
		return "a", idem.Attach(ctx, func() error { wrote++; return nil })
	})
	require.NoError(t, err)
	assert.Equal(t, idemstore.StatusCompleted, status("a"), "recorded before DoClaimedNow returned")
	assert.Equal(t, 1, wrote, "its attached write committed with it")
	_, _, err = idem.DoClaimed(ctx, b, 1, func(context.Context) (string, error) { return "b", nil })
	require.NoError(t, err)
	assert.Equal(t, idemstore.StatusInProgress, status("b"), "waits for Settle")
	for _, err := range b.Settle(ctx) {
		require.NoError(t, err)
	}
	assert.Equal(t, idemstore.StatusCompleted, status("b"))
	assert.Equal(t, 1, wrote)
}
