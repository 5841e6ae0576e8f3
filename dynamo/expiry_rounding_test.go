package dynamo_test

// Failing tests from the final hostile review (branch final); none changes library code.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemstore"
)

// FINAL HOLE 2 (a run within the expiry window; the lease margin eaten by rounding).
//
// Path: the store writes a record's expiry in whole seconds, rounded down (encodeEpoch),
// and the claim condition is "#expiration <= :now" with now rounded down too. A record whose
// Expires is X.9 s is therefore claimable from X.0 s on, up to a second before the Expires
// the guard wrote and judges by (Record.expired, MemStore): the Store contract says a claim
// replaces a record only once it "is past its Expires".
//
//   - Completed record: a retry in the last second of the window runs the handler again
//     instead of replaying the first result (MemStore replays).
//   - In-progress record: the lease watchdog caps every heartbeat extension at the record's
//     Expires (watchdog.extend) and ends the handler's context only at Expires less the
//     margin, trusting the key to be held until Expires. The store frees it up to a second
//     earlier, so a handler whose extensions reached the cap (a heartbeated handler running
//     past WithLease plus WithExpiry) is taken over while its context still runs when the
//     margin is under a second (WithLeaseMargin allows 0), and with any margin the clock skew
//     the margin promises to tolerate shrinks by up to a second.
func TestFinalClaimBeforeExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	base := wallClock() // a whole second
	expires := base.Add(1900 * time.Millisecond)

	for _, tc := range []struct {
		name     string
		complete bool
	}{
		{name: "completed", complete: true},
		{name: "in progress, lease capped at the expiry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "final-expiry-" + tc.name
			first := record(key, base, "tok-1")
			first.Expires = expires
			first.LeaseExpires = expires // an extension capped at the record's expiry
			_, claimed, err := e.store.Claim(ctx, first, base)
			require.NoError(t, err)
			require.True(t, claimed)
			if tc.complete {
				done := *first
				done.Status, done.LeaseExpires = idemstore.StatusCompleted, time.Time{}
				done.Data, done.Encoding = []byte("1"), "json"
				require.NoError(t, e.store.Complete(ctx, &done, nil))
			}

			now := base.Add(1100 * time.Millisecond) // 800 ms before Expires
			second := record(key, now, "tok-2")
			prev, claimed, err := e.store.Claim(ctx, second, now)
			require.NoError(t, err)
			t.Logf("claim at %s, %s before the record's Expires: claimed %v, prev %+v", now.Format(time.StampMilli), expires.Sub(now), claimed, prev)
			assert.False(t, claimed, "a record before its Expires still holds its key")
		})
	}
}
