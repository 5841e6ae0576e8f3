package idem_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// failingClaims is a store whose claims (single and batch) fail with a store error: the
// guard cannot learn any key's state, and WithFailOpen runs handlers unguarded.
type failingClaims struct {
	*memstore.Store
}

var errDown = errors.New("store down")

func (s failingClaims) Claim(context.Context, *idemstore.Record, time.Time) (*idemstore.Record, bool, error) {
	return nil, false, errDown
}

func (s failingClaims) ClaimMany(_ context.Context, recs []*idemstore.Record, _ time.Time) []idemstore.ClaimResult {
	out := make([]idemstore.ClaimResult, len(recs))
	for i := range out {
		out[i].Err = errDown
	}
	return out
}

// TestFailOpenBatchDuplicateSharesTheRun: Guard.Claim promises "Requests with the same
// stored key (duplicates) are claimed once, and run once". With WithFailOpen and the store
// down, the first request of the key runs unguarded; its duplicate finds no record left
// to share, but the run's result is in hand: it takes it, and the handler runs once, in
// a batch claim and in a batch with a single key to claim (claimed as Do claims).
//
//  1. WithFailOpen(true); every claim fails with a store error.
//  2. Guard.Claim([K, K, pad]) (or [K, K]); DoClaimed(0) runs K unguarded.
//  3. DoClaimed(1), the duplicate: takes request 0's result without running.
func TestFailOpenBatchDuplicateSharesTheRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		reqs []idem.Request
	}{
		{name: "BatchClaim", reqs: []idem.Request{{Key: "K"}, {Key: "K"}, {Key: "pad"}}},
		{name: "OneKey", reqs: []idem.Request{{Key: "K"}, {Key: "K"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := idem.New(failingClaims{memstore.New()}, "op", idem.WithScope("test"), idem.WithFailOpen(true))
			require.NoError(t, err)
			ctx := context.Background()
			b := g.Claim(ctx, tc.reqs)
			var runs atomic.Int32
			fn := func(context.Context) (int, error) { return int(runs.Add(1)), nil }
			v0, replayed0, err0 := idem.DoClaimed(ctx, b, 0, fn)
			v1, replayed1, err1 := idem.DoClaimed(ctx, b, 1, fn)
			b.Settle(ctx)
			require.NoError(t, err0)
			require.NoError(t, err1)
			assert.EqualValues(t, 1, runs.Load(), "the key runs once in the batch")
			assert.Equal(t, v0, v1, "the duplicate gets the run's result")
			assert.False(t, replayed0)
			assert.True(t, replayed1, "the duplicate's result was not computed for it")
		})
	}
}
