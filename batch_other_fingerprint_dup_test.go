package idem_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// TestBatchFailOpenOtherFingerprintDuplicatesRunOnce: requests with the same key and the
// same fingerprint run once in a batch, whatever the store. Two requests that are
// duplicates of each other (key K, fingerprint B) while the key's first request of the
// batch carries another fingerprint (A) used to answer each through its own Do: with the
// store down each failed open, and B's handler ran twice in one batch. The first of them
// now answers, and the other takes its (fail-open) result.
//
//  1. WithFailOpen(true); every claim fails with a store error.
//  2. Guard.Claim([K/A, K/B, K/B, pad]).
//  3. DoClaimed for requests 0, 1, 2 (in either order of A and the Bs): A runs once
//     unguarded, B runs once unguarded and request 2 takes request 1's result.
func TestBatchFailOpenOtherFingerprintDuplicatesRunOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		order []int
	}{
		{name: "FirstRunsFirst", order: []int{0, 1, 2}},
		{name: "OthersFirst", order: []int{1, 2, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := idem.New(failingClaims{memstore.New()}, "op", idem.WithScope("test"), idem.WithFailOpen(true))
			require.NoError(t, err)
			ctx := context.Background()
			reqs := []idem.Request{
				{Key: "K", Fingerprint: []byte("A")},
				{Key: "K", Fingerprint: []byte("B")},
				{Key: "K", Fingerprint: []byte("B")},
				{Key: "pad"},
			}
			b := g.Claim(ctx, reqs)
			var runsA, runsB atomic.Int32
			fns := []func(context.Context) (int, error){
				func(context.Context) (int, error) { return int(runsA.Add(1)), nil },
				func(context.Context) (int, error) { return 100 + int(runsB.Add(1)), nil },
				func(context.Context) (int, error) { return 100 + int(runsB.Add(1)), nil },
			}
			vs := make([]int, len(fns))
			shared := make([]bool, len(fns))
			for _, i := range tc.order {
				v, replayed, err := idem.DoClaimed(ctx, b, i, fns[i])
				require.NoError(t, err, "request %d", i)
				vs[i], shared[i] = v, replayed
			}
			b.Settle(ctx)
			assert.EqualValues(t, 1, runsA.Load(), "request A runs once")
			assert.EqualValues(t, 1, runsB.Load(), "requests 1 and 2 are duplicates (same key, same fingerprint): they run once in the batch")
			assert.Equal(t, []int{1, 101, 101}, vs, "request 2 takes request 1's result")
			assert.Equal(t, []bool{false, false, true}, shared, "only request 2 replays")
		})
	}
}

// TestBatchOtherFingerprintDuplicatesShareTheAnswer: on the guarded path, the requests of
// another fingerprint than the key's first request share one answer: its result, or its
// error.
//
//   - Released: request A fails without a deadline (its key is released at once); request 1
//     (B) runs and records, request 2 (B) replays that result without running.
//   - Mismatch: request A completes, waiting for Settle; request 1 (B) gets
//     ErrPayloadMismatch, and request 2 (B) an error wrapping it, without running.
func TestBatchOtherFingerprintDuplicatesShareTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline bool
		errA     error
		wantErr  error
		wantRuns int32
	}{
		{name: "Released", errA: errDown, wantRuns: 1},
		{name: "Mismatch", deadline: true, wantErr: idem.ErrPayloadMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := idem.New(memstore.New(), "op", idem.WithScope("test"))
			require.NoError(t, err)
			ctx := context.Background()
			if tc.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Minute)
				defer cancel()
			}
			b := g.Claim(ctx, []idem.Request{
				{Key: "K", Fingerprint: []byte("A")},
				{Key: "K", Fingerprint: []byte("B")},
				{Key: "K", Fingerprint: []byte("B")},
				{Key: "pad"},
			})
			_, _, err = idem.DoClaimed(ctx, b, 0, func(context.Context) (int, error) { return 1, tc.errA })
			require.ErrorIs(t, err, tc.errA)
			var runsB atomic.Int32
			fnB := func(context.Context) (int, error) { return 100 + int(runsB.Add(1)), nil }
			v1, replayed1, err1 := idem.DoClaimed(ctx, b, 1, fnB)
			v2, replayed2, err2 := idem.DoClaimed(ctx, b, 2, fnB)
			b.Settle(ctx)
			assert.Equal(t, tc.wantRuns, runsB.Load(), "B runs at most once")
			if tc.wantErr != nil {
				require.ErrorIs(t, err1, tc.wantErr)
				require.ErrorIs(t, err2, tc.wantErr)
				return
			}
			require.NoError(t, err1)
			require.NoError(t, err2)
			assert.Equal(t, []int{101, 101}, []int{v1, v2})
			assert.False(t, replayed1)
			assert.True(t, replayed2, "request 2 replays request 1's result")
		})
	}
}
