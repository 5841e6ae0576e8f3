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

// failNthClaim wraps a memstore: claim number n (counted from arm) fails with a store
// error, as a throttled or timed-out PutItem does.
type failNthClaim struct {
	*memstore.Store
	n, fail int
}

func (s *failNthClaim) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	s.n++
	if s.n == s.fail {
		return nil, false, errors.New("throttled")
	}
	return s.Store.Claim(ctx, rec, now)
}

// TestFailOpenRefusedAfterTakeoverClaimMetCheckpoint: WithFailOpen runs the
// handler unguarded "only when the store could not learn the key's state". A retry of a
// request whose first run charged a card (checkpoint "charged") and then failed:
//
//  1. O runs, checkpoints "charged", fails: the release leaves a tombstone with the
//     checkpoint (the key is kept for this request, whose effects it records).
//  2. The retry's first claim is refused and returns that record: the guard now knows the
//     key's state (a lease-ended record with a checkpoint), and claims again carrying it.
//  3. That second claim fails with a store error (throttling).
//
// The guard must not fail open (the handler would run without a lease and charge the
// card again): it had the record that says the card was charged, so it returns the store
// error.
func TestFailOpenRefusedAfterTakeoverClaimMetCheckpoint(t *testing.T) {
	inner := memstore.New()
	s := &failNthClaim{Store: inner}
	clock := storetest.NewSettableClock()
	g, err := idem.New(s, "pay", idem.WithClock(clock), idem.WithFailOpen(true), idem.WithScope("s"))
	require.NoError(t, err)
	req := idem.Request{Key: "order-1", Fingerprint: []byte("A")}
	charges := 0
	handler := func(ctx context.Context) (string, error) {
		if idem.LastCheckpoint(ctx) != "charged" {
			charges++
			if err := idem.Checkpoint(ctx, "charged"); err != nil && !errors.Is(err, idem.ErrNoLease) {
				return "", err
			}
		}
		return "", errors.New("shipping failed")
	}
	_, _, err = idem.Do(context.Background(), g, req, handler) // O: charges, then fails
	require.Error(t, err)
	require.Equal(t, 1, charges)

	clock.Advance(time.Second)
	s.n, s.fail = 0, 2 // the retry's takeover claim (its second) fails
	_, _, err = idem.Do(context.Background(), g, req, handler)
	require.ErrorIs(t, err, idem.ErrStore, "the takeover claim's store error")
	require.Equal(t, 1, charges, "the retry ran unguarded and charged again although the guard had read the record holding checkpoint \"charged\"")
}

// pollThenFail wraps failNthClaim: its first Get (a WithWait poll) runs onGet first.
type pollThenFail struct {
	*failNthClaim
	onGet func()
}

func (s *pollThenFail) Get(ctx context.Context, key string) (*idemstore.Record, error) {
	if f := s.onGet; f != nil {
		s.onGet = nil
		f()
	}
	return s.failNthClaim.Get(ctx, key)
}

// TestFailOpenRefusedAfterWaitPollMetCheckpoint: the same through WithWait. The
// owner of a request crashed after checkpointing "charged"; its retry (WithWait,
// WithFailOpen) meets its live lease and waits; a poll reads the record, whose lease has
// ended by then, and the guard claims again; that claim fails with a store error. The
// guard has just read the record holding the key with its checkpoint: it must return the
// store error, not run the handler unguarded.
func TestFailOpenRefusedAfterWaitPollMetCheckpoint(t *testing.T) {
	inner := memstore.New()
	s := &pollThenFail{failNthClaim: &failNthClaim{Store: inner}}
	clock := storetest.NewSettableClock()
	opts := []idem.Option{idem.WithClock(clock), idem.WithFailOpen(true), idem.WithScope("s"),
		idem.WithLease(time.Minute), idem.WithWait(10*time.Second, 10*time.Millisecond)}
	g, err := idem.New(s, "pay", opts...)
	require.NoError(t, err)
	req := idem.Request{Key: "order-1", Fingerprint: []byte("A")}
	charges := 0
	var crashed *idemstore.Record
	_, _, _ = idem.Do(context.Background(), g, req, func(ctx context.Context) (string, error) { // X
		charges++
		require.NoError(t, idem.Checkpoint(ctx, "charged"))
		crashed, _ = inner.Get(context.Background(), idem.StoredKey(ctx))
		return "", errors.New("crash")
	})
	inner.Put(*crashed) // X crashed after its checkpoint: its lease was never released
	require.Equal(t, 1, charges)

	s.onGet = func() {
		clock.Advance(crashed.LeaseExpires.Sub(clock.Now()) + time.Second) // X's lease ends
		s.n, s.fail = 0, 1                                                 // the next claim is throttled
	}
	_, _, err = idem.Do(context.Background(), g, req, func(ctx context.Context) (string, error) {
		if idem.LastCheckpoint(ctx) != "charged" {
			charges++
		}
		return "done", nil
	})
	require.ErrorIs(t, err, idem.ErrStore, "the claim after the poll: its store error")
	require.Equal(t, 1, charges, "the retry ran unguarded and charged again although its poll had just read the record holding checkpoint \"charged\"")
}

