package kafkaconsumer_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/idemstore"
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
	// A's batch ended after B owned the partition: its commit, with its old membership,
	// must have been refused by the group.
	var refused bool
	for _, err := range errsA {
		refused = refused || errors.Is(err, kafkaconsumer.ErrCommit)
	}
	assert.True(t, refused, "the group refused the kicked owner's commit")
	l.assertOnce(t, recs)
	assert.GreaterOrEqual(t, inProgress.Load(), int64(2), "B met A's records in flight")
	assert.Equal(t, map[int32]int64{0: 6}, k.committed("g"))
}

// recreateTopic deletes k's topic and creates it again with as many partitions: a new log
// under the old name, whose offsets start again at 0.
func (k *cluster) recreateTopic() {
	k.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.c.ListenAddrs()...))
	require.NoError(k.t, err)
	defer cl.Close()
	ctx := context.Background()
	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr(topic)
	del.Topics = []kmsg.DeleteTopicsRequestTopic{dt}
	del.TopicNames = []string{topic}
	dresp, err := del.RequestWith(ctx, cl)
	require.NoError(k.t, err)
	for _, r := range dresp.Topics {
		require.NoError(k.t, kerr.ErrorForCode(r.ErrorCode), "delete topic")
	}
	require.Eventually(k.t, func() bool {
		cr := kmsg.NewPtrCreateTopicsRequest()
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, k.partitions, 1
		cr.Topics = []kmsg.CreateTopicsRequestTopic{ct}
		cresp, err := cr.RequestWith(ctx, cl)
		return err == nil && len(cresp.Topics) == 1 && kerr.ErrorForCode(cresp.Topics[0].ErrorCode) == nil
	}, 10*time.Second, 50*time.Millisecond, "create topic again")
}

// produceValues writes records with the given values to partition p, record key "a".
func (k *cluster) produceValues(p int32, values ...string) []*kgo.Record {
	k.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(k.t, err)
	defer cl.Close()
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte("a"), Value: []byte(v)})
	}
	require.NoError(k.t, cl.ProduceSync(context.Background(), recs...).FirstErr())
	return recs
}

// TestReview16_RecreatedTopicSharesNoKey: a topic is deleted and created again under the
// same name on the same cluster (a reset topic, a blue/green migration, a test
// environment), and the service consumes the new one with the same guard. The new log's
// offsets start again at 0, so the default offset key "<cluster id>/<topic>-<p>@<offset>"
// of each new record is the key of the old record at that offset: a new record with the
// old one's value replays the old outcome and never runs (lost), one with another value
// fails with idem.ErrPayloadMismatch on every poll (the partition is stuck for the
// records' retention). OffsetKey promises the record's place in "the log of its cluster";
// Kafka names a topic's log by its topic id (KIP-516; kgo.FetchTopic.TopicID in the
// fetches a poll returns, on Kafka 3.1+), not by its name.
func TestReview16_RecreatedTopicSharesNoKey(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 1)
	store := memstore.New()
	old := k.produceValues(0, `{"credit":10}`, `{"credit":20}`)
	l := newLedger()
	c := newConsumer(t, k, store, "g", nil, func(_ context.Context, r *kgo.Record) error {
		l.apply(r)
		return nil
	}, nil)
	pollUntil(t, c, k.committedAll("g", ends(old)))
	c.Close()
	l.assertOnce(t, old)

	k.recreateTopic()
	// The new log: the same first value (another credit of 10), then another value.
	recs := k.produceValues(0, `{"credit":10}`, `{"credit":30}`)
	require.Equal(t, []int64{0, 1}, []int64{recs[0].Offset, recs[1].Offset}, "the new log starts at 0")
	// A new group reads the new log from its start, as the old group does in Kafka, which
	// drops a deleted topic's committed offsets.
	l2 := newLedger()
	var outcomes []kafkaconsumer.Outcome
	c2 := newConsumer(t, k, store, "g-new", nil, func(_ context.Context, r *kgo.Record) error {
		l2.apply(r)
		return nil
	}, nil)
	for i := 0; i < 20 && !k.committedAll("g-new", ends(recs))(); i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rep, err := c2.Poll(ctx)
		cancel()
		if rep != nil {
			outcomes = append(outcomes, rep.Outcomes...)
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Logf("poll: %v", err)
		}
	}
	seen := map[string]bool{}
	for _, o := range outcomes {
		line := fmt.Sprintf("%s key %q: %s %s %v", o.ID, o.Key, o.Status, o.Reason, o.Err)
		if !seen[line] {
			seen[line] = true
			t.Log(line)
		}
	}
	l2.assertOnce(t, recs)
}

