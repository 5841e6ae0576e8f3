package idemstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem/idemstore"
)

// TestRecordPredicates checks Expired, LeaseEnded, Live and ClaimableBy on each side of the
// instants they turn at: a record stops counting at its Expires and an in-progress lease
// ends at its LeaseExpires (both inclusive), a zero time never arrives, and a lease ends
// only for an in-progress record; a record a release left (its token
// idemstore.ReleasedToken) refuses a claim of the released token alone.
func TestRecordPredicates(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	const ns = time.Nanosecond
	inProgress := func(expires, leaseExpires time.Time, checkpoint string) *idemstore.Record {
		return &idemstore.Record{Key: "k", Status: idemstore.StatusInProgress, Expires: expires,
			LeaseExpires: leaseExpires, LeaseToken: "owner", Checkpoint: checkpoint}
	}
	released := func(expires time.Time, token, checkpoint string) *idemstore.Record {
		r := inProgress(expires, time.Unix(0, 0), checkpoint)
		r.LeaseToken = idemstore.ReleasedToken(token)
		return r
	}
	numbered := func(r *idemstore.Record, seq int64, fp string) *idemstore.Record {
		r.CheckpointSeq, r.Fingerprint = seq, fp
		return r
	}
	withStatus := func(s idemstore.Status, expires, leaseExpires time.Time) *idemstore.Record {
		return &idemstore.Record{Key: "k", Status: s, Expires: expires, LeaseExpires: leaseExpires}
	}
	tests := []struct {
		name string
		rec  *idemstore.Record // nil: no record (Expired and LeaseEnded are not asked)
		// claimCheckpoint is the checkpoint the claim asked about by ClaimableBy carries.
		claimCheckpoint string
		// claimSeq and claimFingerprint are its checkpoint's number and its fingerprint.
		claimSeq         int64
		claimFingerprint string
		// claimToken is the lease token of that claim.
		claimToken string
		expired    bool
		leaseEnded bool
		live       bool
		claimable  bool
	}{
		{name: "no record", rec: nil, claimable: true},
		{name: "lease held, 1ns before its end", rec: inProgress(now.Add(time.Hour), now.Add(ns), ""),
			live: true},
		{name: "lease at its end", rec: inProgress(now.Add(time.Hour), now, ""),
			leaseEnded: true, claimable: true},
		{name: "lease past its end", rec: inProgress(now.Add(time.Hour), now.Add(-ns), ""),
			leaseEnded: true, claimable: true},
		{name: "lease ended, claim carries its checkpoint", rec: inProgress(now.Add(time.Hour), now, "charged"),
			claimCheckpoint: "charged", leaseEnded: true, claimable: true},
		{name: "lease ended, claim carries another checkpoint", rec: inProgress(now.Add(time.Hour), now, "charged"),
			claimCheckpoint: "shipped", leaseEnded: true},
		{name: "lease ended, claim carries its checkpoint with its number and fingerprint",
			rec:             numbered(inProgress(now.Add(time.Hour), now, "charged"), 3, "fp-a"),
			claimCheckpoint: "charged", claimSeq: 3, claimFingerprint: "fp-a", leaseEnded: true, claimable: true},
		{name: "lease ended, claim carries its checkpoint value with another number",
			rec:             numbered(inProgress(now.Add(time.Hour), now, "charged"), 3, "fp-a"),
			claimCheckpoint: "charged", claimSeq: 1, claimFingerprint: "fp-a", leaseEnded: true},
		{name: "lease ended, claim carries its checkpoint without its number",
			rec:             numbered(inProgress(now.Add(time.Hour), now, "charged"), 3, ""),
			claimCheckpoint: "charged", leaseEnded: true},
		{name: "lease ended, claim carries its checkpoint for another request",
			rec:             numbered(inProgress(now.Add(time.Hour), now, "charged"), 3, "fp-b"),
			claimCheckpoint: "charged", claimSeq: 3, claimFingerprint: "fp-a", leaseEnded: true},
		{name: "lease ended, claim carries its checkpoint, the record has no fingerprint",
			rec:             numbered(inProgress(now.Add(time.Hour), now, "charged"), 3, ""),
			claimCheckpoint: "charged", claimSeq: 3, claimFingerprint: "fp-a", leaseEnded: true},
		{name: "lease ended without a checkpoint, claim of another request",
			rec:              numbered(inProgress(now.Add(time.Hour), now, ""), 0, "fp-b"),
			claimFingerprint: "fp-a", leaseEnded: true, claimable: true},
		{name: "lease ended, claim carries none", rec: inProgress(now.Add(time.Hour), now, "charged"),
			leaseEnded: true},
		{name: "released, claim of the released token", rec: released(now.Add(time.Hour), "mine", ""),
			claimToken: "mine", leaseEnded: true},
		{name: "released with a checkpoint, claim of the released token carries it", rec: released(now.Add(time.Hour), "mine", "charged"),
			claimToken: "mine", claimCheckpoint: "charged", leaseEnded: true},
		{name: "released, claim of another token", rec: released(now.Add(time.Hour), "theirs", ""),
			claimToken: "mine", leaseEnded: true, claimable: true},
		{name: "released and expired, claim of the released token", rec: released(now, "mine", ""),
			claimToken: "mine", expired: true, leaseEnded: true, claimable: true},
		{name: "no lease end holds the key until it expires", rec: inProgress(now.Add(ns), time.Time{}, ""),
			live: true},
		{name: "1ns before Expires", rec: inProgress(now.Add(ns), now.Add(time.Minute), ""),
			live: true},
		{name: "at Expires", rec: inProgress(now, now.Add(time.Minute), ""),
			expired: true, claimable: true},
		{name: "expired, claim carries another checkpoint", rec: inProgress(now.Add(-ns), now.Add(-ns), "charged"),
			claimCheckpoint: "shipped", expired: true, leaseEnded: true, claimable: true},
		{name: "no Expires never expires", rec: withStatus(idemstore.StatusCompleted, time.Time{}, time.Time{}),
			live: true},
		{name: "completed, its old lease past", rec: withStatus(idemstore.StatusCompleted, now.Add(ns), now.Add(-time.Hour)),
			live: true},
		{name: "failed, its old lease past", rec: withStatus(idemstore.StatusFailed, now.Add(ns), now.Add(-time.Hour)),
			live: true},
		{name: "completed, at Expires", rec: withStatus(idemstore.StatusCompleted, now, now.Add(-time.Hour)),
			expired: true, claimable: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			claim := &idemstore.Record{Key: "k", Status: idemstore.StatusInProgress, LeaseToken: tc.claimToken,
				Checkpoint: tc.claimCheckpoint, CheckpointSeq: tc.claimSeq, Fingerprint: tc.claimFingerprint}
			if tc.rec != nil {
				assert.Equal(t, tc.expired, tc.rec.Expired(now), "Expired")
				assert.Equal(t, tc.leaseEnded, tc.rec.LeaseEnded(now), "LeaseEnded")
			}
			assert.Equal(t, tc.live, tc.rec.Live(now), "Live")
			assert.Equal(t, tc.claimable, tc.rec.ClaimableBy(claim, now), "ClaimableBy")
		})
	}
}
