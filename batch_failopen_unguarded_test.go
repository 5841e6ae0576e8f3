package idem_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// TestBatchFailOpenFiresOnUnguarded: Hooks.OnUnguarded "runs when ... WithFailOpen
// let a store failure through", and Do fires it (and logs at WARN) before its unguarded
// run. A batch request whose ClaimMany failed runs unguarded in doClaimed's k.err branch
// with neither the hook nor the log: the fail-open run is invisible to monitoring.
//
//  1. WithFailOpen(true), WithHooks{OnUnguarded}; every claim fails with a store error.
//  2. Guard.Claim([K1, K2]) (two keys: a batch claim, ClaimMany fails for both).
//  3. DoClaimed(0), DoClaimed(1): both handlers run unguarded; OnUnguarded never fires.
func TestBatchFailOpenFiresOnUnguarded(t *testing.T) {
	var unguarded, runs atomic.Int32
	g, err := idem.New(failingClaims{memstore.New()}, "op", idem.WithScope("test"), idem.WithFailOpen(true),
		idem.WithHooks(idem.Hooks{OnUnguarded: func(context.Context, idem.Event) { unguarded.Add(1) }}))
	require.NoError(t, err)
	ctx := context.Background()
	b := g.Claim(ctx, []idem.Request{{Key: "K1"}, {Key: "K2"}})
	fn := func(context.Context) (int, error) { return int(runs.Add(1)), nil }
	for i := 0; i < 2; i++ {
		_, _, err := idem.DoClaimed(ctx, b, i, fn)
		require.NoError(t, err)
	}
	b.Settle(ctx)
	require.EqualValues(t, 2, runs.Load(), "both ran unguarded (fail-open)")
	assert.EqualValues(t, 2, unguarded.Load(), "every unguarded run is reported through OnUnguarded, as Do reports it")
}
