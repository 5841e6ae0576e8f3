package idem_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// lateFirstAttempt is a store that keeps the first claim of a chosen guard's token (the
// first attempt the network delays) while the same claim goes through (the SDK's resend),
// and lands it on demand, as it was sent.
type lateFirstAttempt struct {
	idemstore.Store
	mu   sync.Mutex
	arm  bool
	kept *idemstore.Record
	at   time.Time
}

func (s *lateFirstAttempt) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	s.mu.Lock()
	if s.arm && s.kept == nil {
		c := *rec
		s.kept, s.at = &c, now
	}
	s.mu.Unlock()
	return s.Store.Claim(ctx, rec, now)
}

func (s *lateFirstAttempt) land(ctx context.Context) (bool, error) {
	s.mu.Lock()
	rec, at := s.kept, s.at
	s.mu.Unlock()
	_, claimed, err := s.Store.Claim(ctx, rec, at)
	return claimed, err
}

// TestLateClaimFromClockAheadHoldsKeyOneLease pins a documented residual
// (RELIABILITY.md, late deliveries; Store.Release): a claim sent before a release and
// delivered after it is refused by its time only if its sender's clock is not ahead of
// the releaser's. A caller whose clock runs ahead (by less than the lease margin, the skew
// the design tolerates) sent a now later than the release's, so its late claim takes the
// tombstone over: the key is held in progress, by nobody, for that caller's lease, and
// retries meanwhile are told the key is in progress. The bound: once that lease ends, the
// key is free, and the next retry runs it once. Nothing runs twice.
//
//  1. X (clock on time) claims K and runs.
//  2. While X runs, C (clock 1 s ahead) sends a claim of K. Its first attempt is delayed
//     in the network; the SDK's resend meets X's live lease: C is told ErrInProgress.
//  3. X's handler fails 100 ms later: X releases K (tombstone, lease ended at X's now).
//  4. C's first attempt lands: at C's now the tombstone's lease has ended, and its token
//     is not C's: the claim takes the key for no one.
//  5. A retry 30 s later is told the key is in progress until C's lease ends (a lease,
//     plus the margin, from C's now).
//  6. A retry at that end runs K, once.
func TestLateClaimFromClockAheadHoldsKeyOneLease(t *testing.T) {
	mem := memstore.New()
	store := &lateFirstAttempt{Store: mem}
	base := storetest.NewSettableClock()
	gX, err := idem.New(store, "op", idem.WithScope("test"), idem.WithClock(base))
	require.NoError(t, err)
	const skew = time.Second
	gC, err := idem.New(store, "op", idem.WithScope("test"), idem.WithClock(storetest.SkewedClock{Base: base, Offset: skew}))
	require.NoError(t, err)
	ctx := context.Background()
	boom := errors.New("boom")
	req := idem.Request{Key: "K"}

	var sent time.Time // when C sent its claim, on X's clock
	_, _, err = idem.Do(ctx, gX, req, func(context.Context) (int, error) {
		base.Advance(10 * time.Millisecond)
		store.mu.Lock()
		store.arm = true
		store.mu.Unlock()
		sent = base.Now()
		_, _, cerr := idem.Do(ctx, gC, req, func(context.Context) (int, error) {
			t.Error("C ran while X held the key")
			return 0, nil
		})
		require.ErrorIs(t, cerr, idem.ErrInProgress, "C's resend meets X's live lease")
		store.mu.Lock()
		store.arm = false
		store.mu.Unlock()
		base.Advance(100 * time.Millisecond)
		return 0, boom
	})
	require.ErrorIs(t, err, boom)

	base.Advance(10 * time.Millisecond)
	claimed, err := store.land(ctx) // C's first attempt, sent before X's release
	require.NoError(t, err)
	assert.True(t, claimed, "the residual: a late claim from a clock ahead takes the tombstone over")

	base.Advance(30 * time.Second)
	var runs atomic.Int32
	run := func(context.Context) (int, error) {
		runs.Add(1)
		return 1, nil
	}
	_, _, err = idem.Do(ctx, gX, req, run)
	var ipe *idem.InProgressError
	require.ErrorAs(t, err, &ipe, "the key is held for C's lease")
	end := sent.Add(skew + idem.DefaultLease + idem.DefaultLeaseMargin) // C's now plus its lease
	assert.True(t, ipe.LeaseExpires.Equal(end), "held until %v, want the late claimer's lease end %v", ipe.LeaseExpires, end)
	assert.Zero(t, runs.Load())

	base.Advance(ipe.LeaseExpires.Sub(base.Now()))
	v, replayed, err := idem.Do(ctx, gX, req, run)
	require.NoError(t, err, "once the late claimer's lease ends, the key is free")
	assert.False(t, replayed)
	assert.Equal(t, 1, v)
	assert.EqualValues(t, 1, runs.Load(), "K ran once since X's release")
}
