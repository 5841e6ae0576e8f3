package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// lateCheckpoint sends checkpoint writes as an owner's client may deliver them: each
// resent (the second attempt finds its own write), and earlier ones arriving late, after
// later ones. A late write never replaces a later checkpoint, even one with the same value
// as an earlier write (A, B, A: the late B must not land on the second A).
func (h Harness) lateCheckpoint(t *testing.T) {
	f := h.fixture(t)
	ctx := context.Background()
	now := f.clock.Now()
	k := ownedRecord(t, f, "tok", now.Add(time.Minute))
	stored := func() *idemstore.Record {
		t.Helper()
		rec, err := f.store.Get(ctx, k)
		require.NoError(t, err)
		require.NotNil(t, rec)
		return rec
	}

	require.NoError(t, f.store.SetCheckpoint(ctx, k, "tok", "charged", 1))
	require.NoError(t, f.store.SetCheckpoint(ctx, k, "tok", "charged", 1), "a resend of a write that landed succeeds")
	require.NoError(t, f.store.SetCheckpoint(ctx, k, "tok", "shipped", 2))
	err := f.store.SetCheckpoint(ctx, k, "tok", "charged", 1) // the first attempt, late
	if err != nil {
		assert.ErrorIs(t, err, idem.ErrLeaseLost, "a late write is refused, not a store failure")
	}
	rec := stored()
	assert.Equal(t, "shipped", rec.Checkpoint, "a late write never replaces a later checkpoint")
	assert.Equal(t, int64(2), rec.CheckpointSeq)

	require.NoError(t, f.store.SetCheckpoint(ctx, k, "tok", "charged", 3)) // A, B, A
	_ = f.store.SetCheckpoint(ctx, k, "tok", "shipped", 2)
	rec = stored()
	assert.Equal(t, "charged", rec.Checkpoint, "a late B never lands on the second A")
	assert.Equal(t, int64(3), rec.CheckpointSeq)

	assert.ErrorIs(t, f.store.SetCheckpoint(ctx, k, "other", "forged", 9), idem.ErrLeaseLost)
	assert.Equal(t, "charged", stored().Checkpoint, "another token's write changes nothing")
}

