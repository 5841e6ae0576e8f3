package idem_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// awaitCancel waits, from inside a guarded handler on clock, until the lease watchdog has
// armed its timer, moves the clock to it, and returns the simulated time at which ctx
// ended. A context that does not end fails the test (after a long wall-time guard against
// a hung test, not a timing).
func awaitCancel(t *testing.T, clock *storetest.SimulatedClock, ctx context.Context) time.Time {
	t.Helper()
	wait, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.True(t, clock.WaitAfterCalls(wait, 1), "the lease watchdog does not wait on the clock")
	require.True(t, clock.AdvanceToNext(wait), "the lease watchdog set no timer")
	select {
	case <-ctx.Done():
		return clock.Now()
	case <-wait.Done():
		require.Fail(t, "the handler's context outlived its lease")
		return time.Time{}
	}
}

// TestLeaseWatchdogEndsTheHandlersContext: without a heartbeat, whenever the lease ends
// (less the margin) before the context's deadline, or the context has none, the handler's
// context ends at the lease end less the margin, with a cause wrapping ErrLeaseLost, so a
// handler that honours its context never runs on once a caller whose clock runs ahead by
// the margin may take the key over. Without a deadline the lease is WithLease (capped by
// WithMaxLease) plus the margin, and the context ends when the WithLease part is over.
func TestLeaseWatchdogEndsTheHandlersContext(t *testing.T) {
	t.Parallel()
	const margin = 2 * time.Second
	tests := []struct {
		name      string
		deadline  time.Duration // from the claim; 0 for none
		lease     time.Duration
		maxLease  time.Duration
		wantLease time.Duration // the lease granted, from the claim
	}{
		{name: "no deadline", lease: time.Minute, maxLease: time.Hour, wantLease: time.Minute + margin},
		{name: "no deadline, WithMaxLease below WithLease", lease: time.Minute, maxLease: 30 * time.Second, wantLease: 30*time.Second + margin},
		{name: "deadline beyond WithMaxLease", deadline: time.Hour, lease: time.Minute, maxLease: 10 * time.Minute, wantLease: 10*time.Minute + margin},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := storetest.NewSimulatedClock()
			s := memstore.New()
			var lost atomic.Int32
			g, err := idem.New(s, "test", idem.WithClock(clock), idem.WithLease(tc.lease), idem.WithMaxLease(tc.maxLease),
				idem.WithLeaseMargin(margin), idem.WithHooks(idem.Hooks{OnLeaseLost: func(context.Context, idem.Event) { lost.Add(1) }}))
			require.NoError(t, err)
			ctx := deadlineIn(t, clock, tc.deadline)
			claimed := clock.Now()
			sk, _ := g.StoredKey(idem.Request{Key: "k"})
			var cancelledAt, leaseEnd time.Time
			_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, func(hctx context.Context) (int, error) {
				rec, err := s.Get(context.Background(), sk)
				require.NoError(t, err)
				leaseEnd = rec.LeaseExpires
				cancelledAt = awaitCancel(t, clock, hctx)
				return 0, context.Cause(hctx)
			})
			require.ErrorIs(t, err, idem.ErrLeaseLost, "the cause reaches the caller through the handler's error")
			assert.Equal(t, tc.wantLease, leaseEnd.Sub(claimed), "the lease granted")
			assert.Equal(t, margin, leaseEnd.Sub(cancelledAt), "cancelled at the lease end less the margin")
			assert.EqualValues(t, 1, lost.Load(), "OnLeaseLost")
			assert.NoError(t, ctx.Err(), "the caller's own context is untouched")

			v, _, err := idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 2, nil })
			require.NoError(t, err, "the handler gave up: its key was released")
			assert.Equal(t, 2, v)
		})
	}
}

