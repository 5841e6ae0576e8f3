package kafkaconsumer_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/kafkaconsumer"
	"github.com/idemkit/idem/memstore"
)

const topic = "orders"

// cluster is an in-process Kafka cluster (kfake) with one topic, stopped when the test
// ends. Sessions may be short, so a consumer cut off from it leaves its group quickly.
type cluster struct {
	t          *testing.T
	c          *kfake.Cluster
	partitions int32
}

func newCluster(t *testing.T, partitions int32) *cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return &cluster{t: t, c: c, partitions: partitions}
}

// produce writes n records to partition p, keyed by record key keyOf(i), and returns them
// as written (with their offsets).
func (k *cluster) produce(p int32, n int, keyOf func(i int) string) []*kgo.Record {
	k.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(k.t, err)
	defer cl.Close()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{
			Topic: topic, Partition: p, Key: []byte(keyOf(i)),
			Value: []byte(fmt.Sprintf(`{"n":%d}`, i)),
		})
	}
	require.NoError(k.t, cl.ProduceSync(context.Background(), recs...).FirstErr())
	return recs
}

// topicID returns the id of k's topic, as Kafka prints it (URL-safe base64, unpadded).
func (k *cluster) topicID() string {
	k.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.c.ListenAddrs()...))
	require.NoError(k.t, err)
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(k.t, err)
	require.Len(k.t, resp.Topics, 1)
	id := resp.Topics[0].TopicID
	require.NotEqual(k.t, [16]byte{}, id, "kfake gives topics ids")
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// committed returns the group's committed offset per partition (-1: none).
func (k *cluster) committed(group string) map[int32]int64 {
	k.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.c.ListenAddrs()...))
	require.NoError(k.t, err)
	defer cl.Close()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range k.partitions {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = []kmsg.OffsetFetchRequestTopic{rt}
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(k.t, err)
	out := make(map[int32]int64)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.Offset
		}
	}
	for _, g := range resp.Groups {
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out
}

// clientOpts are the options of a consumer of group on k, and extra.
func (k *cluster) clientOpts(group string, extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(k.c.ListenAddrs()...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(50 * time.Millisecond),
		kgo.SessionTimeout(time.Second),
		kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.RebalanceTimeout(2 * time.Second),
		kgo.RetryTimeout(2 * time.Second),
	}
	return append(opts, extra...)
}

// dialer dials the broker until it is cut: then every connection is closed and every new
// dial fails, as for a consumer whose host died or was partitioned away, whose handlers
// may still run.
type dialer struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

var errCut = errors.New("test: network cut")

func (d *dialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		return nil, errCut
	}
	var nd net.Dialer
	conn, err := nd.DialContext(ctx, network, host)
	if err == nil {
		d.conns = append(d.conns, conn)
	}
	return conn, err
}

func (d *dialer) cutOff() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = true
	for _, c := range d.conns {
		_ = c.Close()
	}
}

// ledger counts the business effects per record, as "<partition>@<offset>", and keeps
// the order in which each partition's records took effect.
type ledger struct {
	mu      sync.Mutex
	effects map[string]int
	order   map[int32][]int64
}

func newLedger() *ledger { return &ledger{effects: map[string]int{}, order: map[int32][]int64{}} }

func (l *ledger) apply(r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.effects[strconv.Itoa(int(r.Partition))+"@"+strconv.FormatInt(r.Offset, 10)]++
	l.order[r.Partition] = append(l.order[r.Partition], r.Offset)
}

// assertOnce checks that every record of recs took effect exactly once, and that nothing
// else did.
func (l *ledger) assertOnce(t *testing.T, recs []*kgo.Record) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	want := make(map[string]int, len(recs))
	for _, r := range recs {
		want[strconv.Itoa(int(r.Partition))+"@"+strconv.FormatInt(r.Offset, 10)] = 1
	}
	assert.Equal(t, want, l.effects, "every record takes effect exactly once")
}

// stores are the idempotency stores the broker tests run on: the in-memory store and
// DynamoDB Local (skipped under -short).
var stores = []struct {
	name string
	new  func(t *testing.T) idemstore.Store
}{
	{"memstore", func(*testing.T) idemstore.Store { return memstore.New() }},
	{"dynamo", func(t *testing.T) idemstore.Store {
		client := ddblocal.Client(t)
		store, err := dynamo.New(client, ddblocal.NewTable(t, client))
		require.NoError(t, err)
		return store
	}},
}

// flaky is a store that fails every call while down, as a store that is unreachable does.
type flaky struct {
	idemstore.Store
	down  atomic.Bool
	calls atomic.Int64
}

var errDown = errors.New("test: store unreachable")

func (f *flaky) fail() error {
	f.calls.Add(1)
	if f.down.Load() {
		return errDown
	}
	return nil
}

func (f *flaky) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	if err := f.fail(); err != nil {
		return nil, false, err
	}
	return f.Store.Claim(ctx, rec, now)
}

func (f *flaky) Get(ctx context.Context, key string) (*idemstore.Record, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.Store.Get(ctx, key)
}

func (f *flaky) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Store.Complete(ctx, rec, attached)
}

func (f *flaky) Release(ctx context.Context, key, token string, now time.Time) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Store.Release(ctx, key, token, now)
}

func (f *flaky) Extend(ctx context.Context, key, token string, leaseExpires time.Time) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Store.Extend(ctx, key, token, leaseExpires)
}

func (f *flaky) SetCheckpoint(ctx context.Context, key, token, checkpoint string, seq int64) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Store.SetCheckpoint(ctx, key, token, checkpoint, seq)
}

// newConsumer returns a consumer of group on k, with the extra client options, closed when the test ends.
func newConsumer(t *testing.T, k *cluster, store idemstore.Store, group string, extra []kgo.Opt, fn func(context.Context, *kgo.Record) error, guardOpts []idem.Option, opts ...kafkaconsumer.Option) *kafkaconsumer.Consumer {
	t.Helper()
	guard, err := idem.New(store, "apply-order", guardOpts...)
	require.NoError(t, err)
	c, err := kafkaconsumer.New(guard, fn, k.clientOpts(group, extra...), opts...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// pollUntil polls c until done reports true or 30 seconds pass, and returns the reports.
func pollUntil(t *testing.T, c *kafkaconsumer.Consumer, done func() bool) []*kafkaconsumer.Report {
	t.Helper()
	var reps []*kafkaconsumer.Report
	stop := time.Now().Add(30 * time.Second)
	for !done() {
		require.True(t, time.Now().Before(stop), "not done after 30s")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rep, err := c.Poll(ctx)
		cancel()
		if rep != nil {
			reps = append(reps, rep)
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Logf("poll: %v", err)
		}
		if rep != nil && rep.Failed > 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return reps
}

// committedAll reports whether group committed the end of every partition, ends[p].
func (k *cluster) committedAll(group string, ends map[int32]int64) func() bool {
	return func() bool {
		got := k.committed(group)
		for p, end := range ends {
			if got[p] != end {
				return false
			}
		}
		return true
	}
}

func ends(recs []*kgo.Record) map[int32]int64 {
	out := map[int32]int64{}
	for _, r := range recs {
		out[r.Partition] = max(out[r.Partition], r.Offset+1)
	}
	return out
}