// checkpointSeqCarried: a record written without checkpoint numbers (as the Powertools
// utilities, or this module before them, write it) takes numbered checkpoints, and the
// number travels with the checkpoint through a takeover, so that the new owner's
// checkpoints number on from it and its completion keeps it.
func (h Harness) checkpointSeqCarried(t *testing.T) {
	f := h.fixture(t, idem.WithLease(time.Minute))
	ctx := context.Background()
	now := f.clock.Now()
	k := ownedRecord(t, f, "tok", now.Add(time.Minute))
	require.NoError(t, f.store.SetCheckpoint(ctx, k, "tok", "charged", 1), "an absent number counts as 0")

	req := idem.Request{Key: key(t)}
	_, _, err := do(h, ctx, f.guard, req, func(ctx context.Context) (result, error) {
		if err := idem.Checkpoint(ctx, "charged"); err != nil {
			return result{}, err
		}
		if err := idem.Checkpoint(ctx, "shipped"); err != nil {
			return result{}, err
		}
		return result{}, errors.New("carrier down") // released, the checkpoint kept
	})
	require.Error(t, err)
	rec := storedRecord(t, f, req.Key)
	assert.Equal(t, "shipped", rec.Checkpoint)
	assert.Equal(t, int64(2), rec.CheckpointSeq)

	v, _, err := do(h, ctx, f.guard, req, func(ctx context.Context) (result, error) {
		last := idem.LastCheckpoint(ctx)
		if err := idem.Checkpoint(ctx, "delivered"); err != nil {
			return result{}, err
		}
		return result{Msg: last}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, "shipped", v.Msg)
	rec = storedRecord(t, f, req.Key)
	assert.Equal(t, idemstore.StatusCompleted, rec.Status)
	assert.Equal(t, "delivered", rec.Checkpoint)
	assert.Equal(t, int64(3), rec.CheckpointSeq, "the new owner numbers on from the carried checkpoint")
}

// checkpointKeptExactly: a checkpoint is kept byte for byte on every store, non-ASCII
// UTF-8 included, and the next owner reads exactly what the first wrote; what some store
// could not keep exactly (invalid UTF-8, a NUL byte, an empty or an over-long checkpoint)
// is refused by idem.Checkpoint itself, on every store alike, before anything is written.
func (h Harness) checkpointKeptExactly(t *testing.T) {
	f := h.fixture(t, idem.WithLease(time.Minute))
	const valid = "paid 12,50 € · ✓ 支払い済み 💳 \u00e9\u0301 \t\"'\\ <&>"
	invalid := map[string]string{
		"InvalidUTF8": "charged\xff",
		"Surrogate":   "charged\xed\xa0\x80",
		"NUL":         "charged\x00shipped",
		"Empty":       "",
		"TooLong":     strings.Repeat("é", idem.MaxCheckpointLen/2+1),
	}
	req := idem.Request{Key: key(t)}
	_, _, err := do(h, context.Background(), f.guard, req, func(ctx context.Context) (result, error) {
		if err := idem.Checkpoint(ctx, valid); err != nil {
			return result{}, err
		}
		for name, cp := range invalid {
			err := idem.Checkpoint(ctx, cp)
			assert.ErrorIs(t, err, idem.ErrInvalidCheckpoint, name)
			assert.NotErrorIs(t, err, idem.ErrStore, name)
		}
		assert.Equal(t, valid, idem.LastCheckpoint(ctx), "a refused checkpoint changes nothing")
		require.NoError(t, idem.Checkpoint(ctx, strings.Repeat("é", idem.MaxCheckpointLen/2)), "the longest accepted")
		require.NoError(t, idem.Checkpoint(ctx, valid))
		return result{}, errors.New("carrier down") // released, the checkpoint kept
	})
	require.Error(t, err)
	assert.Equal(t, valid, storedRecord(t, f, req.Key).Checkpoint)

	v, _, err := do(h, context.Background(), f.guard, req, func(ctx context.Context) (result, error) {
		return result{Msg: idem.LastCheckpoint(ctx)}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, valid, v.Msg, "the next owner resumes from exactly the checkpoint written")
}

// completionKeepsFirst completes a record, then sends another completion under the same
// token with another result, small and then large (kept apart by a store that does so), as
// the guard's completion with the result a handler chose for refused attached writes
// ([idem.OnRefused]) meets the record a late first attempt of the refused completion
// completed: it returns nil, and the record keeps the first completion's result. A
// completion overwriting it would store the chosen refusal over writes that committed. An
// [idemstore.BatchStore]'s CompleteMany is held to the same, whichever call completed
// first: its per-record rules are Complete's.
func (h Harness) completionKeepsFirst(t *testing.T) {
	for _, size := range []int{16, 64 << 10} {
		for _, firstBatch := range []bool{false, true} {
			f := h.fixture(t)
			_, batch := f.store.(idemstore.BatchStore)
			if firstBatch && !batch {
				continue
			}
			ctx := context.Background()
			now := f.clock.Now()
			k := ownedRecord(t, f, "tok", now.Add(time.Minute))
			done := func(data string) *idemstore.Record {
				return &idemstore.Record{Key: k, Status: idemstore.StatusCompleted, Expires: now.Add(time.Hour),
					LeaseToken: "tok", Data: []byte(data), Encoding: "json", Version: idemstore.SchemaVersion}
			}
			kept := func(first, msg string) {
				t.Helper()
				rec, err := f.store.Get(ctx, k)
				require.NoError(t, err)
				require.NotNil(t, rec)
				assert.Equal(t, idemstore.StatusCompleted, rec.Status)
				assert.Equal(t, first, string(rec.Data), "size %d: %s: the first completion's result is kept", size, msg)
			}
			first, second := `"`+randomText(size)+`"`, `"`+randomText(size/2)+`"`
			if firstBatch {
				require.NoError(t, completeMany(ctx, f.store, done(first)))
			} else {
				require.NoError(t, f.store.Complete(ctx, done(first), nil))
			}
			assert.NoError(t, f.store.Complete(ctx, done(second), nil), "size %d: a completion meeting the record completed under its token", size)
			kept(first, "Complete")
			if batch {
				third := `"` + randomText(size/4) + `"`
				assert.NoError(t, completeMany(ctx, f.store, done(third)), "size %d: a batch completion meeting the record completed under its token", size)
				kept(first, "CompleteMany")
			}
		}
	}
}

// completeMany completes rec alone with store's CompleteMany, a store that is an
// [idemstore.BatchStore], and returns its answer.
func completeMany(ctx context.Context, store idemstore.Store, rec *idemstore.Record) error {
	errs := store.(idemstore.BatchStore).CompleteMany(ctx, []*idemstore.Record{rec})
	if len(errs) != 1 {
		return fmt.Errorf("CompleteMany answered %d errors for 1 record", len(errs))
	}
	return errs[0]
}