// TestHandlerNotStartedWithinTheMargin: a batch request that would start once its lease,
// taken at Claim, is within one margin of its end does not run: a caller whose clock runs
// ahead by less than the margin may own the key by then.
func TestHandlerNotStartedWithinTheMargin(t *testing.T) {
	t.Parallel()
	const margin = 2 * time.Second
	clock := storetest.NewSimulatedClock()
	g, err := idem.New(newCountingBatch(), "test", idem.WithClock(clock), idem.WithMaxLease(time.Minute), idem.WithLeaseMargin(margin))
	require.NoError(t, err)
	ctx := deadlineIn(t, clock, time.Hour)
	b := g.Claim(ctx, reqs("k", 2))
	clock.Advance(time.Minute + time.Second) // past the lease end less the margin, before its end
	ran := false
	_, _, err = idem.DoClaimed(ctx, b, 0, func(hctx context.Context) (int, error) {
		ran = true
		return 0, nil
	})
	// A caller whose clock runs ahead by less than the margin may own the key already, so
	// the handler does not start at all (TestHoleDoClaimedStartsWithinTheMargin).
	require.False(t, ran, "a handler never starts within the margin of its lease end")
	require.ErrorIs(t, err, idem.ErrLeaseLost)
}

// TestHeartbeatFirstBeatCountsFromTheClaim: a batch request that starts an interval or more
// after its claim extends its lease at once. Counted from the handler's start, the first
// beat would come after the lease's point of loss, and the handler's context would end
// although the store was healthy.
func TestHeartbeatFirstBeatCountsFromTheClaim(t *testing.T) {
	t.Parallel()
	const margin, beat = 2 * time.Second, 20 * time.Second
	clock := storetest.NewSimulatedClock()
	s := newExtendStore(1 << 30)
	batch := &countingBatch{counting: newCounting(s), bs: s.Store} // extensions go to s
	g, err := idem.New(batch, "test", idem.WithClock(clock), idem.WithMaxLease(time.Minute),
		idem.WithLeaseMargin(margin), idem.WithHeartbeat(beat))
	require.NoError(t, err)
	ctx := deadlineIn(t, clock, time.Hour)
	b := g.Claim(ctx, reqs("k", 2))
	sk, _ := g.StoredKey(reqs("k", 1)[0])
	clock.Advance(59 * time.Second) // the lease ends at 62 s, its point of loss at 60 s
	started := clock.Now()
	_, _, err = idem.DoClaimed(ctx, b, 0, func(hctx context.Context) (int, error) {
		wait, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hung test, not a timing
		defer cancel()
		select {
		case err := <-s.calls:
			require.NoError(t, err)
		case <-hctx.Done():
			require.Fail(t, "the handler's context ended without an extension", context.Cause(hctx))
		case <-wait.Done():
			require.Fail(t, "no extension before the lease's point of loss")
		}
		require.True(t, clock.WaitAfterCalls(wait, 2), "the heartbeat took in the extension")
		require.NoError(t, hctx.Err())
		rec, err := s.Get(context.Background(), sk)
		require.NoError(t, err)
		assert.Equal(t, time.Minute+margin, rec.LeaseExpires.Sub(started), "extended at the handler's start")
		return 1, nil
	})
	require.NoError(t, err)
}

func TestHeartbeatExtendsLease(t *testing.T) {
	t.Parallel()
	clock := storetest.NewSettableClock()
	s := memstore.New()
	g, err := idem.New(s, "test", idem.WithClock(clock), idem.WithLease(time.Minute), idem.WithHeartbeat(2*time.Millisecond))
	require.NoError(t, err)
	sk, _ := g.StoredKey(idem.Request{Key: "hb"})
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "hb"}, func(ctx context.Context) (int, error) {
		clock.Advance(50 * time.Second)
		require.Eventually(t, func() bool {
			rec, _ := s.Get(ctx, sk)
			return rec.LeaseExpires.Equal(clock.Now().Add(time.Minute + idem.DefaultLeaseMargin))
		}, 5*time.Second, time.Millisecond)
		return 1, nil
	})
	require.NoError(t, err)
}

func TestHeartbeatCancelsOnLostLease(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	g, err := idem.New(s, "test", idem.WithHeartbeat(time.Millisecond))
	require.NoError(t, err)
	sk, _ := g.StoredKey(idem.Request{Key: "hb"})
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "hb"}, func(ctx context.Context) (int, error) {
		rec, _ := s.Get(ctx, sk)
		rec.LeaseToken = "someone-else" // another owner took over
		s.Put(*rec)
		<-ctx.Done()
		return 0, context.Cause(ctx)
	})
	require.ErrorIs(t, err, idem.ErrLeaseLost)
}

