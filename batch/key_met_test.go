package batch_test

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
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// keyDownStore is a memstore.Store whose single claims of key down fail, as a throttled
// DynamoDB answers, once ok of them have passed. Other keys and batch claims (memstore's
// ClaimMany) pass.
type keyDownStore struct {
	*memstore.Store
	down   string
	mu     sync.Mutex
	ok     int
	failed int
}

func (s *keyDownStore) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	s.mu.Lock()
	fail := rec.Key == s.down && s.ok <= 0
	if rec.Key == s.down {
		s.ok--
	}
	if fail {
		s.failed++
	}
	s.mu.Unlock()
	if fail {
		return nil, false, errors.New("ProvisionedThroughputExceededException: throttled")
	}
	return s.Store.Claim(ctx, rec, now)
}

// singleStore hides memstore's batch claims: a store without batch support (pgstore,
// redisstore), on which a batch claims lazily, through idem.Do.
type singleStore struct{ idemstore.Store }

// TestEngineNeverFailsOpenOverAKeyItMet: with idem.WithFailOpen, no call the engine makes
// for a key fails open once a call for the key in the batch met a record holding it, on
// every path where the engine calls the guard again for a key: a WithWaitInFlight poll
// after the item's own claim (per item, RecordEach, or a batch's lazy claim on a store
// without batch support), and a later item of the key with another fingerprint (no batch
// claims then). Each is a fresh idem.Do of its own unless the engine carries the record
// met (idem.DoMet); without it the first claim the store fails ran the handler over the
// live run that holds the key (review 21).
//
// Schedule: an owner elsewhere holds key-a1 (its handler blocked); the store answers the
// batch's first single claim of key-a1, which meets the owner's record, and fails every
// later one; the batch's item for key-a1 must fail (store or in progress) and not run.
func TestEngineNeverFailsOpenOverAKeyItMet(t *testing.T) {
	t.Parallel()
	waitOpts := []batch.Option{batch.WithWaitInFlight(true), batch.WithDeadlineMargin(time.Second)}
	a1 := batch.Item{ID: "a1", Group: "a", Key: "key-a1", Fingerprint: []byte("a1")}
	a1Other := batch.Item{ID: "a1-other", Group: "a", Key: "key-a1", Fingerprint: []byte("other")}
	for _, tc := range []struct {
		name  string
		store func(*keyDownStore) idemstore.Store
		opts  []batch.Option
		mode  batch.Mode
		items []batch.Item
		want  []string
	}{
		{name: "WaitPerItem", opts: append([]batch.Option{batch.WithBatchClaims(false)}, waitOpts...),
			items: []batch.Item{a1}, want: []string{"a1:store"}},
		{name: "WaitRecordEach", opts: waitOpts, mode: batch.Mode{Ordered: true, RecordEach: true},
			items: []batch.Item{a1}, want: []string{"a1:store"}},
		{name: "WaitLazyBatchClaim", store: func(s *keyDownStore) idemstore.Store { return singleStore{s} },
			opts: waitOpts, items: []batch.Item{a1, {ID: "b1", Group: "b", Key: "key-b1"}},
			want: []string{"a1:store", "b1:ran"}},
		{name: "OtherFingerprint", items: []batch.Item{a1, a1Other},
			want: []string{"a1:in_progress", "a1-other:store"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ms := memstore.New()
			owner, err := idem.New(ms, "key-met")
			require.NoError(t, err)
			var runsA1 atomic.Int32
			started, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				_, _, err := idem.Do(context.Background(), owner, idem.Request{Key: "key-a1", Fingerprint: []byte("a1")},
					func(context.Context) (struct{}, error) {
						runsA1.Add(1)
						close(started)
						<-release
						return struct{}{}, nil
					})
				assert.NoError(t, err)
			}()
			<-started
			defer func() { close(release); <-done }()

			key, err := owner.StoredKey(idem.Request{Key: "key-a1"})
			require.NoError(t, err)
			kd := &keyDownStore{Store: ms, down: key, ok: 1}
			var store idemstore.Store = kd
			if tc.store != nil {
				store = tc.store(kd)
			}
			g, err := idem.New(store, "key-met", idem.WithFailOpen(true))
			require.NoError(t, err)
			e, err := batch.New(g, batch.Source{}, tc.opts...)
			require.NoError(t, err)
			var mu sync.Mutex
			var ran []string
			rep := e.Process(deadlineContext(t, g.Clock(), 3*time.Second), tc.items, func(_ context.Context, i int) error {
				if tc.items[i].Key == "key-a1" {
					runsA1.Add(1)
				}
				mu.Lock()
				ran = append(ran, tc.items[i].ID)
				mu.Unlock()
				return nil
			}, tc.mode)
			t.Logf("outcomes %v, ran %v", statuses(rep), ran)
			kd.mu.Lock()
			failed := kd.failed
			kd.mu.Unlock()
			require.Positive(t, failed, "a later claim of key-a1 met the store failure")
			assert.Equal(t, int32(1), runsA1.Load(), "key-a1 ran over the live run that holds it")
			assert.Equal(t, tc.want, statuses(rep))
		})
	}
}
