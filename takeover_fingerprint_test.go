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

// slowClaims wraps a memstore for one caller: before the caller's claim number n applies
// (the request in flight: a slow network, or an SDK resend), before[n] runs.
type slowClaims struct {
	*memstore.Store
	n      int
	before map[int]func()
}

func (s *slowClaims) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	s.n++
	if f := s.before[s.n]; f != nil {
		f()
	}
	return s.Store.Claim(ctx, rec, now)
}

// TestTakeoverCarryingACheckpointKeepsOffAnotherRequestsRecord: the guard checks the
// fingerprint of the lease-ended record its claim met (carryCheckpoint), then claims again
// carrying its checkpoint. If the record changed in between to another request's record
// with an equal checkpoint value, the takeover must not replace it: the key would leave
// the request whose effects the checkpoint records ("a request with another fingerprint
// gets ErrPayloadMismatch: the key stays with prev's request until it completes or the
// record expires").
//
//  1. O (body "A") charges, checkpoints "charged", fails: released, checkpoint kept.
//  2. Just before O's record expires, N (a retry of "A") claims: refused; it meets O's
//     record, checks its fingerprint (A = A) and claims again carrying "charged". That
//     request is in flight while:
//  3. O's record expires; R (a new request under the key, body "B", legitimately free
//     now) claims it fresh, charges for B, checkpoints "charged", fails: released.
//  4. N's claim lands on R's record.
//
// R's retry (body "B") must resume from its own checkpoint. The review wrote this test on
// a base whose release deleted the record; on main since the release's tombstone (its
// lease ends at the release's now, which is after N's claim's now), N's claim is refused
// by time and this test passed before the fix too. The store-level hole (a claim carrying
// a checkpoint took over a lease-ended record of another fingerprint) is pinned by the
// suite's TakeoverCarriesExactly on every store, which failed before it.
func TestTakeoverCarryingACheckpointKeepsOffAnotherRequestsRecord(t *testing.T) {
	inner := memstore.New()
	clock := storetest.NewSettableClock()
	opts := []idem.Option{idem.WithClock(clock), idem.WithLease(time.Minute), idem.WithExpiry(time.Hour)}
	other, err := idem.New(inner, "pay", opts...)
	require.NoError(t, err)
	fail := errors.New("card declined later")
	reqA := idem.Request{Key: "order-1", Fingerprint: []byte("A")}
	reqB := idem.Request{Key: "order-1", Fingerprint: []byte("B")}

	_, _, err = idem.Do(context.Background(), other, reqA, func(ctx context.Context) (string, error) { // O
		require.NoError(t, idem.Checkpoint(ctx, "charged"))
		return "", fail
	})
	require.ErrorIs(t, err, fail)
	sk, err := other.StoredKey(reqA)
	require.NoError(t, err)
	o, err := inner.Get(context.Background(), sk)
	require.NoError(t, err)
	clock.Advance(o.Expires.Sub(clock.Now()) - time.Second) // one second before O's record expires

	s := &slowClaims{Store: inner, before: map[int]func(){
		2: func() { // N's claim carrying "charged" is in flight
			clock.Advance(2 * time.Second)                                                                      // O's record has expired
			_, _, err := idem.Do(context.Background(), other, reqB, func(ctx context.Context) (string, error) { // R
				if idem.LastCheckpoint(ctx) != "" {
					t.Errorf("R found checkpoint %q in a fresh record", idem.LastCheckpoint(ctx))
				}
				require.NoError(t, idem.Checkpoint(ctx, "charged"))
				return "", fail
			})
			require.ErrorIs(t, err, fail)
		},
	}}
	g, err := idem.New(s, "pay", opts...)
	require.NoError(t, err)
	v, _, err := idem.Do(context.Background(), g, reqA, func(ctx context.Context) (string, error) { // N
		return "A done, resumed from " + idem.LastCheckpoint(ctx), nil
	})
	t.Logf("N: %q, %v", v, err)

	// R's retry: its record, with its checkpoint, must still be there for it.
	var seen string
	_, _, err = idem.Do(context.Background(), other, reqB, func(ctx context.Context) (string, error) {
		seen = idem.LastCheckpoint(ctx)
		return "B done", nil
	})
	require.NoError(t, err, "R's retry must resume from R's own checkpoint, not meet N's record")
	require.Equal(t, "charged", seen)
}
