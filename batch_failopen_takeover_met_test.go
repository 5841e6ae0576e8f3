package idem_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

type requestName struct{}

// takeoverGate orders the claims of TestBatchFailOpenRefusedWhileATakeoverClaimsAgain.
// Request A's claims go to the store; its second one (the takeover, carrying the
// checkpoint) waits until request B has returned. Request B's claim waits for A's takeover
// and then fails with a store error.
type takeoverGate struct {
	*memstore.Store
	bAtStore, aMet, bDone chan struct{}
	once                  sync.Once
}

func (s *takeoverGate) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	switch ctx.Value(requestName{}) {
	case "B":
		close(s.bAtStore)
		<-s.aMet
		return nil, false, errDown
	case "A":
		if rec.Checkpoint != "" {
			// The takeover: A's first claim met the tombstone and returned it to the guard.
			s.once.Do(func() { close(s.aMet) })
			<-s.bDone
		}
	}
	return s.Store.Claim(ctx, rec, now)
}

// TestBatchFailOpenRefusedWhileATakeoverClaimsAgain: a request of a batch does not fail
// open for a key whose record another request of the batch has met, while that request's
// claim step is still under way. Found by the deterministic simulation (lab/sim, invariant
// a.failOpenAfterMet; seed 12102926 of `idemsim -features=all`).
//
//  1. K/A ran, recorded a checkpoint and failed: its release left a tombstone with the
//     checkpoint, which holds K for payload A.
//  2. WithFailOpen(true); Guard.Claim([K/A, K/B]) on a store without batch support:
//     nothing is claimed.
//  3. DoClaimed(1) (K/B) claims as Do; its claim waits in the store.
//  4. DoClaimed(0) (K/A) claims as Do: the claim meets the tombstone, which refuses a claim
//     that does not carry its checkpoint, and comes back with it. The claim step claims
//     again, carrying the checkpoint; that takeover waits in the store.
//  5. K/B's claim fails with a store error.
//
// The batch met the record holding K in step 4, before K/B's claim failed, so K/B must
// return the store error without running. Before the fix it ran unguarded: the record a
// claim step met reached the batch's shared record (KeyMet) only once the whole step, its
// takeover included, had returned. decideClaim now adds each record it meets to KeyMet
// before it claims again.
func TestBatchFailOpenRefusedWhileATakeoverClaimsAgain(t *testing.T) {
	ms := memstore.New()
	ctx := context.Background()
	g1, err := idem.New(ms, "test")
	require.NoError(t, err)
	_, _, err = idem.Do(ctx, g1, idem.Request{Key: "K", Fingerprint: []byte("A")}, func(ctx context.Context) (int, error) {
		if err := idem.Checkpoint(ctx, "step 1"); err != nil {
			return 0, err
		}
		return 0, errors.New("handler failed")
	})
	require.Error(t, err)

	gate := &takeoverGate{Store: ms, bAtStore: make(chan struct{}), aMet: make(chan struct{}), bDone: make(chan struct{})}
	g2, err := idem.New(plainStore{gate}, "test", idem.WithFailOpen(true))
	require.NoError(t, err)
	b := g2.Claim(ctx, []idem.Request{{Key: "K", Fingerprint: []byte("A")}, {Key: "K", Fingerprint: []byte("B")}})

	var runsA, runsB atomic.Int32
	var errB error
	go func() {
		defer close(gate.bDone)
		_, _, errB = idem.DoClaimed(context.WithValue(ctx, requestName{}, "B"), b, 1, func(context.Context) (int, error) {
			runsB.Add(1)
			return 2, nil
		})
	}()
	<-gate.bAtStore
	_, _, errA := idem.DoClaimed(context.WithValue(ctx, requestName{}, "A"), b, 0, func(ctx context.Context) (int, error) {
		runsA.Add(1)
		return 1, nil
	})
	<-gate.bDone
	b.Settle(ctx)
	require.NoError(t, errA, "K/A takes the tombstone over and runs")
	assert.Equal(t, int32(1), runsA.Load())
	assert.Zero(t, runsB.Load(), "K/B ran unguarded though request 0 of its batch had met the record holding K")
	assert.ErrorIs(t, errB, idem.ErrStore, "K/B should get the store error")
}
