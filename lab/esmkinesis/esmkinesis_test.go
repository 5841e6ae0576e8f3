package esmkinesis_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/esm"
	"github.com/idemkit/idem/lab/esmkinesis"
	"github.com/idemkit/idem/lab/kinesalite"
)

func TestMain(m *testing.M) { os.Exit(kinesalite.Main(m)) }

// hashKeys target each shard of a two-shard stream: its hash key range starts there.
var hashKeys = []string{"0", "170141183460469231731687303715884105728"}

// newStream creates a stream of the given shards on kinesalite, deleted when t ends.
func newStream(t *testing.T, client *kinesis.Client, shards int) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("esm-%s-%d", strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-"), time.Now().UnixNano())
	_, err := client.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(int32(shards))})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := client.DeleteStream(context.Background(), &kinesis.DeleteStreamInput{StreamName: aws.String(name)})
		assert.NoError(t, err)
	})
	w := kinesis.NewStreamExistsWaiter(client, func(o *kinesis.StreamExistsWaiterOptions) { o.MinDelay = 10 * time.Millisecond })
	require.NoError(t, w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(name)}, 10*time.Second))
	return name
}

// put writes n records of partition key pk to shard (an index of hashKeys); the data is
// "<pk>/<i>".
func put(t *testing.T, client *kinesis.Client, stream string, shard int, pk string, n int) {
	t.Helper()
	for i := range n {
		_, err := client.PutRecord(context.Background(), &kinesis.PutRecordInput{
			StreamName:      aws.String(stream),
			PartitionKey:    aws.String(pk),
			ExplicitHashKey: aws.String(hashKeys[shard]),
			Data:            []byte(fmt.Sprintf("%s/%d", pk, i)),
		})
		require.NoError(t, err)
	}
}

// keyShape returns the keys of a JSON object, and of the object under "kinesis".
func keyShape(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m))
	var keys []string
	for k, v := range m {
		keys = append(keys, k)
		if k == "kinesis" {
			for _, sub := range keyShape(t, v) {
				keys = append(keys, "kinesis."+sub)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

func drainCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// effects counts what a plain handler (no idempotency) did per record's data.
type effects struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *effects) apply(data string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[string]int{}
	}
	e.n[data]++
}

func (e *effects) snapshot() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int{}
	for k, v := range e.n {
		out[k] = v
	}
	return out
}

// TestKinesisEventAsLambdaSendsIt: the event read from kinesalite has the shape of
// Lambda's (testdata/kinesis-record.json, after AWS's documented example) and decodes
// into events.KinesisEvent with the data that was put.
func TestKinesisEventAsLambdaSendsIt(t *testing.T) {
	t.Parallel()
	client := kinesalite.Client(t)
	ctx := drainCtx(t)
	name := newStream(t, client, 1)
	put(t, client, name, 0, "order-1", 2)
	src, err := esmkinesis.Open(ctx, client, name)
	require.NoError(t, err)

	var payloads []json.RawMessage
	handler := func(_ context.Context, payload json.RawMessage) error {
		payloads = append(payloads, payload)
		return nil
	}
	p, err := esm.New(src, handler)
	require.NoError(t, err)
	r, err := p.Drain(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Check())
	require.Len(t, payloads, 1)

	var raw struct{ Records []json.RawMessage }
	require.NoError(t, json.Unmarshal(payloads[0], &raw))
	fixture, err := os.ReadFile("testdata/kinesis-record.json")
	require.NoError(t, err)
	var want struct{ Records []json.RawMessage }
	require.NoError(t, json.Unmarshal(fixture, &want))
	require.Len(t, raw.Records, 2)
	assert.Equal(t, keyShape(t, want.Records[0]), keyShape(t, raw.Records[0]))

	var ev events.KinesisEvent
	require.NoError(t, json.Unmarshal(payloads[0], &ev))
	for i, rec := range ev.Records {
		seq := r.Invocations[0].Records[i]
		assert.Equal(t, fmt.Sprintf("order-1/%d", i), string(rec.Kinesis.Data))
		assert.Equal(t, "order-1", rec.Kinesis.PartitionKey)
		assert.Equal(t, seq, rec.Kinesis.SequenceNumber)
		assert.Equal(t, "1.0", rec.Kinesis.KinesisSchemaVersion)
		assert.False(t, rec.Kinesis.ApproximateArrivalTimestamp.IsZero())
		assert.Equal(t, r.Invocations[0].Shard+":"+seq, rec.EventID)
		assert.Equal(t, "aws:kinesis", rec.EventSource)
		assert.Equal(t, "aws:kinesis:record", rec.EventName)
		assert.Equal(t, "1.0", rec.EventVersion)
		assert.Equal(t, src.ARN(), rec.EventSourceArn)
		assert.Equal(t, "us-east-1", rec.AwsRegion)
	}
}

