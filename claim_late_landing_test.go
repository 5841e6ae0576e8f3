package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// lateTakeoverClaims wraps a memstore for one caller, N. N's second claim (the first that
// carries a checkpoint, during the guard's takeover loop) is resent by the client: its
// first attempt is held in the network, the resend applies at once. Between N's claims,
// other callers (M, then P) run on the same key directly on the memstore: beforeResend
// runs before N's second claim's resend, beforeThird before N's third claim, after which
// the held first attempt of the second claim lands, and then the third claim applies.
type lateTakeoverClaims struct {
	*memstore.Store
	n            int
	held         *idemstore.Record
	heldNow      time.Time
	beforeResend func()
	beforeThird  func()
}

func (s *lateTakeoverClaims) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	s.n++
	switch s.n {
	case 2:
		cp := *rec // the first attempt, as sent: the guard reuses rec for its next attempt
		s.held, s.heldNow = &cp, now
		s.beforeResend()
	case 3:
		s.beforeThird()
		// The first attempt of claim 2 lands now.
		_, _, _ = s.Store.Claim(context.Background(), s.held, s.heldNow)
	}
	return s.Store.Claim(ctx, rec, now)
}

// TestTakeoverClaimLandingLateLeavesTheRecordsCheckpoint: the guard's takeover loop sends
// several claims with the same lease token, each carrying the checkpoint of the record it
// last met. An earlier one may land late, after the record moved on to a later checkpoint
// with an equal value (A, B, A). The store refuses it: a takeover carries the checkpoint's
// number too, and the record's is higher. The owner never resumes from a checkpoint older
// than the last one recorded.
//
//  1. O checkpoints "awaiting-payment" (#1) and fails: released, checkpoint kept.
//  2. N: claim #1 (no checkpoint) refused, meets "awaiting-payment"#1; claim #2 carries it:
//     its first attempt is held in the network.
//  3. M takes the key over carrying "awaiting-payment"#1, checkpoints "charged" (#2), fails.
//  4. N's claim #2 resend: refused (the record holds "charged"), meets "charged"#2.
//  5. P takes the key over carrying "charged"#2, checkpoints "awaiting-payment" (#3)
//     (the charge was refunded, payment is awaited again), fails.
//  6. N's claim #2's first attempt lands: it carries "awaiting-payment"#1, the record holds
//     "awaiting-payment"#3: refused (before the fix, the equal value let it through, and
//     N's token owned a record holding "awaiting-payment"#1).
//  7. N's claim #3 (carrying "charged"#2) is refused by P's record: N has made its
//     takeover attempts and is told the key is in progress. Its retry takes the key over
//     carrying "awaiting-payment"#3, and resumes from it.
//
// The review's version of this test expected N's first call to succeed, resuming from
// "awaiting-payment": that held only because the late attempt landed. With the number in
// the claim condition it no longer lands, and N's first call gets ErrInProgress.
func TestTakeoverClaimLandingLateLeavesTheRecordsCheckpoint(t *testing.T) {
	inner := memstore.New()
	clock := storetest.NewSettableClock()
	other, err := idem.New(inner, "pay", idem.WithClock(clock), idem.WithLease(time.Minute))
	require.NoError(t, err)
	req := idem.Request{Key: "order-1"}
	fail := errors.New("fail")

	run := func(cp string) {
		_, _, err := idem.Do(context.Background(), other, req, func(ctx context.Context) (string, error) {
			require.NoError(t, idem.Checkpoint(ctx, cp))
			return "", fail
		})
		require.ErrorIs(t, err, fail)
	}
	run("awaiting-payment") // O

	s := &lateTakeoverClaims{Store: inner}
	s.beforeResend = func() { run("charged") }         // M
	s.beforeThird = func() { run("awaiting-payment") } // P
	g, err := idem.New(s, "pay", idem.WithClock(clock), idem.WithLease(time.Minute))
	require.NoError(t, err)

	var seen []string
	fn := func(ctx context.Context) (string, error) {
		seen = append(seen, idem.LastCheckpoint(ctx))
		return "ok", nil
	}
	_, _, err = idem.Do(context.Background(), g, req, fn)
	require.ErrorIs(t, err, idem.ErrInProgress, "N's takeover attempts all refused")
	require.Equal(t, 3, s.n, "claims sent by N")

	sk, err := g.StoredKey(req)
	require.NoError(t, err)
	rec, err := inner.Get(context.Background(), sk)
	require.NoError(t, err)
	t.Logf("stored after N's late claim: status %s checkpoint %q #%d token %s", rec.Status, rec.Checkpoint, rec.CheckpointSeq, rec.LeaseToken)
	require.Equal(t, "awaiting-payment", rec.Checkpoint, "the record's checkpoint")
	require.Equal(t, int64(3), rec.CheckpointSeq, "P's checkpoint, not the one N's late claim carried")

	_, _, err = idem.Do(context.Background(), g, req, fn) // N's retry
	require.NoError(t, err)
	require.Equal(t, []string{"awaiting-payment"}, seen, "N resumes from the last checkpoint recorded (P's #3)")
	rec, err = inner.Get(context.Background(), sk)
	require.NoError(t, err)
	require.Equal(t, idemstore.StatusCompleted, rec.Status)
	require.Equal(t, int64(3), rec.CheckpointSeq)
}

