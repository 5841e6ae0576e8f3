package redisstore_test

// Hostile review of redisstore: each test drives one exact state against the real server
// and states what the Store contract (idemstore/store.go) requires.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// The server's clock ahead of the callers' by d = 5s (less than the default expiry window
// of an hour, and more than the default lease margin of 2s). The record is in the state a
// heartbeat leaves it in once the watchdog has extended the lease to its cap, the record's
// Expires (watchdog.go: "never past the record's expiry"). The owner's handler context
// ends at LeaseExpires - margin = now+1s. The documentation says such a skew does not
// affect the lease "unless d exceeds" the expiry window; but PEXPIREAT runs on the
// server's clock, so the live lease vanishes at once and a second claim at now+10ms wins
// while the first owner's handler is still running: two runs of one key.
func TestReviewServerClockAheadEndsHeartbeatLease(t *testing.T) {
	s := newStore(t, env.Client(t))
	ctx := context.Background()
	callerNow := time.Now().Add(-5 * time.Second) // the callers' clock, 5s behind the server's
	end := callerNow.Add(3 * time.Second)
	a := &idemstore.Record{Key: "k", Status: idemstore.StatusInProgress, Expires: end, LeaseExpires: end,
		LeaseToken: "A", Version: idemstore.SchemaVersion}
	_, ok, err := s.Claim(ctx, a, callerNow)
	require.NoError(t, err)
	require.True(t, ok)

	later := callerNow.Add(10 * time.Millisecond)
	b := inProgress("k", "B", later)
	prev, ok, err := s.Claim(ctx, b, later)
	require.NoError(t, err)
	t.Logf("second claim at caller time +10ms: claimed=%v prev=%+v (A's lease runs to +3s, its handler to +1s)", ok, prev)
	require.False(t, ok, "a claim took over a live lease: the key's handler runs twice")
}

// Boundary instants, with ends that are not whole milliseconds: a record never counts as
// expired (or its lease as ended) before the instant asked for, and does at that instant
// once the stored, rounded-up end is reached.
func TestReviewBoundaryInstants(t *testing.T) {
	s := newStore(t, env.Client(t))
	ctx := context.Background()
	now := time.Date(2100, 1, 2, 3, 4, 5, 600_000_001, time.UTC)
	rec := inProgress("k", "A", now)
	rec.LeaseExpires = now.Add(time.Minute + 500*time.Microsecond)
	_, ok, err := s.Claim(ctx, rec, now)
	require.NoError(t, err)
	require.True(t, ok)

	for _, at := range []time.Time{rec.LeaseExpires.Add(-time.Nanosecond), rec.LeaseExpires} {
		_, ok, err := s.Claim(ctx, inProgress("k", "B", at), at)
		require.NoError(t, err)
		if ok {
			require.False(t, at.Before(rec.LeaseExpires), "claimed at %v, before the lease end %v", at, rec.LeaseExpires)
		}
	}
	stored := time.UnixMilli(rec.LeaseExpires.UnixMilli() + 1)
	_, ok, err = s.Claim(ctx, inProgress("k", "B", stored), stored)
	require.NoError(t, err)
	require.True(t, ok, "not claimable at the stored (rounded-up) lease end")
}

// Fencing after a release with a checkpoint and a takeover, and a late completion after the
// record's key has expired: nothing of the fenced-off owner lands, nothing is recreated.
func TestReviewFencing(t *testing.T) {
	s := newStore(t, env.Client(t))
	ctx := context.Background()
	now := time.Now()
	a := inProgress("k", "A", now)
	_, ok, err := s.Claim(ctx, a, now)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.SetCheckpoint(ctx, "k", "A", "c1"))
	require.NoError(t, s.Release(ctx, "k", "A"))
	for name, err := range map[string]error{
		"checkpoint": s.SetCheckpoint(ctx, "k", "A", "c2"),
		"extend":     s.Extend(ctx, "k", "A", now.Add(time.Hour)),
		"release":    s.Release(ctx, "k", "A"),
		"complete": s.Complete(ctx, &idemstore.Record{Key: "k", Status: idemstore.StatusCompleted,
			Expires: now.Add(time.Hour), LeaseToken: "A", Version: 1}, nil),
	} {
		require.ErrorIs(t, err, idem.ErrLeaseLost, name)
	}
	got, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "c1", got.Checkpoint)

	// The takeover must carry c1; without it, it is refused with the record.
	prev, ok, err := s.Claim(ctx, inProgress("k", "B", now), now)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, "c1", prev.Checkpoint)
	b := inProgress("k", "B", now)
	b.Expires = now.Add(300 * time.Millisecond)
	b.LeaseExpires = b.Expires
	b.Checkpoint = "c1"
	_, ok, err = s.Claim(ctx, b, now)
	require.NoError(t, err)
	require.True(t, ok)
	time.Sleep(500 * time.Millisecond) // Redis deletes the key at Expires
	err = s.Complete(ctx, &idemstore.Record{Key: "k", Status: idemstore.StatusCompleted,
		Expires: time.Now().Add(time.Hour), LeaseToken: "B", Version: 1}, nil)
	require.ErrorIs(t, err, idem.ErrLeaseLost)
	got, err = s.Get(ctx, "k")
	require.NoError(t, err)
	require.Nil(t, got, "a completion after expiry recreated the record")
}
