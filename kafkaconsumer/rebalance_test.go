package kafkaconsumer_test

import (
	"context"
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
)

// TestKilledMidBatch: consumer A is cut off from the broker in the middle of a batch, one
// of its handlers still running, and never commits. B takes the partitions over and meets
// A's records in flight: it retries them (in_progress) rather than skip them, until A,
// whose lease its heartbeat keeps, records its outcomes; B then replays what A did and runs
// the rest. Every record takes effect once.
func TestKilledMidBatch(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			k := newCluster(t, 2)
			recs := append(k.produce(0, 8, func(i int) string { return "a" }), k.produce(1, 8, func(i int) string { return "b" })...)
			store := st.new(t)
			l := newLedger()

			blocked, release := make(chan struct{}), make(chan struct{})
			fnA := func(ctx context.Context, r *kgo.Record) error {
				if r.Partition == 0 && r.Offset == 3 {
					close(blocked)
					<-release // the host is gone from the group, the handler runs on
				}
				l.apply(r)
				return nil
			}
			// A's lease is far shorter than its stuck handler: only the heartbeat keeps it.
			dial := &dialer{}
			a := newConsumer(t, k, store, "g", []kgo.Opt{kgo.Dialer(dial.dial)}, fnA,
				[]idem.Option{idem.WithLease(400 * time.Millisecond), idem.WithLeaseMargin(50 * time.Millisecond), idem.WithHeartbeat(100 * time.Millisecond)},
				kafkaconsumer.WithBatchTimeout(0), kafkaconsumer.WithBatchClaims(false))
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					_, err := a.Poll(context.Background())
					if err != nil { // cut off: the commit fails; A is done
						t.Logf("a: %v", err)
						return
					}
				}
			}()
			select {
			case <-blocked:
			case <-time.After(30 * time.Second):
				t.Fatal("A never reached offset 3")
			}
			dial.cutOff()
			// B joins (a client joins its group when made) once A is cut off.
			var inProgress atomic.Int64
			b := newConsumer(t, k, store, "g", nil, func(_ context.Context, r *kgo.Record) error {
				l.apply(r)
				return nil
			}, []idem.Option{idem.WithHooks(idem.Hooks{OnBatch: func(_ context.Context, ev idem.BatchEvent) {
				for _, it := range ev.Items {
					if it.Reason == string(batch.ReasonInProgress) {
						inProgress.Add(1)
					}
				}
			}})})

			var releaseOnce sync.Once
			go func() { // B polls the record A holds until it has seen it in flight a few times
				for inProgress.Load() < 3 {
					select {
					case <-release: // released at the end: B never met it
						return
					case <-time.After(10 * time.Millisecond):
					}
				}
				releaseOnce.Do(func() { close(release) })
			}()
			reps := pollUntil(t, b, k.committedAll("g", ends(recs)))
			releaseOnce.Do(func() { close(release) }) // had B run A's record, A now runs it again
			wg.Wait()

			l.assertOnce(t, recs)
			assert.GreaterOrEqual(t, inProgress.Load(), int64(3), "B met A's record in flight")
			var replayed int
			for _, rep := range reps {
				replayed += rep.Replayed
			}
			assert.Positive(t, replayed, "B replayed what A recorded")
			require.Equal(t, map[int32]int64{0: 8, 1: 8}, k.committed("g"))
		})
	}
}

// TestRebalanceMidBatch: B joins A's group while A is in the middle of a batch. The
// rebalance waits for A's batch to finish and commit; the partitions are then split, and
// each consumer goes on from the committed offsets. Every record takes effect once.
func TestRebalanceMidBatch(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			k := newCluster(t, 4)
			var recs []*kgo.Record
			for p := range int32(4) {
				recs = append(recs, k.produce(p, 10, func(i int) string { return []string{"x", "y", "z"}[i%3] })...)
			}
			store := st.new(t)
			l := newLedger()
			started, pending := make(chan struct{}), make(chan struct{})
			var startOnce, pendOnce sync.Once
			fnA := func(_ context.Context, r *kgo.Record) error {
				startOnce.Do(func() { close(started) })
				select { // A's first batch runs on until B's joining waits for it
				case <-pending:
				case <-time.After(10 * time.Second): // never: B's check below fails
				}
				l.apply(r)
				return nil
			}
			fnB := func(_ context.Context, r *kgo.Record) error {
				l.apply(r)
				return nil
			}
			blocked := kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) {
				pendOnce.Do(func() { close(pending) })
			})
			a := newConsumer(t, k, store, "g", []kgo.Opt{blocked}, fnA, nil, kafkaconsumer.WithMaxRecords(8))
			done := k.committedAll("g", ends(recs))

			var wg sync.WaitGroup
			var repsA []*kafkaconsumer.Report
			wg.Add(1)
			go func() {
				defer wg.Done()
				repsA = pollUntil(t, a, done)
			}()
			<-started
			// B joins (a client joins its group when made) while A's first batch runs.
			b := newConsumer(t, k, store, "g", nil, fnB, nil, kafkaconsumer.WithMaxRecords(8))
			repsB := pollUntil(t, b, done)
			wg.Wait()

			l.assertOnce(t, recs)
			var byA, byB int
			for _, rep := range repsA {
				byA += rep.Ran
			}
			for _, rep := range repsB {
				byB += rep.Ran
			}
			t.Logf("ran by A %d, by B %d", byA, byB)
			assert.Equal(t, len(recs), byA+byB, "every record ran once, in one consumer or the other")
			assert.Positive(t, byB, "B took partitions over")
		})
	}
}