// TestReview16_RebalanceMidBatchServerSide: TestRebalanceMidBatch with the KIP-848
// consumer group protocol (kgo.ServerSideBalancer), which the client options may choose:
// the broker, not a join round, revokes A's partitions while A's batch runs. The
// revocation must still wait for the batch and its commit, and every record take effect
// once.
func TestReview16_RebalanceMidBatchServerSide(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 4)
	var recs []*kgo.Record
	for p := range int32(4) {
		recs = append(recs, k.produce(p, 10, func(i int) string { return []string{"x", "y", "z"}[i%3] })...)
	}
	store := memstore.New()
	l := newLedger()
	started, pending := make(chan struct{}), make(chan struct{})
	var startOnce, pendOnce sync.Once
	fnA := func(_ context.Context, r *kgo.Record) error {
		startOnce.Do(func() { close(started) })
		select { // A's first batch runs on until the revocation waits for it
		case <-pending:
		case <-time.After(3 * time.Second): // the revocation did not signal it waits: go on
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
	a := newConsumer(t, k, store, "g", []kgo.Opt{blocked, kgo.ServerSideBalancer()}, fnA, nil, kafkaconsumer.WithMaxRecords(8))
	done := k.committedAll("g", ends(recs))
	var wg sync.WaitGroup
	var repsA []*kafkaconsumer.Report
	wg.Add(1)
	go func() {
		defer wg.Done()
		repsA = pollUntil(t, a, done)
	}()
	<-started
	b := newConsumer(t, k, store, "g", []kgo.Opt{kgo.ServerSideBalancer()}, fnB, nil, kafkaconsumer.WithMaxRecords(8))
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
	select {
	case <-pending:
		t.Log("the revocation waited for A's batch")
	default:
		t.Log("no revocation signalled that it waited for A's batch")
	}
	t.Logf("ran by A %d, by B %d", byA, byB)
	assert.Equal(t, len(recs), byA+byB, "every record ran once, in one consumer or the other")
}

// completeFails is a memstore whose completions fail while down: claims succeed, the
// handlers run, but their outcomes cannot be recorded.
type completeFails struct {
	*memstore.Store
	down atomic.Bool
}

func (s *completeFails) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	if s.down.Load() {
		return errDown
	}
	return s.Store.Complete(ctx, rec, attached)
}

func (s *completeFails) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	if s.down.Load() {
		errs := make([]error, len(recs))
		for i := range errs {
			errs[i] = errDown
		}
		return errs
	}
	return s.Store.CompleteMany(ctx, recs)
}

func (s *completeFails) CompleteManyAttached(ctx context.Context, recs []*idemstore.Record, attached [][]any) []error {
	if s.down.Load() {
		errs := make([]error, len(recs))
		for i := range errs {
			errs[i] = errDown
		}
		return errs
	}
	return s.Store.CompleteManyAttached(ctx, recs, attached)
}

