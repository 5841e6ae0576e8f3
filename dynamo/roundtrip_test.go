package dynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
)

// TestRoundTrips counts the requests each store operation and each guarded path sends to
// DynamoDB: the budget in DESIGN.md.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newLedger(t, e.client)
	ctx := context.Background()
	now := wallClock()
	e.api.Take()

	rec := record("rt/store", now, "tok")
	_, claimed, err := e.store.Claim(ctx, rec, now)
	require.NoError(t, err)
	require.True(t, claimed)
	assert.Equal(t, map[string]int{"PutItem": 1}, e.api.Take(), "claim of a new key")

	_, claimed, err = e.store.Claim(ctx, record(rec.Key, now, "tok2"), now)
	require.NoError(t, err)
	require.False(t, claimed)
	assert.Equal(t, map[string]int{"PutItem": 1}, e.api.Take(), "claim conflict: the holder comes back with the failure")

	done := *rec
	done.Status = idemstore.StatusCompleted
	require.NoError(t, e.store.Complete(ctx, &done, nil))
	assert.Equal(t, map[string]int{"UpdateItem": 1}, e.api.Take(), "complete")

	rec2 := record("rt/attached", now, "tok")
	seed(t, e.store, rec2)
	e.api.Take()
	done2 := *rec2
	done2.Status = idemstore.StatusCompleted
	require.NoError(t, e.store.Complete(ctx, &done2, []any{l.add("a", 1, false), l.add("b", 1, false)}))
	assert.Equal(t, map[string]int{"TransactWriteItems": 1}, e.api.Take(), "complete with attachments")

	g, err := idem.New(e.store, "test", idem.WithScope("rt"))
	require.NoError(t, err)
	type out struct{ N int }
	cases := []struct {
		name   string
		key    string
		attach bool
		want   map[string]int
	}{
		{"NewKey", "new", false, map[string]int{"PutItem": 1, "UpdateItem": 1}},
		{"Replay", "new", false, map[string]int{"PutItem": 1}},
		{"NewKeyWithAttachments", "attached", true, map[string]int{"PutItem": 1, "TransactWriteItems": 1}},
		{"ReplayWithAttachments", "attached", true, map[string]int{"PutItem": 1}},
	}
	for _, tc := range cases {
		// Sequential: each case builds on the one before.
		e.api.Take()
		_, _, err := idem.Do(ctx, g, idem.Request{Key: tc.key}, func(ctx context.Context) (out, error) {
			if tc.attach {
				return out{N: 1}, dynamo.Attach(ctx, l.add("guarded", 1, false))
			}
			return out{N: 1}, nil
		})
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, e.api.Take(), tc.name)
	}
	assert.Equal(t, 1, l.balance(t, "guarded"))

	// A result too large for a 1 KB record is kept in an item of its own: one call more to
	// store it, and one more to read it on a replay, which then costs one write unit rather
	// than one per KB of the result (see TestWriteUnits).
	large := randomJSONText(8 << 10)
	for _, tc := range []struct {
		name string
		want map[string]int
	}{
		{"NewKeyLargeResult", map[string]int{"PutItem": 2, "UpdateItem": 1}},
		{"ReplayLargeResult", map[string]int{"PutItem": 1, "GetItem": 1}},
	} {
		e.api.Take()
		_, _, err := idem.Do(ctx, g, idem.Request{Key: "large"}, func(context.Context) (string, error) { return large, nil })
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, e.api.Take(), tc.name)
	}

	// Taking over a dead owner's record that holds a checkpoint costs one more claim, which
	// carries the checkpoint into the new record (and no separate checkpoint write).
	dead := record(mustStoredKey(t, g, "takeover"), now, "dead")
	dead.Fingerprint, dead.LeaseExpires, dead.Checkpoint = "", now.Add(-time.Minute), "charged"
	seed(t, e.store, dead)
	e.api.Take()
	seen := ""
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "takeover"}, func(ctx context.Context) (out, error) {
		seen = idem.LastCheckpoint(ctx)
		return out{N: 1}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, "charged", seen)
	assert.Equal(t, map[string]int{"PutItem": 2, "UpdateItem": 1}, e.api.Take(), "takeover of a checkpointed record")

	// An in-flight duplicate costs one round trip as well.
	hold, started := make(chan struct{}), make(chan struct{})
	go func() {
		_, _, _ = idem.Do(ctx, g, idem.Request{Key: "inflight"}, func(context.Context) (out, error) {
			close(started)
			<-hold
			return out{}, nil
		})
	}()
	<-started
	e.api.Take()
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "inflight"}, func(context.Context) (out, error) { return out{}, nil })
	require.ErrorIs(t, err, idem.ErrInProgress)
	assert.Equal(t, map[string]int{"PutItem": 1}, e.api.Take(), "in-flight duplicate")
	close(hold)
	require.Eventually(t, func() bool {
		rec, err := e.store.Get(ctx, mustStoredKey(t, g, "inflight"))
		return err == nil && rec != nil && rec.Status == idemstore.StatusCompleted
	}, 10*time.Second, 10*time.Millisecond)
}

func mustStoredKey(t *testing.T, g *idem.Guard, key string) string {
	t.Helper()
	sk, err := g.StoredKey(idem.Request{Key: key})
	require.NoError(t, err)
	return sk
}

// TestLateWritesRoundTrips: on DynamoDB Local, an extension met by a later end of ours and
// a late checkpoint write each cost the one refused UpdateItem: the refused extension
// decides from the item its refusal returns, never from a read.
func TestLateWritesRoundTrips(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := wallClock()
	rec := record("rt/late", now, "tok")
	seed(t, e.store, rec)
	require.NoError(t, e.store.Extend(ctx, rec.Key, "tok", now.Add(10*time.Minute)))
	require.NoError(t, e.store.SetCheckpoint(ctx, rec.Key, "tok", "shipped", 2))
	e.api.Take()

	require.NoError(t, e.store.Extend(ctx, rec.Key, "tok", now.Add(5*time.Minute)))
	assert.Equal(t, map[string]int{"UpdateItem": 1}, e.api.Take(), "a late extension")
	require.ErrorIs(t, e.store.SetCheckpoint(ctx, rec.Key, "tok", "charged", 1), idem.ErrLeaseLost)
	assert.Equal(t, map[string]int{"UpdateItem": 1}, e.api.Take(), "a late checkpoint")
	require.NoError(t, e.store.SetCheckpoint(ctx, rec.Key, "tok", "shipped", 2))
	assert.Equal(t, map[string]int{"UpdateItem": 1}, e.api.Take(), "a resent checkpoint")
}
