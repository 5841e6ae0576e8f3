package kafkaconsumer_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/idemkit/idem/kafkaconsumer"
	"github.com/idemkit/idem/memstore"
)

// recreate deletes k's topic and creates it again with k's partitions: a new topic id,
// offsets from 0.
func (k *cluster) recreate() {
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
	for _, t := range dresp.Topics {
		require.NoError(k.t, kerr.ErrorForCode(t.ErrorCode))
	}
	cr := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, k.partitions, 1
	cr.Topics = []kmsg.CreateTopicsRequestTopic{ct}
	cresp, err := cr.RequestWith(ctx, cl)
	require.NoError(k.t, err)
	for _, t := range cresp.Topics {
		require.NoError(k.t, kerr.ErrorForCode(t.ErrorCode))
	}
}

// TestRecreatedTopicCommitLandsOnTheNewTopic: what the package doc says of a topic
// deleted and created again under the same name while its group consumes it. Offset
// commits go by topic name up to Kafka 4.1 (OffsetCommit v9; the client here is capped at
// Kafka 3.7's protocol): the offset of a batch of the old topic, committed after the
// deletion, lands on the new topic. A consumer of the group that starts afterwards
// consumes the new topic from there: the new topic's records below that offset never
// run in this group.
func TestRecreatedTopicCommitLandsOnTheNewTopic(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 1)
	k.produce(0, 3, func(int) string { return "a" })
	caps := []kgo.Opt{kgo.MaxVersions(kversion.V3_7_0())}
	var mu sync.Mutex
	var ran []string
	run := func(_ context.Context, r *kgo.Record) error {
		mu.Lock()
		ran = append(ran, string(r.Key)+"@"+strconv.FormatInt(r.Offset, 10))
		mu.Unlock()
		return nil
	}
	var once sync.Once
	c := newConsumer(t, k, memstore.New(), "g", caps, func(ctx context.Context, r *kgo.Record) error {
		if r.Offset == 2 {
			once.Do(func() {
				// The batch is in flight: the topic is deleted and created again, and the
				// producers write five records to the new one (offsets 0 to 4).
				k.recreate()
				k.produce(0, 5, func(int) string { return "b" })
			})
		}
		return run(ctx, r)
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := c.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Outcomes, 3)
	assert.Equal(t, []kafkaconsumer.Offset{{Topic: topic, Partition: 0, Offset: 3}}, rep.Committed)
	assert.Equal(t, int64(3), k.committed("g")[0], "the old topic's offset, on the new topic")
	c.Close()

	// The group's next consumer starts the new topic at 3.
	c2 := newConsumer(t, k, memstore.New(), "g", caps, run, nil)
	pollUntil(t, c2, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ran) >= 5
	})
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"a@0", "a@1", "a@2", "b@3", "b@4"}, ran, "the new topic's records 0 to 2 never run")
}
