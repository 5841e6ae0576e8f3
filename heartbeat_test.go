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
)

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
			clock := storetest.NewManualClock()
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
			clock := storetest.NewManualClock()
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
