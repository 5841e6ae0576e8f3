package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/pgstore"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// inProgress returns a claim record of key for token at now with a one-minute lease.
func inProgress(key, token string, now time.Time) *idemstore.Record {
	return &idemstore.Record{Key: key, Status: idemstore.StatusInProgress, Expires: now.Add(time.Hour),
		LeaseExpires: now.Add(time.Minute), LeaseToken: token, Fingerprint: "fp", Version: idemstore.SchemaVersion}
}

func completed(rec *idemstore.Record, now time.Time) *idemstore.Record {
	done := *rec
	done.Status, done.Data, done.Encoding, done.LeaseExpires = idemstore.StatusCompleted, []byte(`{"n":1}`), "json", time.Time{}
	done.Expires = now.Add(time.Hour)
	return &done
}

func TestClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name    string
		setup   func(t *testing.T, s *pgstore.Store, key string) // leaves the key's record
		claimCP string
		// claimSeq is the number of the checkpoint the claim carries.
		claimSeq int64
		at       time.Duration // after t0
		claimed  bool
		prevTok  string // the refusing record's token
	}{
		{name: "Absent", setup: func(*testing.T, *pgstore.Store, string) {}, claimed: true},
		{name: "LiveLease", setup: claimAt("a", t0), at: 59 * time.Second, prevTok: "a"},
		{name: "LeaseEndsExactly", setup: claimAt("a", t0), at: time.Minute, claimed: true},
		{name: "LeaseEndedOneMicroLater", setup: claimAt("a", t0.Add(time.Nanosecond)), at: time.Minute, prevTok: "a"},
		{name: "Completed", setup: completeAt("a", t0), at: 30 * time.Minute, prevTok: "a"},
		{name: "CompletedExpired", setup: completeAt("a", t0), at: time.Hour, claimed: true},
		{name: "CheckpointNotCarried", setup: checkpointAt("a", "charged", t0), at: 2 * time.Minute, prevTok: "a"},
		{name: "CheckpointCarried", setup: checkpointAt("a", "charged", t0), claimCP: "charged", claimSeq: 1, at: 2 * time.Minute, claimed: true},
		{name: "CheckpointCarriedWithAnotherNumber", setup: checkpointAt("a", "charged", t0), claimCP: "charged", claimSeq: 2, at: 2 * time.Minute, prevTok: "a"},
		{name: "OtherCheckpoint", setup: checkpointAt("a", "charged", t0), claimCP: "shipped", at: 2 * time.Minute, prevTok: "a"},
		{name: "Released", setup: releasedAt("a", "charged", t0), claimCP: "charged", claimSeq: 1, at: time.Second, claimed: true},
	}
	s, _ := newStore(t, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := "claim#" + tc.name
			tc.setup(t, s, key)
			now := t0.Add(tc.at)
			rec := inProgress(key, "b", now)
			rec.Checkpoint, rec.CheckpointSeq = tc.claimCP, tc.claimSeq
			prev, claimed, err := s.Claim(ctx, rec, now)
			require.NoError(t, err)
			assert.Equal(t, tc.claimed, claimed)
			stored, err := s.Get(ctx, key)
			require.NoError(t, err)
			if tc.claimed {
				assert.Nil(t, prev)
				assert.Equal(t, "b", stored.LeaseToken)
				assert.Equal(t, tc.claimCP, stored.Checkpoint)
				return
			}
			require.NotNil(t, prev)
			assert.Equal(t, tc.prevTok, prev.LeaseToken)
			assert.Equal(t, stored, prev, "the refusing record, as stored")
		})
	}
}

func claimAt(token string, at time.Time) func(*testing.T, *pgstore.Store, string) {
	return func(t *testing.T, s *pgstore.Store, key string) {
		t.Helper()
		_, claimed, err := s.Claim(context.Background(), inProgress(key, token, at), at)
		require.NoError(t, err)
		require.True(t, claimed)
	}
}

func completeAt(token string, at time.Time) func(*testing.T, *pgstore.Store, string) {
	return func(t *testing.T, s *pgstore.Store, key string) {
		t.Helper()
		claimAt(token, at)(t, s, key)
		require.NoError(t, s.Complete(context.Background(), completed(inProgress(key, token, at), at), nil))
	}
}