// TestKinesisFailOncePerShard: two shards drained in parallel; in each, the handler fails
// its third record once and reports it, and the shard is delivered again from there
// while the other goes on. Every record's effect happens once, each shard in order.
func TestKinesisFailOncePerShard(t *testing.T) {
	t.Parallel()
	client := kinesalite.Client(t)
	ctx := drainCtx(t)
	name := newStream(t, client, 2)
	put(t, client, name, 0, "a", 6)
	put(t, client, name, 1, "b", 6)
	src, err := esmkinesis.Open(ctx, client, name)
	require.NoError(t, err)

	var eff effects
	var mu sync.Mutex
	failed := map[string]bool{}
	handler := func(_ context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
		var resp events.KinesisEventResponse
		for _, rec := range ev.Records {
			data := string(rec.Kinesis.Data)
			mu.Lock()
			fail := strings.HasSuffix(data, "/2") && !failed[data]
			failed[data] = failed[data] || fail
			mu.Unlock()
			if fail {
				resp.BatchItemFailures = []events.KinesisBatchItemFailure{{ItemIdentifier: rec.Kinesis.SequenceNumber}}
				return resp, nil
			}
			eff.apply(data)
		}
		return resp, nil
	}
	p, err := esm.New(src, handler, esm.WithReportBatchItemFailures(), esm.WithBatchSize(4))
	require.NoError(t, err)
	r, err := p.Drain(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Check())
	require.Len(t, r.Checkpoints, 2)

	byShard := map[string][]esm.Invocation{}
	for _, inv := range r.Invocations {
		byShard[inv.Shard] = append(byShard[inv.Shard], inv)
	}
	for shard, invs := range byShard {
		// [0 1 2 3] fails at 2; [2 3 4 5] succeeds.
		require.Len(t, invs, 2, shard)
		assert.Equal(t, esm.PartialFailure, invs[0].Outcome, shard)
		assert.Equal(t, 2, invs[0].Done, shard)
		assert.Equal(t, invs[0].Records[2:], invs[1].Records[:2], shard)
		assert.Len(t, invs[1].Records, 4, shard)
		assert.Equal(t, invs[1].Records[3], r.Checkpoints[shard], shard)
	}
	want := map[string]int{}
	for _, pk := range []string{"a", "b"} {
		for i := range 6 {
			want[fmt.Sprintf("%s/%d", pk, i)] = 1
		}
	}
	assert.Equal(t, want, eff.snapshot())
}

// TestKinesisBisectThenDestination: on Kinesis as on DynamoDB Streams, a poisoned record
// is bisected down to itself and discarded once its retries run out.
func TestKinesisBisectThenDestination(t *testing.T) {
	t.Parallel()
	client := kinesalite.Client(t)
	ctx := drainCtx(t)
	name := newStream(t, client, 1)
	put(t, client, name, 0, "k", 4)
	src, err := esmkinesis.Open(ctx, client, name)
	require.NoError(t, err)
	handler := func(_ context.Context, ev events.KinesisEvent) error {
		for _, rec := range ev.Records {
			if string(rec.Kinesis.Data) == "k/1" {
				return errors.New("poisoned")
			}
		}
		return nil
	}
	p, err := esm.New(src, handler, esm.WithBisectBatchOnFunctionError(), esm.WithMaximumRetryAttempts(0))
	require.NoError(t, err)
	r, err := p.Drain(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Check())
	var sizes []int
	for _, inv := range r.Invocations {
		sizes = append(sizes, len(inv.Records))
	}
	// [0 1 2 3] → [0 1] → [0] ok, [1] fails and is discarded → [2 3] ok.
	assert.Equal(t, []int{4, 2, 1, 1, 2}, sizes)
	require.Len(t, r.Discarded, 1)
	assert.Equal(t, []string{r.Invocations[0].Records[1]}, r.Discarded[0].Records)
	assert.Equal(t, r.Invocations[0].Records[3], r.Checkpoints[r.Discarded[0].Shard])
}

// TestKinesisShardsOwnTheHashKeys guards the hash keys above: they start the shards' ranges.
func TestKinesisShardsOwnTheHashKeys(t *testing.T) {
	t.Parallel()
	client := kinesalite.Client(t)
	name := newStream(t, client, 2)
	out, err := client.ListShards(context.Background(), &kinesis.ListShardsInput{StreamName: aws.String(name)})
	require.NoError(t, err)
	require.Len(t, out.Shards, 2)
	var starts []string
	for _, sh := range out.Shards {
		starts = append(starts, aws.ToString(sh.HashKeyRange.StartingHashKey))
	}
	assert.Equal(t, hashKeys, starts)
}
