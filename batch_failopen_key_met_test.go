package idem_test

import (
	"context"
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

// claimsThenDown answers its first ok single-record claims and fails every later one with a
// store error (a store that goes down in the middle of a batch).
type claimsThenDown struct {
	*memstore.Store
	mu sync.Mutex
	ok int
}

func (s *claimsThenDown) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	s.mu.Lock()
	up := s.ok > 0
	s.ok--
	s.mu.Unlock()
	if !up {
		return nil, false, errDown
	}
	return s.Store.Claim(ctx, rec, now)
}

// TestBatchFailOpenRefusedForAKeyAnotherRequestOfTheBatchMet: no request of a batch fails
// open for a key once another request of the batch met the key's record, even where no
// batch claim was made. A batch with a single key to claim claims nothing (DoClaimed claims
// as Do), and so does every batch on a store without batch support (pgstore, redisstore):
// the record one request's Do met must still forbid the others of the key to fail open,
// as a batch claim's record does (TestBatchFailOpenOtherFingerprintRefusedAfterClaimManyMetRecord).
// Review 6 found that K/B ran twice here: unguarded, while another caller ran it.
//
//  1. Caller 1 (another invocation) runs K/B and is in flight: a live record holds K.
//  2. WithFailOpen(true); Guard.Claim([K/A, K/B]): one key to claim, so nothing is claimed
//     (subtest OneKey), or a store without batch support (NoBatchStorePadded).
//  3. DoClaimed(0) (K/A): its Do's claim meets caller 1's record: ErrPayloadMismatch.
//  4. The store goes down.
//  5. DoClaimed(1) (K/B): its Do's claim fails with a store error and met no record in that
//     call, but request 0 met one: it returns the store error, without running.
//
// Subtest OneKeyOtherFirst calls them the other way round: DoClaimed(1) meets caller 1's
// record (ErrInProgress), then DoClaimed(0), the key's first request, must not run K/A.
func TestBatchFailOpenRefusedForAKeyAnotherRequestOfTheBatchMet(t *testing.T) {
	for _, tc := range []struct {
		name       string
		store      func(*memstore.Store) idemstore.Store
		reqs       []idem.Request
		otherFirst bool // DoClaimed(1) first
	}{
		// A batch store, one key: Claim claims nothing.
		{name: "OneKey", store: func(ms *memstore.Store) idemstore.Store { return &claimsThenDown{Store: ms, ok: 1} },
			reqs: []idem.Request{{Key: "K", Fingerprint: []byte("A")}, {Key: "K", Fingerprint: []byte("B")}}},
		{name: "OneKeyOtherFirst", store: func(ms *memstore.Store) idemstore.Store { return &claimsThenDown{Store: ms, ok: 1} },
			reqs: []idem.Request{{Key: "K", Fingerprint: []byte("A")}, {Key: "K", Fingerprint: []byte("B")}}, otherFirst: true},
		// A store without batch support (pgstore, redisstore): every batch claims lazily, so
		// padding the batch does not help.
		{name: "NoBatchStorePadded", store: func(ms *memstore.Store) idemstore.Store { return plainStore{&claimsThenDown{Store: ms, ok: 1}} },
			reqs: []idem.Request{{Key: "K", Fingerprint: []byte("A")}, {Key: "K", Fingerprint: []byte("B")}, {Key: "pad"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := memstore.New()
			g1, err := idem.New(ms, "op", idem.WithScope("test"))
			require.NoError(t, err)
			var runsB atomic.Int32
			started, release := make(chan struct{}), make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _, _ = idem.Do(context.Background(), g1, idem.Request{Key: "K", Fingerprint: []byte("B")}, func(context.Context) (int, error) {
					runsB.Add(1)
					close(started)
					<-release
					return 1, nil
				})
			}()
			<-started
			defer func() { close(release); <-done }()

			g2, err := idem.New(tc.store(ms), "op", idem.WithScope("test"), idem.WithFailOpen(true))
			require.NoError(t, err)
			ctx := context.Background()
			b := g2.Claim(ctx, tc.reqs)
			var runsA atomic.Int32
			doA := func() error {
				_, _, err := idem.DoClaimed(ctx, b, 0, func(context.Context) (int, error) {
					runsA.Add(1)
					return 0, nil
				})
				return err
			}
			doB := func() error {
				_, _, err := idem.DoClaimed(ctx, b, 1, func(context.Context) (int, error) {
					runsB.Add(1)
					return 2, nil
				})
				return err
			}
			if tc.otherFirst {
				require.ErrorIs(t, doB(), idem.ErrInProgress, "request 1's Do met caller 1's live record of K")
				errA := doA()
				b.Settle(ctx)
				t.Logf("request 0: err=%v", errA)
				assert.Zero(t, runsA.Load(), "K/A ran unguarded over caller 1's record, which request 1 had met")
				assert.ErrorIs(t, errA, idem.ErrStore)
				return
			}
			require.ErrorIs(t, doA(), idem.ErrPayloadMismatch, "request 0's Do met caller 1's live record of K")
			errB := doB()
			b.Settle(ctx)
			t.Logf("request 1: err=%v", errB)
			assert.Zero(t, runsA.Load())
			assert.Equal(t, int32(1), runsB.Load(), "K/B ran again, unguarded, while caller 1 still ran it: the batch had met caller 1's record")
			assert.ErrorIs(t, errB, idem.ErrStore, "request 1 should get the store error, as with a padded batch on a batch store")
		})
	}
}