// ownClaimLandsLate wraps a memstore for one caller whose takeover claims are refused twice:
// claim 1 meets the lease-ended record seeded with "v"#1; before claim 2 (carrying it)
// applies, another owner moves the record to "w"#2 and its lease ends; before claim 3
// (carrying "w"#2) applies, claim 2 as it was sent becomes the record, as a late attempt
// of it does wherever a store's condition let it through. Claim 3 then meets the
// caller's own token.
type ownClaimLandsLate struct {
	*memstore.Store
	n    int
	sent *idemstore.Record
}

func (s *ownClaimLandsLate) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	s.n++
	switch s.n {
	case 2:
		cp := *rec
		s.sent = &cp
		s.Put(idemstore.Record{Key: rec.Key, Status: idemstore.StatusInProgress, Expires: rec.Expires,
			LeaseExpires: now, LeaseToken: "m", Checkpoint: "w", CheckpointSeq: 2, Version: idemstore.SchemaVersion})
	case 3:
		s.Put(*s.sent)
	}
	return s.Store.Claim(ctx, rec, now)
}

// TestTakeoverOwnClaimMetResumesFromTheRecord: when a takeover claim meets a record of its
// own token (an earlier attempt of the same takeover took effect), the guard owns the key
// and resumes from the checkpoint that record holds, with its number, not from the one the
// attempt it last sent carried: the attempt that took effect may be an earlier one,
// carrying another checkpoint. Before the fix, the handler read "w" and numbered its next
// checkpoint 3 on a record that held "v"#1.
func TestTakeoverOwnClaimMetResumesFromTheRecord(t *testing.T) {
	ms := memstore.New()
	clock := storetest.NewSettableClock()
	g, err := idem.New(&ownClaimLandsLate{Store: ms}, "pay", idem.WithClock(clock), idem.WithLease(time.Minute))
	require.NoError(t, err)
	req := idem.Request{Key: "order-1"}
	sk, err := g.StoredKey(req)
	require.NoError(t, err)
	now := clock.Now()
	ms.Put(idemstore.Record{Key: sk, Status: idemstore.StatusInProgress, Expires: now.Add(time.Hour),
		LeaseExpires: now.Add(-time.Second), LeaseToken: "o", Checkpoint: "v", CheckpointSeq: 1, Version: idemstore.SchemaVersion})

	var seen string
	_, _, err = idem.Do(context.Background(), g, req, func(ctx context.Context) (string, error) {
		seen = idem.LastCheckpoint(ctx)
		return "ok", idem.Checkpoint(ctx, "x")
	})
	require.NoError(t, err)
	require.Equal(t, "v", seen, "the checkpoint the record of our own token holds")
	rec, err := ms.Get(context.Background(), sk)
	require.NoError(t, err)
	require.Equal(t, idemstore.StatusCompleted, rec.Status)
	require.Equal(t, "x", rec.Checkpoint)
	require.Equal(t, int64(2), rec.CheckpointSeq, "numbered on from the record's checkpoint")
}
