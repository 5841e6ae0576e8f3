package batch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// interleavedStore is a memstore.Store whose batch claims, like DynamoDB's
// (BatchExecuteStatement), are not atomic across keys: each key is claimed on its own, and
// the first two batch claims of two keys or more meet after their first key, so that two
// concurrent batches each take the first key of their own order.
type interleavedStore struct {
	*memstore.Store
	once    sync.Once
	barrier sync.WaitGroup
}

func newInterleavedStore() *interleavedStore {
	s := &interleavedStore{Store: memstore.New()}
	s.barrier.Add(2)
	return s
}

func (s *interleavedStore) ClaimMany(ctx context.Context, recs []*idemstore.Record, now time.Time) []idemstore.ClaimResult {
	out := make([]idemstore.ClaimResult, len(recs))
	for i, r := range recs {
		out[i].Prev, out[i].Claimed, out[i].Err = s.Claim(ctx, r, now)
		if i == 0 && len(recs) > 1 {
			s.barrier.Done()
			s.barrier.Wait()
		}
	}
	return out
}

// TestReview18_WaitInFlightMutualWait: two concurrent batches of one engine (a service
// consuming two partitions, or two overlapping invocations) carry the same two keys in
// opposite orders. Batch claims are not atomic across keys (DynamoDB's are not), so each
// batch claims the key it lists first and meets the other in flight. Each then runs its
// own key at once, and that outcome waits for its batch's Settle, which comes only after
// every item of the batch returned; its other item waits, with WithWaitInFlight, for the
// key the other batch ran, whose outcome waits in turn for that batch's Settle. A cycle:
// neither completion is stored until a waiter gives up, so both waiters poll in vain
// until their cut-off and fail in progress, though both keys ran and succeeded at the
// start. WithWaitInFlight promises the waiter replays the other run's result once it
// completes; here the wait itself keeps it from completing.
//
// Schedule: A = [k1, k2], B = [k2', k1'] (same keys and fingerprints).
//  1. A's claim takes k1, B's takes k2 (the store's barrier); A meets k2 and B meets k1
//     in progress.
//  2. A runs k1 (ran, left for A's Settle); B runs k2 (left for B's Settle).
//  3. A's k2 polls k2: in progress (B's claim, B's outcome unsettled); B's k1 likewise.
//  4. Both poll, with back-off, until the cut-off (deadline 3 s less margin 1 s), and fail
//     in progress; only then do the batches settle.
//
// Severity: medium (liveness). The wait spends the invocation and still fails the items;
// the records are redelivered and replay, so nothing runs twice or is skipped, but a
// consumer whose concurrent batches overlap stalls for the whole cut-off on every such
// batch. Fails on main: A's k2 and B's k1 fail in_progress instead of replaying.
func TestReview18_WaitInFlightMutualWait(t *testing.T) {
	t.Parallel()
	store := newInterleavedStore()
	g, err := idem.New(store, "review18-mutual")
	require.NoError(t, err)
	e, err := batch.New(g, batch.Source{}, batch.WithWaitInFlight(true), batch.WithDeadlineMargin(time.Second))
	require.NoError(t, err)

	itsA := items("a/k1", "b/k2")
	itsB := items("c/k2", "d/k1")
	recA, recB := &recorder{items: itsA}, &recorder{items: itsB}
	var repA, repB *batch.Report
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		repA = e.Process(deadlineContext(t, g.Clock(), 3*time.Second), itsA, recA.run, batch.Mode{})
	}()
	go func() {
		defer wg.Done()
		repB = e.Process(deadlineContext(t, g.Clock(), 3*time.Second), itsB, recB.run, batch.Mode{})
	}()
	wg.Wait()

	assert.Equal(t, []string{"k1"}, recA.ran, "A ran the key it claimed")
	assert.Equal(t, []string{"k2"}, recB.ran, "B ran the key it claimed")
	assert.True(t, completed(t, g, store, "key-k1"))
	assert.True(t, completed(t, g, store, "key-k2"))
	assert.Equal(t, []string{"k1:ran", "k2:replayed"}, statuses(repA), "A's k2 replays B's run")
	assert.Equal(t, []string{"k2:ran", "k1:replayed"}, statuses(repB), "B's k1 replays A's run")
}
