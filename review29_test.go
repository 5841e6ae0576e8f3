package idem_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/guardlink"
	"github.com/idemkit/idem/memstore"
)

// TestReview29_DoInBatchMetOfAnotherTypeNeverFailsOpen: internal/guardlink's package doc
// says "DoInBatch panics on arguments of other types". For met it does not: idem's
// doInBatch reads it with `m, _ := met.(*KeyMet)`, so a met of any other type (here a
// **KeyMet, the address of the batch's shared pointer: an easy slip behind `any`, which the
// compiler no longer checks) is silently taken as nil, "shares nothing", and a guard with
// WithFailOpen runs the handler unguarded over the live run whose record the earlier call
// of the key met (fix21's hole back, through fix23's untyped link).
//
// Expected: a met that is not an *idem.KeyMet (nor nil) panics, as the doc says, and the
// handler never runs; or at the very least the call returns the store error without
// running it. On main the handler runs unguarded while the owner holds the key.
func TestReview29_DoInBatchMetOfAnotherTypeNeverFailsOpen(t *testing.T) {
	ms := memstore.New()
	owner, err := idem.New(ms, "op", idem.WithScope("test"))
	require.NoError(t, err)
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_, _, err := idem.Do(context.Background(), owner, idem.Request{Key: "K"},
			func(context.Context) (string, error) {
				close(started)
				<-release
				return "first", nil
			})
		assert.NoError(t, err)
	}()
	<-started
	defer func() { close(release); <-done }()

	// One single claim passes (it meets the owner's record), then the store is down.
	store := &claimsThenDown{Store: ms, ok: 1}
	g, err := idem.New(store, "op", idem.WithScope("test"), idem.WithFailOpen(true))
	require.NoError(t, err)
	req := idem.Request{Key: "K"}
	var runs atomic.Int32
	fn := func(context.Context) error { runs.Add(1); return nil }

	met := new(idem.KeyMet)
	_, err = guardlink.DoInBatch(context.Background(), g, req, met, fn)
	require.ErrorIs(t, err, idem.ErrInProgress, "the first call meets the owner's record")

	var panicked any
	func() {
		defer func() { panicked = recover() }()
		_, err = guardlink.DoInBatch(context.Background(), g, req, &met, fn)
	}()
	assert.Zero(t, runs.Load(),
		"a met of another type (%T) was taken as nil: the handler ran unguarded over the live run (err %v)", &met, err)
	assert.True(t, panicked != nil || err != nil,
		"DoInBatch neither panicked on a met of another type, as guardlink's doc says, nor failed: %v", err)
}
