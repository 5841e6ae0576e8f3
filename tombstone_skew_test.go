package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// TestTombstoneBehindClockOtherPayloadInProgress: idemstore's doc on tombstones says a caller
// whose clock runs behind the releaser's "may be refused for as long as the skew, and is
// told the key is in progress until then". The tombstone keeps the released request's
// fingerprint; a caller with another payload must still be told the key is in progress
// (retryable), not ErrPayloadMismatch (HTTP 422, which a client must not retry), for a key
// nobody holds. A tombstone with a checkpoint keeps the mismatch: the checkpoint records
// the released request's effects, and the key stays with its payload.
//
//  1. Caller A (clock on time) runs K with payload "a" (checkpointing, in one case); its
//     handler fails; the key is released: tombstone, lease ended at A's now.
//  2. Caller B, clock 500 ms behind (within the 2 s lease margin), sends K with payload "b"
//     100 ms later: ErrInProgress, with the tombstone's lease end; ErrPayloadMismatch
//     with the checkpoint.
//  3. Once B's clock passes the release, B runs (without the checkpoint).
func TestTombstoneBehindClockOtherPayloadInProgress(t *testing.T) {
	for _, tc := range []struct {
		name       string
		checkpoint bool // the released request recorded a checkpoint
	}{
		{name: "NoCheckpoint"},
		{name: "Checkpoint", checkpoint: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := memstore.New()
			base := storetest.NewSettableClock()
			gA, err := idem.New(store, "op", idem.WithScope("test"), idem.WithClock(base))
			require.NoError(t, err)
			gB, err := idem.New(store, "op", idem.WithScope("test"), idem.WithClock(storetest.SkewedClock{Base: base, Offset: -500 * time.Millisecond}))
			require.NoError(t, err)
			ctx := context.Background()
			boom := errors.New("boom")
			released := base.Now()
			_, _, err = idem.Do(ctx, gA, idem.Request{Key: "K", Fingerprint: []byte("a")}, func(ctx context.Context) (int, error) {
				if tc.checkpoint {
					require.NoError(t, idem.Checkpoint(ctx, "step 1"))
				}
				return 0, boom
			})
			require.ErrorIs(t, err, boom)

			base.Advance(100 * time.Millisecond)
			reqB := idem.Request{Key: "K", Fingerprint: []byte("b")}
			_, _, err = idem.Do(ctx, gB, reqB, func(context.Context) (int, error) {
				t.Error("B ran while its clock sees the tombstone's lease running")
				return 2, nil
			})
			if tc.checkpoint {
				// The checkpoint records request a's effects: the key stays with a's payload.
				assert.ErrorIs(t, err, idem.ErrPayloadMismatch)
				return
			}
			assert.NotErrorIs(t, err, idem.ErrPayloadMismatch, "the key was released: nobody's payload holds it")
			var ipe *idem.InProgressError
			require.ErrorAs(t, err, &ipe, "Store.Release: a caller behind the releaser's clock 'is told the key is in progress'")
			assert.True(t, ipe.LeaseExpires.Equal(released), "retry after the tombstone's lease end")

			// Once B's clock passes the release, B runs.
			base.Advance(500 * time.Millisecond)
			v, replayed, err := idem.Do(ctx, gB, reqB, func(context.Context) (int, error) { return 2, nil })
			require.NoError(t, err)
			assert.False(t, replayed)
			assert.Equal(t, 2, v)
		})
	}
}
