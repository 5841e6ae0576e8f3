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

// TestBatchFailOpenRefusedAfterClaimManyMetCheckpointOfAnotherPayload: ClaimMany meets the
// key's record, a released record holding the checkpoint of request A's effects, but the
// batch's first request of the key carries payload B. Its takeover (decideClaim,
// carryCheckpoint) answers ErrPayloadMismatch, and the item keeps the record it met with
// that error. The batch's request of the key with payload A answers through a Do given that
// record, so when its claim fails with a store error it returns the error instead of
// running A unguarded without the checkpoint. Review 6 found that the item kept no record:
// A's effects up to "charged" happened again.
//
// A Do of K/A alone that met the record never fails open
// (TestFailOpenRefusedAfterTakeoverClaimMetCheckpoint), nor does a batch request whose
// first request of the key carries A (TestBatchFailOpenRefusedAfterTakeoverClaimMetCheckpoint).
//
//  1. Do(K/A) charges, checkpoints "charged", fails: the tombstone keeps "charged" (fp A).
//  2. The store's single claims go down; WithFailOpen(true).
//  3. Claim([K/B, K/A, pad]): ClaimMany meets the tombstone for K; carrying its
//     checkpoint is refused for B (ErrPayloadMismatch).
//  4. DoClaimed(0) (K/B): ErrPayloadMismatch.
//  5. DoClaimed(1) (K/A): its Do's claim fails with a store error; it does not run.
func TestBatchFailOpenRefusedAfterClaimManyMetCheckpointOfAnotherPayload(t *testing.T) {
	for _, tc := range []struct {
		name  string
		order []int
	}{
		{name: "FirstRunsFirst", order: []int{0, 1}},
		{name: "OtherFirst", order: []int{1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := memstore.New()
			clock := storetest.NewClock()
			g1, err := idem.New(ms, "pay", idem.WithClock(clock), idem.WithScope("s"))
			require.NoError(t, err)
			reqA := idem.Request{Key: "order-1", Fingerprint: []byte("A")}
			charges := 0
			handler := func(ctx context.Context) (string, error) {
				if idem.LastCheckpoint(ctx) != "charged" {
					charges++
					if err := idem.Checkpoint(ctx, "charged"); err != nil && !errors.Is(err, idem.ErrNoLease) {
						return "", err
					}
				}
				return "", errors.New("shipping failed")
			}
			_, _, err = idem.Do(context.Background(), g1, reqA, handler) // charges, then fails: tombstone with "charged"
			require.Error(t, err)
			require.Equal(t, 1, charges)
			clock.Advance(time.Second)

			g2, err := idem.New(singleClaimDown{ms}, "pay", idem.WithClock(clock), idem.WithScope("s"), idem.WithFailOpen(true))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b := g2.Claim(ctx, []idem.Request{
				{Key: "order-1", Fingerprint: []byte("B")},
				reqA,
				{Key: "pad"},
			})
			for _, i := range tc.order {
				_, _, err := idem.DoClaimed(ctx, b, i, handler)
				t.Logf("request %d: err=%v", i, err)
				if i == 0 {
					require.ErrorIs(t, err, idem.ErrPayloadMismatch)
				}
			}
			b.Settle(ctx)
			assert.Equal(t, 1, charges, "K/A ran unguarded and charged again, although ClaimMany met the record holding its checkpoint")
		})
	}
}
