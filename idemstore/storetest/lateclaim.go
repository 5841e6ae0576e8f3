package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// lateClaimAfterRelease is the store's side of a late claim: a claim whose first attempt
// lands after its owner released the key (the SDK resent it, the resend applied, the
// handler failed). The release leaves a tombstone that refuses a claim of the released
// token, and only of it: the key stays claimable by everybody else at once, with or
// without a checkpoint, through Release or ReleaseMany and Claim or ClaimMany.
func (h Harness) lateClaimAfterRelease(t *testing.T) {
	_, batchStore := h.NewStore(t).(idemstore.BatchStore)
	for _, tc := range []struct {
		name       string
		checkpoint string
		batch      bool
	}{
		{name: "Single"},
		{name: "SingleWithCheckpoint", checkpoint: "charged"},
		{name: "Batch", batch: true},
		{name: "BatchWithCheckpoint", checkpoint: "charged", batch: true},
	} {
		if tc.batch && !batchStore {
			continue // the store claims and releases one record at a time
		}
		t.Run(tc.name, func(t *testing.T) {
			s := h.NewStore(t)
			bs, _ := s.(idemstore.BatchStore)
			ctx := context.Background()
			now := NewSettableClock().Now()
			k := key(t)
			claim := func(token string, at time.Time) (*idemstore.Record, bool) {
				t.Helper()
				rec := inProgress(k, token, tc.checkpoint, now)
				if !tc.batch {
					prev, claimed, err := s.Claim(ctx, rec, at)
					require.NoError(t, err)
					return prev, claimed
				}
				res := bs.ClaimMany(ctx, []*idemstore.Record{rec, inProgress(k+"/other", token, "", now)}, at)
				require.Len(t, res, 2)
				require.NoError(t, res[0].Err)
				return res[0].Prev, res[0].Claimed
			}
			release := func(token string) {
				t.Helper()
				if !tc.batch {
					require.NoError(t, s.Release(ctx, k, token, now))
					return
				}
				errs := bs.ReleaseMany(ctx, []string{k, k + "/other"}, []string{token, token}, now)
				require.Len(t, errs, 2)
				require.NoError(t, errs[0])
			}

			_, claimed := claim("A", now)
			require.True(t, claimed)
			release("A")

			at := now.Add(time.Second)
			prev, claimed := claim("A", at) // the first attempt of A's claim, landing late
			assert.False(t, claimed, "a claim of the released token never takes over its own release")
			if prev != nil {
				assert.False(t, prev.Live(at), "the record that refused it does not hold the key")
			}
			cur, err := s.Get(ctx, k)
			require.NoError(t, err)
			assert.False(t, cur.Live(at), "the late claim left the key free")
			require.ErrorIs(t, s.Release(ctx, k, "A", at), idem.ErrLeaseLost, "the released token owns nothing")

			_, claimed = claim("B", at)
			assert.True(t, claimed, "any other claim takes the key at once")
			cur, err = s.Get(ctx, k)
			require.NoError(t, err)
			require.NotNil(t, cur)
			assert.Equal(t, "B", cur.LeaseToken)
			assert.Equal(t, tc.checkpoint, cur.Checkpoint, "the checkpoint lives on in the new owner's record")
		})
	}
}

// lateClaimAfterTwoReleases: owner A releases, owner B takes the key over and releases
// too, and only then does A's late claim land. The tombstone names B now, so A's token
// does not refuse it; its time does: a release ends the lease at the releaser's now, and
// A's claim was sent before. The key stays free for everybody else.
func (h Harness) lateClaimAfterTwoReleases(t *testing.T) {
	s := h.NewStore(t)
	ctx := context.Background()
	now := NewSettableClock().Now()
	k := key(t)
	late := inProgress(k, "A", "", now)
	_, claimed, err := s.Claim(ctx, late, now)
	require.NoError(t, err)
	require.True(t, claimed)
	require.NoError(t, s.Release(ctx, k, "A", now.Add(100*time.Millisecond)))
	bAt := now.Add(200 * time.Millisecond)
	_, claimed, err = s.Claim(ctx, inProgress(k, "B", "", bAt), bAt)
	require.NoError(t, err)
	require.True(t, claimed)
	require.NoError(t, s.Release(ctx, k, "B", bAt.Add(100*time.Millisecond)))

	prev, claimed, err := s.Claim(ctx, late, now) // A's claim as it was sent, landing now
	require.NoError(t, err)
	assert.False(t, claimed, "a claim sent before the release is refused, whoever released")
	if prev != nil {
		assert.Equal(t, idemstore.ReleasedToken("B"), prev.LeaseToken)
	}
	at := bAt.Add(time.Second)
	_, claimed, err = s.Claim(ctx, inProgress(k, "C", "", at), at)
	require.NoError(t, err)
	assert.True(t, claimed, "a claim made after the release takes the key at once")
}

