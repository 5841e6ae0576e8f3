package kafkaconsumer_test

import (
	"context"
	"errors"
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

// TestPollCommitsOnlyPastRecordedOutcomes: a record whose handler fails holds its
// partition's commit at its offset, stops the later records of its key, and is consumed
// again from there; the other key's records go on, and replay when consumed again. Every
// record takes effect once, each key in offset order, and the group ends committed at the
// end of the partition.
func TestPollCommitsOnlyPastRecordedOutcomes(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			k := newCluster(t, 1)
			recs := k.produce(0, 10, func(i int) string { return []string{"a", "b"}[i%2] })
			l := newLedger()
			var failed atomic.Bool
			fn := func(_ context.Context, r *kgo.Record) error {
				if r.Offset == 3 && !failed.Swap(true) {
					return errors.New("downstream unavailable")
				}
				l.apply(r)
				return nil
			}
			c := newConsumer(t, k, st.new(t), "g", nil, fn, nil)
			reps := pollUntil(t, c, k.committedAll("g", ends(recs)))

			var retried bool
			for _, rep := range reps {
				for _, o := range rep.Outcomes {
					if o.Offset == 3 && o.Reason == batch.ReasonHandler {
						retried = true
						assert.Contains(t, rep.Retried, kafkaconsumer.Offset{Topic: topic, Partition: 0, Offset: 3})
					}
					if o.Failed() {
						assert.Contains(t, []kafkaconsumer.Reason{batch.ReasonHandler, batch.ReasonGroupStopped}, o.Reason, o.ID)
					}
				}
				for _, off := range rep.Committed {
					if !retried || rep.Failed > 0 {
						assert.LessOrEqual(t, off.Offset, int64(3), "never committed past the failed record")
					}
				}
			}
			require.True(t, retried, "record 3 failed once")
			l.assertOnce(t, recs)
			var b []int64
			for _, off := range l.order[0] {
				if off%2 == 1 {
					b = append(b, off)
				}
			}
			assert.Equal(t, []int64{1, 3, 5, 7, 9}, b, "key b took effect in offset order")
		})
	}
}

// TestStoreDown: while the store is down no handler runs, every record fails with an error
// wrapping idem.ErrStore, and no offset is committed; once it is back the records run, each
// once.
func TestStoreDown(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			k := newCluster(t, 2)
			recs := append(k.produce(0, 5, func(i int) string { return "a" }), k.produce(1, 5, func(i int) string { return "b" })...)
			l := newLedger()
			store := &flaky{Store: st.new(t)}
			store.down.Store(true)
			c := newConsumer(t, k, store, "g", nil, func(_ context.Context, r *kgo.Record) error {
				l.apply(r)
				return nil
			}, nil)

			var seen int
			for seen < 2 {
				rep, err := c.Poll(context.Background())
				require.NoError(t, err)
				for _, o := range rep.Outcomes {
					require.True(t, o.Failed(), o.ID)
					if o.Reason == batch.ReasonStore {
						assert.ErrorIs(t, o.Err, idem.ErrStore)
						assert.ErrorIs(t, o.Err, errDown)
						seen++
					}
				}
				assert.Empty(t, rep.Committed)
			}
			assert.Equal(t, map[int32]int64{0: -1, 1: -1}, k.committed("g"), "nothing committed while the store is down")
			assert.Empty(t, l.effects, "no handler runs while the store is down")

			store.down.Store(false)
			pollUntil(t, c, k.committedAll("g", ends(recs)))
			l.assertOnce(t, recs)
		})
	}
}

// TestRunRetriesUntilTheStoreIsBack: Run keeps polling with back-off while the store is
// down, runs every record once when it is back, and returns nil when its context ends.
func TestRunRetriesUntilTheStoreIsBack(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 2)
	recs := append(k.produce(0, 4, func(int) string { return "a" }), k.produce(1, 4, func(int) string { return "b" })...)
	l := newLedger()
	store := &flaky{Store: memstore.New()}
	store.down.Store(true)
	c := newConsumer(t, k, store, "g", nil, func(_ context.Context, r *kgo.Record) error {
		l.apply(r)
		return nil
	}, nil, kafkaconsumer.WithRetryBackoff(10*time.Millisecond, 50*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	for store.calls.Load() < 10 { // several batches failed on the store
		time.Sleep(10 * time.Millisecond)
	}
	assert.Equal(t, map[int32]int64{0: -1, 1: -1}, k.committed("g"))
	store.down.Store(false)
	committed := k.committedAll("g", ends(recs))
	for !committed() {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	require.NoError(t, <-done)
	l.assertOnce(t, recs)
}

// TestRewindDropsBufferedRecords: after a failure, the partition is polled again from the
// failed record even though the client had fetched the records after it already: the next
// batch starts at the failure, and no commit passes it until it succeeds.
func TestRewindDropsBufferedRecords(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 1)
	recs := k.produce(0, 10, func(int) string { return "a" })
	l := newLedger()
	var failed atomic.Bool
	c := newConsumer(t, k, memstore.New(), "g", nil, func(_ context.Context, r *kgo.Record) error {
		if r.Offset == 1 && !failed.Swap(true) {
			return errors.New("downstream unavailable")
		}
		l.apply(r)
		return nil
	}, nil, kafkaconsumer.WithMaxRecords(2))
	rep, err := c.Poll(context.Background())
	require.NoError(t, err)
	require.Len(t, rep.Outcomes, 2)
	require.True(t, rep.Outcomes[1].Failed())
	assert.Equal(t, []kafkaconsumer.Offset{{Topic: topic, Partition: 0, Offset: 1}}, rep.Committed)

	rep, err = c.Poll(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, rep.Outcomes)
	assert.Equal(t, int64(1), rep.Outcomes[0].Offset, "polled again from the failure, not from the buffer")
	pollUntil(t, c, k.committedAll("g", ends(recs)))
	l.assertOnce(t, recs)
	assert.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, l.order[0])
}
