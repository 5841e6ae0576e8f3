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
func awaitCancel(t *testing.T, clock *storetest.ManualClock, ctx context.Context) time.Time {
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
			clock := storetest.NewManualClock()
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
	clock := storetest.NewManualClock()
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
	clock := storetest.NewManualClock()
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