// TestHeartbeatCancelsBeforeAnUnextendedLeaseEnds makes lease extensions fail with store
// errors: the handler's context must end, with cause ErrLeaseLost, when the lease last
// confirmed (at the claim, or by the last successful extension) is one margin from its end,
// where a caller whose clock runs ahead by the margin may take the key over.
func TestHeartbeatCancelsBeforeAnUnextendedLeaseEnds(t *testing.T) {
	t.Parallel()
	const beat, margin = 20 * time.Second, 2 * time.Second
	tests := []struct {
		name     string
		okBeats  int
		deadline time.Duration // from the claim; 0 for none
		maxLease time.Duration
		// wantCancel is when, after the claim, the context must end.
		wantCancel time.Duration
	}{
		{name: "no deadline, every extension fails", maxLease: time.Hour, wantCancel: time.Minute},
		{name: "no deadline, extensions fail after two", okBeats: 2, maxLease: time.Hour, wantCancel: 2*beat + time.Minute},
		{name: "deadline beyond the max lease, every extension fails", deadline: time.Hour, maxLease: 10 * time.Minute, wantCancel: 10 * time.Minute},
		{name: "deadline beyond the max lease, extensions fail after one", okBeats: 1, deadline: time.Hour, maxLease: 10 * time.Minute, wantCancel: beat + 10*time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := storetest.NewSimulatedClock()
			s := newExtendStore(tc.okBeats)
			var lost atomic.Int32
			g, err := idem.New(s, "test", idem.WithClock(clock), idem.WithLease(time.Minute), idem.WithMaxLease(tc.maxLease),
				idem.WithLeaseMargin(margin), idem.WithHeartbeat(beat),
				idem.WithHooks(idem.Hooks{OnLeaseLost: func(context.Context, idem.Event) { lost.Add(1) }}))
			require.NoError(t, err)
			ctx := deadlineIn(t, clock, tc.deadline)
			claimed := clock.Now()
			sk, _ := g.StoredKey(idem.Request{Key: "k"})
			var cancelledAt time.Time
			var leaseEnd time.Time
			_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (int, error) {
				cancelledAt = clock.DriveHeartbeat(t, ctx, s.calls, 100, nil)
				rec, err := s.Get(context.Background(), sk)
				require.NoError(t, err)
				leaseEnd = rec.LeaseExpires
				return 0, context.Cause(ctx)
			})
			require.False(t, cancelledAt.IsZero(), "the handler's context was never cancelled while every extension failed")
			require.ErrorIs(t, err, idem.ErrLeaseLost, "the cause reaches the caller through the handler's error")
			assert.Equal(t, tc.wantCancel, cancelledAt.Sub(claimed), "cancelled at the confirmed lease end less the margin")
			assert.GreaterOrEqual(t, leaseEnd.Sub(cancelledAt), margin, "no caller within the skew margin could take the key over yet")
			assert.EqualValues(t, 1, lost.Load(), "OnLeaseLost")

			v, replayed, err := idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 2, nil })
			require.NoError(t, err, "the handler gave up: its key was released")
			assert.False(t, replayed)
			assert.Equal(t, 2, v)
		})
	}
}

// TestHeartbeatKeepsTheLease lets every extension succeed for longer than any single
// lease, with and without a deadline beyond the max lease: the handler's context is never
// cancelled, every beat leaves the lease at least min(WithLease, WithMaxLease) ahead, and
// another caller finds the key in progress throughout.
func TestHeartbeatKeepsTheLease(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		deadline time.Duration
		maxLease time.Duration
		ahead    time.Duration // the least lease left after a beat
	}{
		{name: "no deadline", maxLease: 15 * time.Minute, ahead: time.Minute},
		{name: "deadline beyond the max lease", deadline: 2 * time.Hour, maxLease: 5 * time.Minute, ahead: 5 * time.Minute},
		{name: "lease capped by the max lease", maxLease: 40 * time.Second, ahead: 40 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := storetest.NewSimulatedClock()
			s := newExtendStore(1 << 30)
			g, err := idem.New(s, "test", idem.WithClock(clock), idem.WithLease(time.Minute), idem.WithMaxLease(tc.maxLease), idem.WithHeartbeat(15*time.Second))
			require.NoError(t, err)
			other, err := idem.New(s, "test", idem.WithClock(clock))
			require.NoError(t, err)
			ctx := deadlineIn(t, clock, tc.deadline)
			start := clock.Now()
			sk, _ := g.StoredKey(idem.Request{Key: "k"})
			v, _, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (int, error) {
				cancelled := clock.DriveHeartbeat(t, ctx, s.calls, 160, func(err error) {
					require.NoError(t, err)
					rec, err := s.Get(context.Background(), sk)
					require.NoError(t, err)
					assert.GreaterOrEqual(t, rec.LeaseExpires.Sub(clock.Now()), tc.ahead)
					_, _, err = idem.Do(context.Background(), other, idem.Request{Key: "k"}, func(context.Context) (int, error) {
						t.Error("another caller ran while the owner's heartbeat held the lease")
						return 0, nil
					})
					require.ErrorIs(t, err, idem.ErrInProgress)
				})
				assert.True(t, cancelled.IsZero(), "cancelled at %s", cancelled.Sub(start))
				return 1, nil
			})
			require.NoError(t, err)
			assert.Equal(t, 1, v)
			assert.GreaterOrEqual(t, clock.Now().Sub(start), 40*time.Minute, "the handler outlived any single lease")
		})
	}
}

