package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// TestSettleCountsExpiryFromRecording: WithExpiry is "how long a completed or failed record
// is kept and replayed, counted from completion". A batch outcome that waits for Settle is
// completed when Settle records it, so its expiry counts from Settle's clock reading, not
// from when its handler returned: otherwise, when the batch's other handlers run longer
// than the expiry, Settle writes a completed record that has already expired, and a
// duplicate delivered right after Settle runs the key again (review 6 found this). It
// holds on every store path Settle takes: the batch completion (Plain), the batch
// completion with attached writes (Attached), and the single completion sent again after
// the batch call failed (ResentAlone).
//
//  1. WithExpiry(1 min); Claim [x0, x1] with a deadline 10 min ahead.
//  2. DoClaimed(0) returns at t0: its completion waits for Settle.
//  3. DoClaimed(1)'s handler runs 2 minutes.
//  4. Settle at t0+2 min records x0's completion, to expire at t0+3 min.
//  5. A duplicate of request 0 (Do, right after Settle) replays the first result.
func TestSettleCountsExpiryFromRecording(t *testing.T) {
	for _, tc := range []struct {
		name   string
		store  func(*memstore.Store) idemstore.Store
		attach bool
	}{
		{name: "Plain", store: func(ms *memstore.Store) idemstore.Store { return ms }},
		{name: "Attached", store: func(ms *memstore.Store) idemstore.Store { return &attachBatch{Store: ms, calls: map[string]int{}} }, attach: true},
		{name: "ResentAlone", store: func(ms *memstore.Store) idemstore.Store {
			f := &flakyCompleteMany{Store: ms}
			f.failures.Store(1)
			return f
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := storetest.NewClock()
			s := memstore.New()
			store := tc.store(s)
			g, err := idem.New(store, "op", idem.WithScope("test"), idem.WithClock(clock), idem.WithExpiry(time.Minute))
			require.NoError(t, err)
			ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(10*time.Minute)) // on the guard's clock
			defer cancel()

			var l ledger
			b := g.Claim(ctx, reqs("x", 2))
			v, _, err := idem.DoClaimed(ctx, b, 0, func(ctx context.Context) (int, error) {
				if tc.attach {
					return 1, l.add(ctx, "x0", 1)
				}
				return 1, nil
			})
			require.NoError(t, err)
			require.Equal(t, 1, v)
			_, _, err = idem.DoClaimed(ctx, b, 1, func(context.Context) (int, error) {
				clock.Advance(2 * time.Minute) // a long message in the same batch
				return 2, nil
			})
			require.NoError(t, err)
			settledAt := clock.Now()
			for i, err := range b.Settle(ctx) {
				require.NoError(t, err, "request %d recorded", i)
			}

			sk, err := g.StoredKey(idem.Request{Key: "x0"})
			require.NoError(t, err)
			rec, err := s.Get(ctx, sk)
			require.NoError(t, err)
			assert.Equal(t, idemstore.StatusCompleted, rec.Status)
			assert.False(t, rec.Expires.Before(settledAt.Add(time.Minute)), "x0's expiry, %s after Settle, counts from before Settle recorded it", rec.Expires.Sub(settledAt))

			runs := 0
			v, replayed, err := idem.Do(ctx, g, idem.Request{Key: "x0"}, func(context.Context) (int, error) {
				runs++
				return 9, nil
			})
			require.NoError(t, err)
			assert.Zero(t, runs, "x0 ran again right after Settle recorded its completion: the record was born expired")
			assert.True(t, replayed)
			assert.Equal(t, 1, v, "a duplicate right after Settle gets the first result")
			if tc.attach {
				assert.Equal(t, 1, l.sum("x0"), "the attached write committed once")
				assert.Equal(t, 1, store.(*attachBatch).count("completeManyAttached"), "Settle completed x0 with its attached write")
			}
		})
	}
}
