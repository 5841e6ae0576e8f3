package kafkaconsumer_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/kafkaconsumer"
	"github.com/idemkit/idem/memstore"
)

var errReview16 = errors.New("review16: transient handler failure")

// failOnce returns a handler that applies each record to l, but fails the first attempt of
// the records for which fails reports true.
func failOnce(l *ledger, fails func(r *kgo.Record) bool) func(context.Context, *kgo.Record) error {
	var mu sync.Mutex
	failed := map[int64]bool{}
	return func(_ context.Context, r *kgo.Record) error {
		if fails(r) {
			mu.Lock()
			first := !failed[int64(r.Partition)<<40|r.Offset]
			failed[int64(r.Partition)<<40|r.Offset] = true
			mu.Unlock()
			if first {
				return errReview16
			}
		}
		l.apply(r)
		return nil
	}
}

// TestReview16_RewindDropsBufferedRecords: a poll takes 2 records of a partition whose
// fetch already buffered many more; the second fails. The rewind (SetOffsets) must drop
// the buffered records past the failure, or the next poll returns them, they succeed and
// their commit skips the failed record. Every record takes effect exactly once and the
// partition's end is committed.
func TestReview16_RewindDropsBufferedRecords(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 1)
	recs := k.produce(0, 20, func(i int) string { return []string{"a", "b", "c"}[i%3] })
	l := newLedger()
	c := newConsumer(t, k, memstore.New(), "g", nil, failOnce(l, func(r *kgo.Record) bool { return r.Offset == 1 || r.Offset == 7 }), nil,
		kafkaconsumer.WithMaxRecords(2), kafkaconsumer.WithConcurrency(1))
	var retried []kafkaconsumer.Offset
	for _, rep := range pollUntil(t, c, k.committedAll("g", ends(recs))) {
		retried = append(retried, rep.Retried...)
	}
	l.assertOnce(t, recs)
	assert.Contains(t, retried, kafkaconsumer.Offset{Topic: topic, Partition: 0, Offset: 1})
	assert.Contains(t, retried, kafkaconsumer.Offset{Topic: topic, Partition: 0, Offset: 7})
	// Each record key took effect in offset order: its failed record before its later ones
	// (other keys go on past a failure, by design).
	l.mu.Lock()
	defer l.mu.Unlock()
	last := map[int64]int64{}
	for _, o := range l.order[0] {
		if prev, ok := last[o%3]; ok {
			require.Greater(t, o, prev, "key %d took effect in offset order: %v", o%3, l.order[0])
		}
		last[o%3] = o
	}
}

// TestReview16_CommitStopsAtFirstFailureAcrossKeys: in one partition, key b's record at
// offset 1 fails while key a's records around it succeed and key b's later record is held
// back. The commit must stop at offset 1, the first unfinished record of the partition
// across all its keys, not at the end of key a's run.
func TestReview16_CommitStopsAtFirstFailureAcrossKeys(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 1)
	// offsets: 0 a, 1 b, 2 a, 3 b, 4 a, 5 a
	keys := []string{"a", "b", "a", "b", "a", "a"}
	recs := k.produce(0, len(keys), func(i int) string { return keys[i] })
	l := newLedger()
	var mu sync.Mutex
	attempts := 0
	c := newConsumer(t, k, memstore.New(), "g", nil, func(_ context.Context, r *kgo.Record) error {
		if r.Offset == 1 {
			mu.Lock()
			attempts++
			n := attempts
			mu.Unlock()
			if n == 1 {
				return errReview16
			}
		}
		l.apply(r)
		return nil
	}, nil)
	var first *kafkaconsumer.Report
	for first == nil || len(first.Outcomes) == 0 {
		rep, err := c.Poll(context.Background())
		require.NoError(t, err)
		first = rep
	}
	require.Len(t, first.Outcomes, len(keys), "one poll took the partition")
	assert.Equal(t, []kafkaconsumer.Offset{{Topic: topic, Partition: 0, Offset: 1}}, first.Committed)
	assert.Equal(t, []kafkaconsumer.Offset{{Topic: topic, Partition: 0, Offset: 1}}, first.Retried)
	assert.Equal(t, map[int32]int64{0: 1}, k.committed("g"))
	pollUntil(t, c, k.committedAll("g", ends(recs)))
	l.assertOnce(t, recs)
}

// TestReview16_KickedOwnerStillConnected: consumer A's batch runs past the group's
// rebalance timeout while B joins, A staying connected to the broker. The group drops A
// (its partitions lost while its batch runs, with the default batch claims and timeout), B
// takes the partition over from the last commit and meets A's records in flight; A then
// finishes, records its outcomes and tries to commit with its old membership. B must
// replay what A did, never run it again, and commit the partition's end.
func TestReview16_KickedOwnerStillConnected(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 1)
	recs := k.produce(0, 6, func(int) string { return "a" })
	store := memstore.New()
	l := newLedger()
	blocked, release := make(chan struct{}), make(chan struct{})
	var blockOnce, releaseOnce sync.Once
	a := newConsumer(t, k, store, "g", nil, func(_ context.Context, r *kgo.Record) error {
		if r.Offset == 2 {
			blockOnce.Do(func() { close(blocked) })
			select {
			case <-release:
			case <-time.After(20 * time.Second):
			}
		}
		l.apply(r)
		return nil
	}, nil)
	var wg sync.WaitGroup
	wg.Add(1)
	var errsA []error
	go func() {
		defer wg.Done()
		for ctx := context.Background(); ; {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := a.Poll(pctx)
			cancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				errsA = append(errsA, err)
			}
			select {
			case <-release:
				return
			default:
			}
		}
	}()
	<-blocked
	var inProgress atomic.Int64
	b := newConsumer(t, k, store, "g", nil, func(_ context.Context, r *kgo.Record) error {
		l.apply(r)
		return nil
	}, []idem.Option{idem.WithHooks(idem.Hooks{OnBatch: func(_ context.Context, ev idem.BatchEvent) {
		for _, it := range ev.Items {
			if it.Reason == string(batch.ReasonInProgress) {
				if inProgress.Add(1) >= 2 {
					releaseOnce.Do(func() { close(release) })
				}
			}
		}
	}})})
	pollUntil(t, b, k.committedAll("g", ends(recs)))
	releaseOnce.Do(func() { close(release) })
	wg.Wait()
	t.Logf("A's poll errors: %v", errsA)
	l.assertOnce(t, recs)
	assert.GreaterOrEqual(t, inProgress.Load(), int64(2), "B met A's records in flight")
	assert.Equal(t, map[int32]int64{0: 6}, k.committed("g"))
}