// TestBatchFailOpenRefusedAfterTakeoverClaimMetCheckpoint: the batch path
// (Guard.Claim, DoClaimed) likewise: ClaimMany returns the tombstone holding the request's
// checkpoint, the takeover claim carrying it fails with a store error, and DoClaimed must
// return that error rather than run the handler unguarded.
func TestBatchFailOpenRefusedAfterTakeoverClaimMetCheckpoint(t *testing.T) {
	inner := memstore.New()
	s := &failNthClaim{Store: inner}
	clock := storetest.NewSettableClock()
	g, err := idem.New(s, "pay", idem.WithClock(clock), idem.WithFailOpen(true), idem.WithScope("s"))
	require.NoError(t, err)
	req := idem.Request{Key: "order-1", Fingerprint: []byte("A")}
	charges := 0
	handler := func(ctx context.Context) (string, error) {
		if idem.LastCheckpoint(ctx) != "charged" {
			charges++
			if err := idem.Checkpoint(ctx, "charged"); err != nil && !errors.Is(err, idem.ErrNoLease) {
				return "", err
			}
		}
		return "", errors.New("shipping failed")
	}
	_, _, err = idem.Do(context.Background(), g, req, handler) // charges, then fails: tombstone with "charged"
	require.Error(t, err)
	require.Equal(t, 1, charges)

	clock.Advance(time.Second)
	s.n, s.fail = 0, 1 // the takeover claim (the first single claim after ClaimMany) fails
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := g.Claim(ctx, []idem.Request{req, {Key: "order-2", Fingerprint: []byte("B")}})
	_, _, err = idem.DoClaimed(ctx, b, 0, handler)
	require.ErrorIs(t, err, idem.ErrStore, "the takeover claim's store error")
	b.Settle(ctx)
	require.Equal(t, 1, charges, "the batch retry ran unguarded and charged again although ClaimMany returned the record holding checkpoint \"charged\"")
}

// conflictWithoutRecord is a store whose claims are refused without the record that
// holds the key, against the Store contract.
type conflictWithoutRecord struct{ *memstore.Store }

func (conflictWithoutRecord) Claim(context.Context, *idemstore.Record, time.Time) (*idemstore.Record, bool, error) {
	return nil, false, nil
}

// TestFailOpenRefusedOnConflictWithoutRecord: a store that refuses a claim has said the
// key is taken, even when it returns no record: the guard returns a store error and never
// runs the handler unguarded.
func TestFailOpenRefusedOnConflictWithoutRecord(t *testing.T) {
	g, err := idem.New(conflictWithoutRecord{memstore.New()}, "pay", idem.WithFailOpen(true), idem.WithScope("s"))
	require.NoError(t, err)
	ran := false
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "order-1"}, func(context.Context) (string, error) {
		ran = true
		return "", nil
	})
	require.ErrorIs(t, err, idem.ErrStore)
	require.False(t, ran, "the store said the key is taken: the handler must not run unguarded")
}

// TestBatchWaitFailOpenRefusedAfterClaimManyMetRecord: with WithWait, a batch request whose
// key ClaimMany found in flight elsewhere waits as Do does; when the claim that starts that
// wait fails with a store error, the guard already knows a record holds the key (ClaimMany
// returned it): DoClaimed returns the store error rather than run the handler unguarded.
func TestBatchWaitFailOpenRefusedAfterClaimManyMetRecord(t *testing.T) {
	inner := memstore.New()
	s := &failNthClaim{Store: inner}
	clock := storetest.NewSettableClock()
	g, err := idem.New(s, "pay", idem.WithClock(clock), idem.WithFailOpen(true), idem.WithScope("s"),
		idem.WithLease(time.Minute), idem.WithWait(10*time.Second, 10*time.Millisecond))
	require.NoError(t, err)
	req := idem.Request{Key: "order-1", Fingerprint: []byte("A")}
	var crashed *idemstore.Record
	_, _, _ = idem.Do(context.Background(), g, req, func(ctx context.Context) (string, error) { // X
		require.NoError(t, idem.Checkpoint(ctx, "charged"))
		crashed, _ = inner.Get(context.Background(), idem.StoredKey(ctx))
		return "", errors.New("crash")
	})
	inner.Put(*crashed) // X crashed: its lease still runs

	s.n, s.fail = 0, 1 // the first single claim (the one Do makes to wait) fails
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := g.Claim(ctx, []idem.Request{req, {Key: "order-2", Fingerprint: []byte("B")}})
	ran := false
	_, _, err = idem.DoClaimed(ctx, b, 0, func(context.Context) (string, error) {
		ran = true
		return "done", nil
	})
	b.Settle(ctx)
	require.ErrorIs(t, err, idem.ErrStore)
	require.False(t, ran, "ClaimMany met the record holding the key: the handler must not run unguarded")
}
