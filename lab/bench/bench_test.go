package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/memstore"
)

// tiny are sizes that run in well under a second on the in-memory store.
var tiny = Counts{WarmupInvocations: 20, WarmupW3Rounds: 2, WarmupW4Batches: 2, Invocations: 30,
	W3Rounds: 3, W4Batches: 3, W4bBatches: 2}

// TestMemstore runs the harness tiny against the in-memory store, with the SQS workloads:
// every condition holds, the lines come in order with the fields of BENCHMARKS.md, and the
// figures are what the workloads make. It keeps the harness from rotting without a server.
func TestMemstore(t *testing.T) {
	t.Parallel()
	m := &Meter{}
	b, err := New(memstore.New(), m, Config{Store: "memory", Counts: tiny, SQS: true, BatchClaims: true})
	require.NoError(t, err)
	require.NoError(t, b.Warmup())
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, b.Print(&stdout, &stderr, append(b.Workloads(), b.GuardBatchSteps()...)...), "stderr:\n%s", stderr.String())

	order := []string{"W1_new_keys", "W2_replays", "W3_contention", "W4_sqs_batch", "W4b_sqs_batch_3_inprogress",
		"B1_batch_100_new", "B1b_batch_100_redelivered"}
	fields := []string{"name", "store", "n", "unit", "wall_ms", "p50_us", "p99_us", "mean_us", "max_us",
		"ops_per_s", "calls", "calls_per_op", "calls_by_op", "handler_executions", "client_cpu_ms",
		"client_sys_ms", "server_cpu_ms", "server_sys_ms", "other_cpu_ms"}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Len(t, lines, len(order))
	got := map[string]map[string]any{}
	for i, line := range lines {
		var l map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &l), line)
		assert.Equal(t, order[i], l["name"])
		assert.Equal(t, "memory", l["store"])
		for _, f := range fields {
			assert.Contains(t, l, f, "%s lacks %s", order[i], f)
		}
		assert.NotContains(t, l, "http_attempts", "only a DynamoDB client counts attempts")
		got[order[i]] = l
	}
	assert.EqualValues(t, tiny.Invocations, got["W1_new_keys"]["handler_executions"])
	assert.EqualValues(t, 0, got["W2_replays"]["handler_executions"])
	assert.EqualValues(t, tiny.W3Rounds*W3Goroutines, got["W3_contention"]["n"])
	assert.EqualValues(t, 1, got["W3_contention"]["handler_executions_per_key"])
	assert.EqualValues(t, tiny.W4Batches*BatchSize, got["W4_sqs_batch"]["handler_executions"])
	assert.EqualValues(t, tiny.W4bBatches, got["W4b_sqs_batch_3_inprogress"]["batches_reporting_exactly_preclaimed"])
	assert.EqualValues(t, GuardBatchCount(tiny)*GuardBatchSize, got["B1_batch_100_new"]["handler_executions"])
	assert.EqualValues(t, GuardBatchCount(tiny), got["B1b_batch_100_redelivered"]["n"])
	assert.EqualValues(t, 0, got["B1b_batch_100_redelivered"]["handler_executions"])
}

// TestMeterCalls checks that the meter counts only inside a measured region, and that a
// Wire meter adds the DynamoDB counts to the result.
func TestMeterCalls(t *testing.T) {
	t.Parallel()
	m := &Meter{Wire: true}
	m.reset()
	m.Call("PutItem", 100) // before the region: not counted
	m.begin()
	m.Call("PutItem", 300)
	m.Call("UpdateItem", 100)
	m.Attempt()
	m.ConditionFailed(1)
	m.end()
	m.Call("GetItem", 100) // after it: not counted
	r := m.result("x", "invocation", make([]time.Duration, 2), 0)
	assert.Equal(t, int64(2), r.Calls)
	assert.Equal(t, map[string]int64{"PutItem": 1, "UpdateItem": 1}, r.CallsByOp)
	assert.InDelta(t, 1.0, r.CallsPerOp, 0)
	require.NotNil(t, r.HTTPAttempts)
	assert.Equal(t, int64(1), *r.HTTPAttempts)
	assert.Equal(t, int64(1), *r.ConditionalCheckFailed)
	assert.InDelta(t, 200.0, *r.ReqBytesPerOp, 0)
}

// TestPercentile checks the nearest-rank percentile and its edges.
func TestPercentile(t *testing.T) {
	t.Parallel()
	sorted := make([]time.Duration, 2000)
	for i := range sorted {
		sorted[i] = time.Duration(i + 1)
	}
	for _, tc := range []struct {
		name string
		p    float64
		want time.Duration
	}{
		{"p50", 50, 1000}, {"p99", 99, 1980}, {"p100", 100, 2000}, {"p0", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, percentile(sorted, tc.p))
		})
	}
	assert.Equal(t, time.Duration(0), percentile(nil, 50))
}

// TestMemstoreStreams runs the stream workloads tiny against the in-memory store: every
// condition holds (W5c's included: the failure alone reported, nothing after it run before
// it succeeded, every record once after the retry), in the order of BENCHMARKS.md.
func TestMemstoreStreams(t *testing.T) {
	t.Parallel()
	c := Counts{WarmupW5Batches: 1, W5Batches: 2, W5cBatches: 2}
	b, err := New(memstore.New(), &Meter{}, Config{Store: "memory", Counts: c, Streams: true})
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, b.Print(&stdout, &stderr, b.streamSteps()...), "stderr:\n%s", stderr.String())
	order := []string{"W5_kinesis_batch", "W5b_kinesis_redelivered", "W5c_kinesis_fail_40", "W5c_retry",
		"W6_ddbstreams_batch", "W6b_ddbstreams_redelivered", "W5_kinesis_batch_concurrent",
		"W5b_kinesis_redelivered_concurrent", "W6_ddbstreams_batch_concurrent", "W6b_ddbstreams_redelivered_concurrent"}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Len(t, lines, len(order))
	for i, line := range lines {
		var l map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &l), line)
		assert.Equal(t, order[i], l["name"])
		assert.Contains(t, l, "records_per_s")
	}
}