// TestHoleHeartbeatShortensTheStoredLease: a heartbeat extension can move the stored lease
// end EARLIER than the end the watchdog believes confirmed, and the watchdog then keeps the
// handler's context alive past the stored lease, while another caller takes the key over.
//
// Path: Guard.Claim(ctx1) with a deadline an hour out (WithMaxLease an hour) writes a lease
// ending claim+1h+margin, and the lease records that as confirmed. DoClaimed(ctx2) runs the
// handler on a context without a deadline (the API allows any context per DoClaimed). The
// first beat (watchdog.extend) computes its end from ctx2: leaseEnd(ctx2, now) =
// ownerLeaseEnd(now) = now+WithLease+margin, far BEFORE the claimed end, and Store.Extend
// sets it unconditionally (MemStore and the DynamoDB store both SET the attribute). apply
// keeps the later, stale confirmed end (it only moves confirmedEnd forward). Later
// extensions fail with store errors (throttling), so the stored lease lapses at
// beat+WithLease+margin; the watchdog, still believing claim+1h, never cancels. Another
// caller claims the lapsed key and runs the handler: two executions, and the first
// handler's context outlives its lease by nearly an hour.
func TestHoleHeartbeatShortensTheStoredLease(t *testing.T) {
	t.Parallel()
	const beat, margin = 20 * time.Second, 2 * time.Second
	clock := storetest.NewSimulatedClock()
	s := newExtendStore(1) // the first extension lands, every later one is throttled
	g, err := idem.New(s, "test", idem.WithClock(clock), idem.WithLease(time.Minute), idem.WithMaxLease(time.Hour),
		idem.WithLeaseMargin(margin), idem.WithHeartbeat(beat))
	require.NoError(t, err)

	b := g.Claim(deadlineIn(t, clock, time.Hour), []idem.Request{{Key: "k"}, {Key: "pad"}})
	claimedAt := clock.Now()
	sk, _ := g.StoredKey(idem.Request{Key: "k"})

	var runs atomic.Int32
	var aliveAfterLapse bool
	var storedEnd time.Time
	_, _, _ = idem.DoClaimed(context.Background(), b, 0, func(ctx context.Context) (int, error) {
		runs.Add(1)
		// Five beats: at +20s (lands, shortening the stored lease to +82s), +40s, +60s,
		// +80s, +100s (throttled).
		clock.DriveHeartbeat(t, ctx, s.calls, 5, nil)
		rec, err := s.Get(context.Background(), sk)
		require.NoError(t, err)
		storedEnd = rec.LeaseExpires
		aliveAfterLapse = ctx.Err() == nil && !clock.Now().Before(storedEnd)

		// Another caller, on the same clock (no skew at all), finds the lease lapsed.
		_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) {
			runs.Add(1)
			return 2, nil
		})
		t.Logf("second caller: err=%v", err)
		return 1, nil
	})
	t.Logf("claimed lease end +%s, stored lease end after the first beat +%s, clock at +%s",
		time.Hour+margin, storedEnd.Sub(claimedAt), clock.Now().Sub(claimedAt))
	assert.False(t, aliveAfterLapse, "the handler's context outlived the stored lease")
	assert.EqualValues(t, 1, runs.Load(), "the guarded handler ran more than once for one key")
}