// inProgress returns the record a claim of key by token at now writes: a one-minute lease,
// an hour's expiry.
func inProgress(key, token, checkpoint string, now time.Time) *idemstore.Record {
	return &idemstore.Record{
		Key:          key,
		Status:       idemstore.StatusInProgress,
		Expires:      now.Add(time.Hour),
		LeaseExpires: now.Add(time.Minute),
		LeaseToken:   token,
		Checkpoint:   checkpoint,
		Version:      idemstore.SchemaVersion,
	}
}

// lateClaimThroughGuard drives the guard over a store whose claims land a second time
// after the key's release, as a claim's first attempt does when the SDK resent it and the
// resend applied: a handler that fails releases the key, its claim lands again, and the
// retry right after runs at once, not refused as in progress for the whole lease.
func (h Harness) lateClaimThroughGuard(t *testing.T) {
	inner := h.NewStore(t)
	var s idemstore.Store = &lateClaims{Store: inner}
	if bs, ok := inner.(idemstore.BatchStore); ok {
		s = &lateBatchClaims{lateClaims: lateClaims{Store: inner}, batch: bs}
	}
	c := NewSettableClock()
	g, err := idem.New(s, "test", idem.WithClock(c), idem.WithScope("suite"))
	require.NoError(t, err)
	k := key(t)
	boom := errors.New("boom")
	ctx := context.Background()
	_, _, err = do(h, ctx, g, idem.Request{Key: k}, func(context.Context) (result, error) { return result{}, boom })
	require.ErrorIs(t, err, boom)

	c.Advance(time.Second)
	v, replayed, err := do(h, ctx, g, idem.Request{Key: k}, func(context.Context) (result, error) { return result{N: 2}, nil })
	require.NoError(t, err, "the retry runs: the late claim re-created nothing")
	assert.False(t, replayed)
	assert.Equal(t, 2, v.N)
}

// lateClaims is a store whose every claim lands once more right after the key's release
// by its token, with the time it was first sent: a claim's first attempt delayed in the
// network past the release.
type lateClaims struct {
	idemstore.Store

	mu      sync.Mutex
	pending map[string]lateClaim // by token
}

type lateClaim struct {
	rec idemstore.Record
	now time.Time
}

func (s *lateClaims) sent(rec *idemstore.Record, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		s.pending = map[string]lateClaim{}
	}
	s.pending[rec.LeaseToken] = lateClaim{rec: *rec, now: now}
}

// land applies the claim of token, if one was sent, as it was sent.
func (s *lateClaims) land(ctx context.Context, token string) {
	s.mu.Lock()
	c, ok := s.pending[token]
	delete(s.pending, token)
	s.mu.Unlock()
	if ok {
		_, _, _ = s.Store.Claim(ctx, &c.rec, c.now)
	}
}

func (s *lateClaims) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	s.sent(rec, now)
	return s.Store.Claim(ctx, rec, now)
}

func (s *lateClaims) Release(ctx context.Context, key, token string, now time.Time) error {
	err := s.Store.Release(ctx, key, token, now)
	s.land(ctx, token)
	return err
}

// lateBatchClaims is lateClaims for a [idemstore.BatchStore]: batch claims land late too.
type lateBatchClaims struct {
	lateClaims
	batch idemstore.BatchStore
}

func (s *lateBatchClaims) ClaimMany(ctx context.Context, recs []*idemstore.Record, now time.Time) []idemstore.ClaimResult {
	for _, r := range recs {
		s.sent(r, now)
	}
	return s.batch.ClaimMany(ctx, recs, now)
}

func (s *lateBatchClaims) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	return s.batch.CompleteMany(ctx, recs)
}

func (s *lateBatchClaims) ReleaseMany(ctx context.Context, keys, tokens []string, now time.Time) []error {
	errs := s.batch.ReleaseMany(ctx, keys, tokens, now)
	for _, tok := range tokens {
		s.land(ctx, tok)
	}
	return errs
}
