package idem_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// singleClaimDown answers batch claims but fails every single-record claim with a store
// error (a store that went down between the batch claim and a later claim).
type singleClaimDown struct {
	*memstore.Store
}

func (s singleClaimDown) Claim(context.Context, *idemstore.Record, time.Time) (*idemstore.Record, bool, error) {
	return nil, false, errDown
}

// TestBatchFailOpenOtherFingerprintRefusedAfterClaimManyMetRecord: a call never fails open
// once a claim, poll or ClaimMany met the key's record. A request of the batch whose key an
// earlier request carries with another fingerprint answers through Do; that Do is given the
// record the batch claim met, so when its own claim fails with a store error it returns the
// error instead of running its handler unguarded while another caller holds the key.
//
//  1. Caller 1 (another invocation) runs K/A and is in flight: a live record holds K.
//  2. WithFailOpen(true); Guard.Claim([K/A, K/B, pad]): ClaimMany meets caller 1's record
//     for K (request 0's item: not claimed, rec = the live record).
//  3. The store's single claims now fail with a store error.
//  4. DoClaimed(1) (K/B, another fingerprint), before or after DoClaimed(0): its Do's claim
//     fails, and it must not run B.
func TestBatchFailOpenOtherFingerprintRefusedAfterClaimManyMetRecord(t *testing.T) {
	for _, tc := range []struct {
		name  string
		order []int
	}{
		{name: "FirstRunsFirst", order: []int{0, 1}},
		{name: "OtherFirst", order: []int{1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := memstore.New()
			g1, err := idem.New(ms, "op", idem.WithScope("test"))
			require.NoError(t, err)
			started, release := make(chan struct{}), make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _, _ = idem.Do(context.Background(), g1, idem.Request{Key: "K", Fingerprint: []byte("A")}, func(context.Context) (int, error) {
					close(started)
					<-release
					return 1, nil
				})
			}()
			<-started
			defer func() { close(release); <-done }()

			g2, err := idem.New(singleClaimDown{ms}, "op", idem.WithScope("test"), idem.WithFailOpen(true))
			require.NoError(t, err)
			ctx := context.Background()
			b := g2.Claim(ctx, []idem.Request{
				{Key: "K", Fingerprint: []byte("A")},
				{Key: "K", Fingerprint: []byte("B")},
				{Key: "pad"},
			})
			var runs atomic.Int32
			fn := func(context.Context) (int, error) { return int(runs.Add(1)), nil }
			for _, i := range tc.order {
				v, replayed, err := idem.DoClaimed(ctx, b, i, fn)
				t.Logf("request %d: v=%d replayed=%v err=%v", i, v, replayed, err)
			}
			b.Settle(ctx)
			assert.Zero(t, runs.Load(), "the batch claim met the live record holding K: no request of K may run unguarded")
		})
	}
}
