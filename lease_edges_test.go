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
	clock := storetest.NewManualClock()
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

// TestHoleDoClaimedStartsWithinTheMargin: DoClaimed refuses to start a request whose lease
// has ended (now >= LeaseExpires), but not one whose lease is within the margin of its end,
// although the margin is exactly the skew the guard claims to tolerate: a caller whose
// clock runs ahead by the margin may already have taken the key over. DoClaimed then runs
// the handler anyway, on a context that has ended before it starts (watch); a handler whose
// side effect does not look at its context runs a second time.
//
// Path: Guard.Claim without a deadline at T0 (lease ends T0+WithLease+margin). The batch
// reaches request 0 at T0+WithLease+margin/2. Caller B, whose clock is 1.5s ahead
// (1.5s, within the 2s margin), sees the lease ended and runs the key. Then DoClaimed on the owner:
// g.now() < it.rec.LeaseExpires, so it runs fn.
func TestHoleDoClaimedStartsWithinTheMargin(t *testing.T) {
	t.Parallel()
	const lease, margin = time.Minute, 2 * time.Second
	store := memstore.New()
	clockA := storetest.NewManualClock()
	clockB := storetest.NewManualClock()
	clockB.Advance(1500 * time.Millisecond) // B runs ahead of A by 1.5s: within the 2s margin
	gA, err := idem.New(store, "test", idem.WithClock(clockA), idem.WithLease(lease), idem.WithLeaseMargin(margin))
	require.NoError(t, err)
	gB, err := idem.New(store, "test", idem.WithClock(clockB), idem.WithLease(lease), idem.WithLeaseMargin(margin))
	require.NoError(t, err)

	b := gA.Claim(context.Background(), []idem.Request{{Key: "k"}, {Key: "pad"}})
	clockA.Advance(lease + margin/2)
	clockB.Advance(lease + margin/2)

	var runs atomic.Int32
	_, _, errB := idem.Do(context.Background(), gB, idem.Request{Key: "k"}, func(context.Context) (int, error) {
		runs.Add(1)
		return 2, nil
	})
	var startedOnEndedCtx bool
	_, _, errA := idem.DoClaimed(context.Background(), b, 0, func(ctx context.Context) (int, error) {
		startedOnEndedCtx = ctx.Err() != nil
		runs.Add(1) // a side effect that does not take the context
		return 1, nil
	})
	t.Logf("B: %v; A: %v; A's handler started on an ended context: %v", errB, errA, startedOnEndedCtx)
	assert.EqualValues(t, 1, runs.Load(), "the guarded handler ran more than once for one key")
}
