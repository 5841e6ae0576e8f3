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
	"github.com/idemkit/idem/idemstore/storetest"
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

// TestReview6_LazyBatchOtherFingerprintFailsOpenOverMetRecord: a batch with a single key
// to claim claims nothing (Guard.Claim's "lazy" path: DoClaimed behaves as Do). The
// batch's first request of the key then learns, through its own Do, that a live record of
// another caller holds the key; a request of the same key with another fingerprint answers
// through a Do of its own, and that Do is not told of the record the batch met. When its
// claim fails with a store error it fails open and runs its handler unguarded, while the
// other caller runs the very same request: one request (key K, payload B) runs twice.
//
// With one more key in the batch (so that ClaimMany claims), the same request is refused
// (TestBatchFailOpenOtherFingerprintRefusedAfterClaimManyMetRecord, which pads the batch
// with a second key): the guarantee that a call never fails open once it met the key's
// record depends on how many keys the batch holds. On a store without batch support
// (pgstore, redisstore) every batch claims lazily, so there no batch is ever protected
// (subtest NoBatchStorePadded).
//
//  1. Caller 1 (another invocation) runs K/B and is in flight: a live record holds K.
//  2. WithFailOpen(true); Guard.Claim([K/A, K/B]): one key to claim, so nothing is claimed.
//  3. DoClaimed(0) (K/A): its Do's claim meets caller 1's record: ErrPayloadMismatch.
//  4. The store goes down.
//  5. DoClaimed(1) (K/B): its Do's claim fails with a store error, met no record in that
//     call, and fails open: B runs a second time while caller 1 still runs it.
func TestReview6_LazyBatchOtherFingerprintFailsOpenOverMetRecord(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(*memstore.Store) idemstore.Store
		reqs  []idem.Request
	}{
		// A batch store, one key: Claim claims nothing.
		{name: "OneKey", store: func(ms *memstore.Store) idemstore.Store { return &claimsThenDown{Store: ms, ok: 1} },
			reqs: []idem.Request{{Key: "K", Fingerprint: []byte("A")}, {Key: "K", Fingerprint: []byte("B")}}},
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
			_, _, errA := idem.DoClaimed(ctx, b, 0, func(context.Context) (int, error) { return 0, nil })
			require.ErrorIs(t, errA, idem.ErrPayloadMismatch, "request 0's Do met caller 1's live record of K")
			_, _, errB := idem.DoClaimed(ctx, b, 1, func(context.Context) (int, error) {
				runsB.Add(1)
				return 2, nil
			})
			b.Settle(ctx)
			t.Logf("request 1: err=%v", errB)
			assert.Equal(t, int32(1), runsB.Load(), "K/B ran again, unguarded, while caller 1 still ran it: the batch had met caller 1's record")
			assert.ErrorIs(t, errB, idem.ErrStore, "request 1 should get the store error, as with a padded batch on a batch store")
		})
	}
}

// plainStore hides every method but those of idemstore.Store: a store without batch
// support, as pgstore and redisstore are.
type plainStore struct{ idemstore.Store }

// TestReview6_BatchOtherFingerprintFailsOpenOverCheckpointMismatch: ClaimMany meets the
// key's record, a released (or lease-ended) record holding the checkpoint of request A's
// effects, but the batch's first request of the key carries payload B. Claim's takeover
// step (Guard.claimed, carryCheckpoint) answers ErrPayloadMismatch and drops the record it
// met: the item keeps no record (rec nil). The batch's request of the key with payload A,
// another fingerprint than the first's, answers through a Do that is given that nil as the
// record the batch met. When its claim fails with a store error it fails open and runs A
// unguarded, without the checkpoint: A's effects up to "charged" happen again (and once
// the store is back, the next owner takes the record over, resumes from "charged", and
// runs A a third time).
//
// A Do of K/A alone that met the record would never fail open
// (TestFailOpenRefusedAfterTakeoverClaimMetCheckpoint), nor does a batch request whose
// first request of the key carries A (TestBatchFailOpenRefusedAfterTakeoverClaimMetCheckpoint).
//
//  1. Do(K/A) charges, checkpoints "charged", fails: the tombstone keeps "charged" (fp A).
//  2. The store's single claims go down; WithFailOpen(true).
//  3. Claim([K/B, K/A, pad]): ClaimMany meets the tombstone for K; carrying its
//     checkpoint is refused for B (ErrPayloadMismatch), and the record is dropped.
//  4. DoClaimed(0) (K/B): ErrPayloadMismatch, as it should.
//  5. DoClaimed(1) (K/A): its Do's claim fails with a store error, met no record in that
//     call, and runs A unguarded: charged twice.
func TestReview6_BatchOtherFingerprintFailsOpenOverCheckpointMismatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		order []int
	}{
		{name: "FirstRunsFirst", order: []int{0, 1}},
		{name: "OtherFirst", order: []int{1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := memstore.New()
			clock := storetest.NewClock()
			g1, err := idem.New(ms, "pay", idem.WithClock(clock), idem.WithScope("s"))
			require.NoError(t, err)
			reqA := idem.Request{Key: "order-1", Fingerprint: []byte("A")}
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
			_, _, err = idem.Do(context.Background(), g1, reqA, handler) // charges, then fails: tombstone with "charged"
			require.Error(t, err)
			require.Equal(t, 1, charges)
			clock.Advance(time.Second)

			g2, err := idem.New(singleClaimDown{ms}, "pay", idem.WithClock(clock), idem.WithScope("s"), idem.WithFailOpen(true))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b := g2.Claim(ctx, []idem.Request{
				{Key: "order-1", Fingerprint: []byte("B")},
				reqA,
				{Key: "pad"},
			})
			for _, i := range tc.order {
				_, _, err := idem.DoClaimed(ctx, b, i, handler)
				t.Logf("request %d: err=%v", i, err)
				if i == 0 {
					require.ErrorIs(t, err, idem.ErrPayloadMismatch)
				}
			}
			b.Settle(ctx)
			assert.Equal(t, 1, charges, "K/A ran unguarded and charged again, although ClaimMany met the record holding its checkpoint")
		})
	}
}
