package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// The suite's cases for writes that arrive late: an SDK resends a request whose
// connection broke, the resend applies, the owner goes on, and the first attempt still
// reaches the store afterwards.

// ownedRecord claims a fresh in-progress record for a new key directly on the store, with
// token tok and its lease ending at lease, and returns its stored key.
func ownedRecord(t *testing.T, f fixture, tok string, lease time.Time) string {
	t.Helper()
	now := f.clock.Now()
	rec := &idemstore.Record{
		Key:          storedKey(t, f.guard, key(t)),
		Status:       idemstore.StatusInProgress,
		Expires:      now.Add(time.Hour),
		LeaseExpires: lease,
		LeaseToken:   tok,
		Version:      idemstore.SchemaVersion,
	}
	_, claimed, err := f.store.Claim(context.Background(), rec, now)
	require.NoError(t, err)
	require.True(t, claimed)
	return rec.Key
}

// lateExtension sends an extension to an earlier end than the stored one, as the first
// attempt of an earlier beat lands after a later beat: it succeeds (the lease is ours and
// ends later still) and leaves the later end, which the owner's watchdog counts on.
func (h Harness) lateExtension(t *testing.T) {
	f := h.fixture(t)
	ctx := context.Background()
	now := f.clock.Now()
	k := ownedRecord(t, f, "tok", now.Add(time.Minute))

	later, earlier := now.Add(10*time.Minute), now.Add(5*time.Minute)
	require.NoError(t, f.store.Extend(ctx, k, "tok", later))
	assert.NoError(t, f.store.Extend(ctx, k, "tok", earlier), "an extension met by a later end of ours succeeds")
	rec, err := f.store.Get(ctx, k)
	require.NoError(t, err)
	require.NotNil(t, rec)
	assert.True(t, rec.LeaseExpires.Equal(later), "stored lease end %v, want the later %v", rec.LeaseExpires, later)

	assert.NoError(t, f.store.Extend(ctx, k, "tok", later), "the same end again (a resend) succeeds")
	assert.ErrorIs(t, f.store.Extend(ctx, k, "other", now.Add(time.Hour)), idem.ErrLeaseLost)
	rec, err = f.store.Get(ctx, k)
	require.NoError(t, err)
	assert.True(t, rec.LeaseExpires.Equal(later), "another token's extension changes nothing")
}
