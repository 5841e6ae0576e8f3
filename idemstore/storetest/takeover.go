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

// takeoverCarriesExactly is the store's side of a takeover: a lease-ended record with a
// checkpoint is taken over only by a claim that carries that checkpoint with its number,
// for the same request (an equal fingerprint). A late claim that carries an equal value
// recorded earlier (A, B, A: another number) is refused, and so is a claim of another
// request that carries an equal value: the checkpoint records effects of the record's own
// request. Through Claim, and ClaimMany on a batch store.
func (h Harness) takeoverCarriesExactly(t *testing.T) {
	_, batchStore := h.NewStore(t).(idemstore.BatchStore)
	for _, tc := range []struct {
		name string
		// held is the record's fingerprint; its checkpoint is "charged" #3, after
		// "charged" #1 and "shipped" #2.
		held string
		// cp, seq and fp are what the claim carries.
		cp      string
		seq     int64
		fp      string
		claimed bool
	}{
		{name: "Exactly", held: "fp-a", cp: "charged", seq: 3, fp: "fp-a", claimed: true},
		{name: "ExactlyWithoutFingerprints", cp: "charged", seq: 3, claimed: true},
		{name: "EqualValueEarlierNumber", held: "fp-a", cp: "charged", seq: 1, fp: "fp-a"},
		{name: "EqualValueNoNumber", held: "fp-a", cp: "charged", fp: "fp-a"},
		{name: "AnotherRequest", held: "fp-a", cp: "charged", seq: 3, fp: "fp-b"},
		{name: "AnotherRequestWhereNoneWasGiven", cp: "charged", seq: 3, fp: "fp-b"},
		{name: "NoFingerprintWhereOneWasGiven", held: "fp-a", cp: "charged", seq: 3},
		{name: "NoCheckpoint", held: "fp-a", fp: "fp-a"},
	} {
		for _, batch := range []bool{false, true} {
			if batch && !batchStore {
				continue // the store claims one record at a time
			}
			name := tc.name
			if batch {
				name += "/Batch"
			}
			t.Run(name, func(t *testing.T) {
				s := h.NewStore(t)
				ctx := context.Background()
				now := NewSettableClock().Now()
				k := key(t)
				owner := inProgress(k, "owner", "", now)
				owner.Fingerprint = tc.held
				_, claimed, err := s.Claim(ctx, owner, now)
				require.NoError(t, err)
				require.True(t, claimed)
				for i, cp := range []string{"charged", "shipped", "charged"} {
					require.NoError(t, s.SetCheckpoint(ctx, k, "owner", cp, int64(i+1)))
				}

				at := now.Add(2 * time.Minute) // the owner's lease has ended
				rec := inProgress(k, "taker", tc.cp, at)
				rec.CheckpointSeq, rec.Fingerprint = tc.seq, tc.fp
				var prev *idemstore.Record
				if batch {
					res := s.(idemstore.BatchStore).ClaimMany(ctx, []*idemstore.Record{rec, inProgress(k+"/other", "taker", "", at)}, at)
					require.Len(t, res, 2)
					require.NoError(t, res[0].Err)
					prev, claimed = res[0].Prev, res[0].Claimed
				} else {
					prev, claimed, err = s.Claim(ctx, rec, at)
					require.NoError(t, err)
				}
				cur, err := s.Get(ctx, k)
				require.NoError(t, err)
				require.NotNil(t, cur)
				if tc.claimed {
					assert.True(t, claimed, "the claim carries the record's checkpoint and number, for its request")
					assert.Equal(t, "taker", cur.LeaseToken)
					assert.Equal(t, "charged", cur.Checkpoint)
					assert.Equal(t, int64(3), cur.CheckpointSeq)
					return
				}
				assert.False(t, claimed, "a claim carrying %q #%d for %q takes over no record holding %q #3 for %q",
					tc.cp, tc.seq, tc.fp, "charged", tc.held)
				if assert.NotNil(t, prev, "the record that refused") {
					assert.Equal(t, "owner", prev.LeaseToken)
					assert.Equal(t, "charged", prev.Checkpoint)
					assert.Equal(t, int64(3), prev.CheckpointSeq)
				}
				assert.Equal(t, "owner", cur.LeaseToken, "the record is the owner's still")
				assert.Equal(t, int64(3), cur.CheckpointSeq)
			})
		}
	}
}

func (h Harness) takeover(t *testing.T) {
	f := h.fixture(t, idem.WithLease(time.Minute))
	k := key(t)
	release, done := blockOwner(h, t, context.Background(), f.guard, k, result{N: 1, Msg: "late"}, nil)

	// The first owner's lease has ended.
	f.clock.Advance(time.Minute + idem.DefaultLeaseMargin + time.Second)
	v, replayed, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(context.Context) (result, error) {
		return result{N: 2, Msg: "new owner"}, nil
	})
	require.NoError(t, err)
	assert.False(t, replayed)
	assert.Equal(t, "new owner", v.Msg)

	close(release)
	require.ErrorIs(t, <-done, idem.ErrLeaseLost)

	v, replayed, err = do(h, context.Background(), f.guard, idem.Request{Key: k}, func(context.Context) (result, error) {
		t.Error("ran after completion")
		return result{}, nil
	})
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, "new owner", v.Msg, "the late owner must not overwrite the new owner's record")
}