func checkpointAt(token, cp string, at time.Time) func(*testing.T, *pgstore.Store, string) {
	return func(t *testing.T, s *pgstore.Store, key string) {
		t.Helper()
		claimAt(token, at)(t, s, key)
		require.NoError(t, s.SetCheckpoint(context.Background(), key, token, cp, 1))
	}
}

func releasedAt(token, cp string, at time.Time) func(*testing.T, *pgstore.Store, string) {
	return func(t *testing.T, s *pgstore.Store, key string) {
		t.Helper()
		checkpointAt(token, cp, at)(t, s, key)
		require.NoError(t, s.Release(context.Background(), key, token, at))
	}
}

// TestRecordRoundTrip stores every field and reads it back as written (ends rounded up to
// microseconds).
func TestRecordRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	now := t0.Add(123456789 * time.Nanosecond) // not a whole microsecond
	rec := inProgress("rt", "tok", now)
	_, claimed, err := s.Claim(ctx, rec, now)
	require.NoError(t, err)
	require.True(t, claimed)
	got, err := s.Get(ctx, "rt")
	require.NoError(t, err)
	want := *rec
	want.Expires, want.LeaseExpires = now.Add(time.Hour).Add(211*time.Nanosecond), now.Add(time.Minute).Add(211*time.Nanosecond)
	assert.Equal(t, &want, got)

	require.NoError(t, s.SetCheckpoint(ctx, "rt", "tok", "step-1", 1))
	done := completed(rec, now)
	done.Data = []byte{0, 1, 2, 0xff} // bytes, not text
	require.NoError(t, s.Complete(ctx, done, nil))
	got, err = s.Get(ctx, "rt")
	require.NoError(t, err)
	assert.Equal(t, idemstore.StatusCompleted, got.Status)
	assert.Equal(t, done.Data, got.Data)
	assert.Equal(t, "json", got.Encoding)
	assert.Equal(t, "step-1", got.Checkpoint, "the stored checkpoint is kept")
	assert.True(t, got.LeaseExpires.IsZero(), "the lease end is cleared")

	missing, err := s.Get(ctx, "nothing here")
	require.NoError(t, err)
	assert.Nil(t, missing)
}

func TestFencing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	ops := []struct {
		name string
		call func(key, token string) error
	}{
		{"Complete", func(key, token string) error { return s.Complete(ctx, completed(inProgress(key, token, t0), t0), nil) }},
		{"Release", func(key, token string) error { return s.Release(ctx, key, token, t0) }},
		{"Extend", func(key, token string) error { return s.Extend(ctx, key, token, t0.Add(time.Hour)) }},
		{"SetCheckpoint", func(key, token string) error { return s.SetCheckpoint(ctx, key, token, "x", 1) }},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			t.Parallel()
			key := "fence#" + op.name
			claimAt("a", t0)(t, s, key)
			later := t0.Add(2 * time.Minute)
			_, claimed, err := s.Claim(ctx, inProgress(key, "b", later), later) // takes over a's ended lease
			require.NoError(t, err)
			require.True(t, claimed)
			require.ErrorIs(t, op.call(key, "a"), idem.ErrLeaseLost)
			got, err := s.Get(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, inProgress(key, "b", later).LeaseExpires, got.LeaseExpires, "b's record untouched")
			assert.Equal(t, "b", got.LeaseToken)
			assert.Equal(t, idemstore.StatusInProgress, got.Status)
			assert.Empty(t, got.Checkpoint)
			require.NoError(t, op.call(key, "b"), "the owner's own call works")
		})
	}
}

func TestRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	t.Run("WithoutCheckpointKeepsTombstone", func(t *testing.T) {
		claimAt("a", t0)(t, s, "rel1")
		require.NoError(t, s.Release(ctx, "rel1", "a", t0))
		got, err := s.Get(ctx, "rel1")
		require.NoError(t, err)
		require.NotNil(t, got, "kept, so that a late attempt of a's claim is refused")
		assert.Equal(t, idemstore.ReleasedToken("a"), got.LeaseToken)
		assert.WithinDuration(t, t0, got.LeaseExpires, time.Millisecond, "the lease ended at the release")
		assert.Empty(t, got.Checkpoint)
		require.ErrorIs(t, s.Release(ctx, "rel1", "a", t0), idem.ErrLeaseLost, "nothing left to release")
	})
	t.Run("WithCheckpointKeeps", func(t *testing.T) {
		checkpointAt("a", "charged", t0)(t, s, "rel2")
		require.NoError(t, s.Release(ctx, "rel2", "a", t0))
		got, err := s.Get(ctx, "rel2")
		require.NoError(t, err)
		require.NotNil(t, got)
		assert.Equal(t, idemstore.ReleasedToken("a"), got.LeaseToken)
		assert.WithinDuration(t, t0, got.LeaseExpires, time.Millisecond, "the lease ended at the release")
		assert.Equal(t, "charged", got.Checkpoint)
		require.ErrorIs(t, s.Complete(ctx, completed(inProgress("rel2", "a", t0), t0), nil), idem.ErrLeaseLost,
			"a late completion of the releasing owner does not land")
	})
	t.Run("CompletedIsNotReleased", func(t *testing.T) {
		completeAt("a", t0)(t, s, "rel3")
		require.ErrorIs(t, s.Release(ctx, "rel3", "a", t0), idem.ErrLeaseLost)
		got, err := s.Get(ctx, "rel3")
		require.NoError(t, err)
		assert.Equal(t, idemstore.StatusCompleted, got.Status)
	})
}

func TestExtendNeverShortens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	claimAt("a", t0)(t, s, "ext")
	lease := func() time.Time {
		got, err := s.Get(ctx, "ext")
		require.NoError(t, err)
		return got.LeaseExpires
	}
	require.NoError(t, s.Extend(ctx, "ext", "a", t0.Add(5*time.Minute)))
	assert.Equal(t, t0.Add(5*time.Minute), lease())
	require.NoError(t, s.Extend(ctx, "ext", "a", t0.Add(2*time.Minute)))
	assert.Equal(t, t0.Add(5*time.Minute), lease(), "an earlier end leaves the stored one")
}

func TestCompleteResend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	claimAt("a", t0)(t, s, "resend")
	done := completed(inProgress("resend", "a", t0), t0)
	require.NoError(t, s.Complete(ctx, done, nil))
	require.NoError(t, s.Complete(ctx, done, nil), "a resend of a landed completion succeeds")
}

// TestNew refuses what cannot work.
func TestNew(t *testing.T) {
	t.Parallel()
	_, err := pgstore.New(nil, "t")
	require.ErrorIs(t, err, idem.ErrInvalidOption)
	_, err = pgstore.New(&pgxpool.Pool{}, "")
	require.ErrorIs(t, err, idem.ErrInvalidOption)
	s, err := pgstore.New(&pgxpool.Pool{}, "app.idem")
	require.NoError(t, err)
	assert.Equal(t, "app.idem", s.Table())
}

// TestSchemaQualifiedTable creates and uses a table in a schema of its own.
func TestSchemaQualifiedTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := newStore(t, nil)
	schema := fmt.Sprintf("s%d", time.Now().UnixNano())
	_, err := pool.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	table := schema + ".idempotency"
	require.NoError(t, pgstore.CreateTable(ctx, pool, table))
	require.NoError(t, pgstore.CreateTable(ctx, pool, table), "CreateTable is idempotent")
	s, err := pgstore.New(pool, table)
	require.NoError(t, err)
	claimAt("a", t0)(t, s, "k")
	var comment string
	require.NoError(t, pool.QueryRow(ctx, `SELECT obj_description($1::regclass, 'pg_class')`, table).Scan(&comment))
	assert.Equal(t, fmt.Sprintf("idem pgstore schema %d", pgstore.SchemaVersion), comment)
}

func TestDeleteExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	now := time.Now()
	old := now.Add(-3 * time.Hour)
	completeAt("a", old)(t, s, "expired long ago")                         // expired two hours ago
	completeAt("a", now.Add(-time.Hour-time.Minute))(t, s, "in the grace") // expired a minute ago
	completeAt("a", now)(t, s, "live")
	n, err := s.DeleteExpired(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	for key, want := range map[string]bool{"expired long ago": false, "in the grace": true, "live": true} {
		got, err := s.Get(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, want, got != nil, key)
	}
}