// plainStore hides every method but those of idemstore.Store: a store without batch
// support, as pgstore and redisstore are.
type plainStore struct{ idemstore.Store }

// claimManyDown fails every batch claim with a store error; single claims work.
type claimManyDown struct{ *memstore.Store }

func (claimManyDown) ClaimMany(_ context.Context, recs []*idemstore.Record, _ time.Time) []idemstore.ClaimResult {
	out := make([]idemstore.ClaimResult, len(recs))
	for i := range out {
		out[i].Err = errDown
	}
	return out
}

// TestBatchFailOpenRefusedAfterAnotherRequestsDoMetTheRecord: the batch claim of a key
// failed with a store error, so the key's first request would fail open. But a request of
// the same key with another fingerprint, called first, met the key's live record through
// a Do of its own: the key's first request must then return the store error, not run
// unguarded over a key another caller holds.
//
//  1. Caller 1 (another invocation) runs K/B and is in flight: a live record holds K.
//  2. WithFailOpen(true); Guard.Claim([K/A, K/B, pad]): ClaimMany fails for every key.
//  3. DoClaimed(1) (K/B): its Do's claim meets caller 1's record: ErrInProgress.
//  4. DoClaimed(0) (K/A): its batch claim failed; it must not fail open.
func TestBatchFailOpenRefusedAfterAnotherRequestsDoMetTheRecord(t *testing.T) {
	ms := memstore.New()
	g1, err := idem.New(ms, "op", idem.WithScope("test"))
	require.NoError(t, err)
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = idem.Do(context.Background(), g1, idem.Request{Key: "K", Fingerprint: []byte("B")}, func(context.Context) (int, error) {
			close(started)
			<-release
			return 1, nil
		})
	}()
	<-started
	defer func() { close(release); <-done }()

	g2, err := idem.New(claimManyDown{ms}, "op", idem.WithScope("test"), idem.WithFailOpen(true))
	require.NoError(t, err)
	ctx := context.Background()
	b := g2.Claim(ctx, []idem.Request{{Key: "K", Fingerprint: []byte("A")}, {Key: "K", Fingerprint: []byte("B")}, {Key: "pad"}})
	_, _, errB := idem.DoClaimed(ctx, b, 1, func(context.Context) (int, error) { return 2, nil })
	require.ErrorIs(t, errB, idem.ErrInProgress, "request 1's Do met caller 1's live record of K")
	var runsA atomic.Int32
	_, _, errA := idem.DoClaimed(ctx, b, 0, func(context.Context) (int, error) {
		runsA.Add(1)
		return 0, nil
	})
	b.Settle(ctx)
	assert.Zero(t, runsA.Load(), "K/A ran unguarded although request 1 had met caller 1's record of K")
	assert.ErrorIs(t, errA, idem.ErrStore)
}