// TestReview16_UnrecordedOutcomesAreNotCommitted: with batch claims (the default), the
// batch's handlers run but the store fails to record their outcomes at the end of the
// batch. Nothing of the batch may be committed, though every handler returned nil: the
// partition is consumed again from its first record, and the records are eventually
// recorded and committed (run again once their claims lapse: the documented cost of an
// outcome that could not be recorded).
func TestReview16_UnrecordedOutcomesAreNotCommitted(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 1)
	recs := k.produce(0, 4, func(i int) string { return []string{"a", "b", "c", "d"}[i] })
	store := &completeFails{Store: memstore.New()}
	store.down.Store(true)
	l := newLedger()
	c := newConsumer(t, k, store, "g", nil, func(_ context.Context, r *kgo.Record) error {
		l.apply(r)
		return nil
	}, nil, kafkaconsumer.WithBatchTimeout(2*time.Second))
	var first *kafkaconsumer.Report
	for first == nil || len(first.Outcomes) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rep, err := c.Poll(ctx)
		cancel()
		require.NoError(t, err)
		first = rep
	}
	require.Len(t, first.Outcomes, 4)
	for _, o := range first.Outcomes {
		assert.Equal(t, batch.StatusFailed, o.Status, o.ID)
		assert.Equal(t, batch.ReasonStore, o.Reason, o.ID)
		assert.ErrorIs(t, o.Err, errDown, o.ID)
	}
	assert.Empty(t, first.Committed, "nothing committed past unrecorded outcomes")
	assert.Equal(t, []kafkaconsumer.Offset{{Topic: topic, Partition: 0, Offset: 0}}, first.Retried)
	assert.NotEqual(t, int64(4), k.committed("g")[0])
	store.down.Store(false)
	pollUntil(t, c, k.committedAll("g", ends(recs)))
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		assert.GreaterOrEqual(t, l.effects["0@"+strconv.FormatInt(r.Offset, 10)], 1, "record %d took effect", r.Offset)
	}
}

// failCommitOnce makes the cluster answer the next offset commit with an error for every
// partition.
func (k *cluster) failCommitOnce() {
	k.c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		creq := req.(*kmsg.OffsetCommitRequest)
		resp := creq.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range creq.Topics {
			t := kmsg.NewOffsetCommitResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewOffsetCommitResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, kerr.OffsetMetadataTooLarge.Code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
}

// TestReview16_FailedCommitIsCommittedLater: a batch's commit fails; its offsets are kept,
// committed with the next batch (which holds records of only one of the partitions), and,
// after another failed commit, when Close revokes the partitions. Nothing is committed
// past a record that did not take effect, and nothing is lost.
func TestReview16_FailedCommitIsCommittedLater(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 2)
	recs := append(k.produce(0, 3, func(int) string { return "a" }), k.produce(1, 3, func(int) string { return "b" })...)
	l := newLedger()
	c := newConsumer(t, k, memstore.New(), "g", nil, func(_ context.Context, r *kgo.Record) error {
		l.apply(r)
		return nil
	}, nil)
	k.failCommitOnce()
	polled := 0
	for polled < len(recs) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rep, err := c.Poll(ctx)
		cancel()
		require.NotNil(t, rep, "poll: %v", err)
		require.Zero(t, rep.Failed)
		if polled == 0 {
			require.ErrorIs(t, err, kafkaconsumer.ErrCommit, "the first batch's commit fails")
			assert.Empty(t, rep.Committed)
		}
		polled += len(rep.Outcomes)
	}
	l.assertOnce(t, recs)
	// The next batch holds partition 0's new record only; partition 1's offset rides along.
	more := k.produce(0, 1, func(int) string { return "a" })
	var rep *kafkaconsumer.Report
	for rep == nil || len(rep.Outcomes) == 0 {
		var err error
		rep, err = c.Poll(context.Background())
		require.NoError(t, err)
	}
	assert.Equal(t, map[int32]int64{0: 4, 1: 3}, k.committed("g"))
	l.assertOnce(t, append(recs, more...))

	// Another failed commit, then Close: the revocation commits what the batch acknowledged.
	last := append(k.produce(0, 1, func(int) string { return "a" }), k.produce(1, 1, func(int) string { return "b" })...)
	k.failCommitOnce()
	got := 0
	for got < len(last) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rep, err := c.Poll(ctx)
		cancel()
		require.NotNil(t, rep, "poll: %v", err)
		if got == 0 {
			require.ErrorIs(t, err, kafkaconsumer.ErrCommit)
		}
		got += len(rep.Outcomes)
	}
	c.Close()
	assert.Equal(t, map[int32]int64{0: 5, 1: 4}, k.committed("g"))
	l.assertOnce(t, append(append(recs, more...), last...))
}
