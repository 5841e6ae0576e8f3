package kafkaconsumer_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/kafkaconsumer"
	"github.com/idemkit/idem/memstore"
)

// TestTwoClustersShareNoKey: one guard consumes a topic of the same name on two clusters.
// The records at the same offsets in both are two records, not one: the default offset key
// names the cluster (its Kafka cluster id) and the topic's id, so the second is not
// replayed unprocessed.
func TestTwoClustersShareNoKey(t *testing.T) {
	t.Parallel()
	guard, err := idem.New(memstore.New(), "apply-order")
	require.NoError(t, err)
	l := newLedger()
	var keys, want []string
	for _, id := range []string{"cluster-east", "cluster-west"} {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic), kfake.ClusterID(id),
			kfake.GroupMinSessionTimeout(100*time.Millisecond))
		require.NoError(t, err)
		t.Cleanup(c.Close)
		k := &cluster{t: t, c: c, partitions: 1}
		tid := k.topicID()
		want = append(want, id+"/"+tid+":orders-0@0", id+"/"+tid+":orders-0@1")
		k.produce(0, 2, func(int) string { return "a" })
		cons, err := kafkaconsumer.New(guard, func(_ context.Context, r *kgo.Record) error {
			l.apply(r)
			return nil
		}, k.clientOpts("g"))
		require.NoError(t, err)
		t.Cleanup(cons.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rep, err := cons.Poll(ctx)
		cancel()
		require.NoError(t, err)
		for _, o := range rep.Outcomes {
			assert.Equal(t, batch.StatusRan, o.Status, o.ID)
			keys = append(keys, o.Key)
		}
	}
	assert.Equal(t, want, keys)
	assert.Equal(t, map[string]int{"0@0": 2, "0@1": 2}, l.effects, "each cluster's records ran")
}

// TestOffsetKeyWithoutTopicID: a broker whose fetches carry no topic id (before Kafka 3.1;
// here a client held to Kafka 3.0's request versions) gives the offset key without one,
// "<cluster id>/<topic>-<partition>@<offset>", as before topic ids.
func TestOffsetKeyWithoutTopicID(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 1)
	k.produce(0, 2, func(int) string { return "a" })
	c := newConsumer(t, k, memstore.New(), "g", []kgo.Opt{kgo.MaxVersions(kversion.V3_0_0())},
		func(context.Context, *kgo.Record) error { return nil }, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := c.Poll(ctx)
	require.NoError(t, err)
	var keys []string
	for _, o := range rep.Outcomes {
		assert.Equal(t, batch.StatusRan, o.Status, o.ID)
		keys = append(keys, o.Key)
	}
	assert.Equal(t, []string{"kfake/orders-0@0", "kfake/orders-0@1"}, keys)
}
