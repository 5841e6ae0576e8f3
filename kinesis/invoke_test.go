package kinesis_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/kinesis"
	"github.com/idemkit/idem/memstore"
)

var update = flag.Bool("update", false, "rewrite the expected responses in testdata/*.golden.json")

// loadEvent reads testdata/name.json.
func loadEvent(t testing.TB, name string) events.KinesisEvent {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	require.NoError(t, err)
	var ev events.KinesisEvent
	require.NoError(t, json.Unmarshal(raw, &ev))
	require.NotEmpty(t, ev.Records)
	return ev
}

// invoke sends ev through the Lambda runtime's JSON handler, as Lambda would, with the
// deadline of an invocation that has just begun, and returns the raw response.
func invoke(t testing.TB, h *kinesis.Handler, ev events.KinesisEvent) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	payload, err := json.Marshal(ev)
	require.NoError(t, err)
	out, err := lambda.NewHandler(h.Handle).Invoke(ctx, payload)
	require.NoError(t, err)
	return out
}

// checkGolden compares a response with testdata/name.golden.json, or rewrites the file
// under -update.
func checkGolden(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		var v any
		require.NoError(t, json.Unmarshal(got, &v))
		pretty, err := json.MarshalIndent(v, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, append(pretty, '\n'), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create it")
	assert.JSONEq(t, string(want), string(got))
}

// failures decodes a response into its reported sequence numbers.
func failures(t testing.TB, raw []byte) []string {
	t.Helper()
	var resp events.KinesisEventResponse
	require.NoError(t, json.Unmarshal(raw, &resp))
	seqs := []string{}
	for _, f := range resp.BatchItemFailures {
		seqs = append(seqs, f.ItemIdentifier)
	}
	return seqs
}

// retryFrom returns what Lambda delivers after a partial response: the shard's records
// from the lowest reported sequence number on (the event's order is the shard's).
func retryFrom(ev events.KinesisEvent, reported []string) events.KinesisEvent {
	if len(reported) == 0 {
		return events.KinesisEvent{}
	}
	low := reported[0]
	for _, s := range reported {
		if len(s) < len(low) || (len(s) == len(low) && s < low) {
			low = s
		}
	}
	for i, r := range ev.Records {
		if r.Kinesis.SequenceNumber == low {
			return events.KinesisEvent{Records: ev.Records[i:]}
		}
	}
	return events.KinesisEvent{}
}

// ledger applies each record's event once per run, and fails the events named in fail.
type ledger struct {
	mu      sync.Mutex
	applied map[string]int // event_id → times applied
	order   []string       // event_ids in the order applied
	fail    map[string]bool
}

type credit struct {
	EventID   string `json:"event_id"`
	AccountID string `json:"account_id"`
	Amount    int    `json:"amount_cents"`
}

func (l *ledger) apply(_ context.Context, r events.KinesisEventRecord) error {
	var c credit
	if err := json.Unmarshal(r.Kinesis.Data, &c); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail[c.EventID] {
		return errors.New("ledger unavailable")
	}
	if l.applied == nil {
		l.applied = map[string]int{}
	}
	l.applied[c.EventID]++
	l.order = append(l.order, c.EventID)
	return nil
}

// TestFixtureFirstFailurePerPartitionKey drives the fixture through the Lambda runtime:
// the third record (acct-1's second) fails, so acct-1's later record is not started and
// only the failed record's sequence number is reported; Lambda then delivers the shard
// again from it, and every event is applied exactly once in the end, each partition key's
// in order.
func TestFixtureFirstFailurePerPartitionKey(t *testing.T) {
	t.Parallel()
	for _, concurrency := range []int{1, 4} {
		t.Run(map[int]string{1: "sequential", 4: "concurrent"}[concurrency], func(t *testing.T) {
			t.Parallel()
			g, err := idem.New(memstore.New(), "ledger")
			require.NoError(t, err)
			l := &ledger{fail: map[string]bool{"e3": true}}
			h, err := kinesis.New(g, l.apply, kinesis.WithConcurrency(concurrency))
			require.NoError(t, err)
			ev := loadEvent(t, "kinesis-three-partition-keys")

			out := invoke(t, h, ev)
			checkGolden(t, "kinesis-three-partition-keys-third-fails", out)
			reported := failures(t, out)
			assert.Equal(t, []string{ev.Records[2].Kinesis.SequenceNumber}, reported)
			assert.Zero(t, l.applied["e4"], "acct-1's record after the failure is not started")

			l.fail = nil
			retry := retryFrom(ev, reported)
			require.Len(t, retry.Records, 4)
			out = invoke(t, h, retry)
			assert.Empty(t, failures(t, out))
			for _, id := range []string{"e1", "e2", "e3", "e4", "e5", "e6"} {
				assert.Equal(t, 1, l.applied[id], "event %s applied once", id)
			}
			pos := map[string]int{}
			for i, id := range l.order {
				pos[id] = i
			}
			assert.Less(t, pos["e1"], pos["e3"])
			assert.Less(t, pos["e3"], pos["e4"])
			assert.Less(t, pos["e2"], pos["e5"])
		})
	}
}

// TestFixtureAWSLambdaGo: aws-lambda-go's own Kinesis test event (two records of one
// partition key) runs each record once, and its redelivery replays both.
func TestFixtureAWSLambdaGo(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "hello")
	require.NoError(t, err)
	var ran []string
	h, err := kinesis.New(g, func(_ context.Context, r events.KinesisEventRecord) error {
		ran = append(ran, string(r.Kinesis.Data))
		return nil
	}, kinesis.WithConcurrency(1))
	require.NoError(t, err)
	ev := loadEvent(t, "kinesis-aws-lambda-go")
	assert.Empty(t, failures(t, invoke(t, h, ev)))
	rep, err := h.Process(context.Background(), ev)
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Replayed)
	assert.Equal(t, []string{"Hello World", "Hello World"}, ran, "two records, two sequence numbers: two runs")
}

// TestProducerRetryNeedsKeyFromData: a producer that retried a PutRecord wrote one event
// twice under two sequence numbers. Keyed by sequence number (the default), both run;
// keyed by the event ID in the data, the second is a duplicate within the batch, and a
// replay when it arrives in a later batch.
func TestProducerRetryNeedsKeyFromData(t *testing.T) {
	t.Parallel()
	ev := loadEvent(t, "kinesis-three-partition-keys")
	again := ev.Records[0]
	again.Kinesis.SequenceNumber = "49590305843567998888888888888888888888888888888888000099"
	again.EventID = "shardId-000000000003:" + again.Kinesis.SequenceNumber
	ev.Records = append(ev.Records, again)
	for _, tc := range []struct {
		name    string
		opts    []kinesis.Option
		applied int
	}{
		{name: "sequence number", applied: 2},
		{name: "event id from the data", opts: []kinesis.Option{kinesis.WithKeyJMESPath("event_id")}, applied: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := idem.New(memstore.New(), "ledger")
			require.NoError(t, err)
			l := &ledger{}
			h, err := kinesis.New(g, l.apply, tc.opts...)
			require.NoError(t, err)
			assert.Empty(t, failures(t, invoke(t, h, ev)))
			assert.Equal(t, tc.applied, l.applied["e1"])
			// The retried record alone, in a later batch.
			assert.Empty(t, failures(t, invoke(t, h, events.KinesisEvent{Records: []events.KinesisEventRecord{again}})))
			assert.Equal(t, tc.applied, l.applied["e1"])
		})
	}
}

// TestKeyJMESPathErrors: data that is not JSON, or an expression selecting nothing, fails
// its record with a key error and stops its partition key; a bad expression fails New.
func TestKeyJMESPathErrors(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "keys")
	require.NoError(t, err)
	_, err = kinesis.New(g, func(context.Context, events.KinesisEventRecord) error { return nil }, kinesis.WithKeyJMESPath("event_id["))
	require.ErrorIs(t, err, idem.ErrInvalidOption)

	h, err := kinesis.New(g, func(context.Context, events.KinesisEventRecord) error { return nil }, kinesis.WithKeyJMESPath("event_id"))
	require.NoError(t, err)
	ev := loadEvent(t, "kinesis-aws-lambda-go") // "Hello World" is no JSON
	rep, err := h.Process(context.Background(), ev)
	require.NoError(t, err)
	assert.Equal(t, kinesis.Reason("key"), rep.Outcomes[0].Reason)
	assert.Equal(t, kinesis.ReasonGroupStopped, rep.Outcomes[1].Reason)
	assert.NotContains(t, rep.Outcomes[0].Err.Error(), "Hello")
	assert.Len(t, rep.Response().BatchItemFailures, 1)
}

// TestInvalidEvent: a record without a sequence number cannot be reported, so the whole
// batch fails and Lambda retries it.
func TestInvalidEvent(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "invalid")
	require.NoError(t, err)
	h, err := kinesis.New(g, func(context.Context, events.KinesisEventRecord) error { return nil })
	require.NoError(t, err)
	ev := loadEvent(t, "kinesis-aws-lambda-go")
	ev.Records[1].Kinesis.SequenceNumber = ""
	_, err = h.Handle(context.Background(), ev)
	require.ErrorIs(t, err, kinesis.ErrInvalidEvent)
}

// TestOptions: invalid settings fail New with an error naming the option.
func TestOptions(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "options")
	require.NoError(t, err)
	fn := func(context.Context, events.KinesisEventRecord) error { return nil }
	for _, tc := range []struct {
		name string
		opt  kinesis.Option
	}{
		{"WithConcurrency", kinesis.WithConcurrency(0)},
		{"WithKey", kinesis.WithKey(nil)},
		{"WithFingerprint", kinesis.WithFingerprint(nil)},
		{"WithDeadlineMargin", kinesis.WithDeadlineMargin(-time.Second)},
		{"WithKeyJMESPath", kinesis.WithKeyJMESPath("[")},
	} {
		_, err := kinesis.New(g, fn, tc.opt)
		require.ErrorIs(t, err, idem.ErrInvalidOption, tc.name)
		assert.Contains(t, err.Error(), tc.name)
	}
	_, err = kinesis.New(nil, fn)
	require.ErrorIs(t, err, idem.ErrInvalidOption)
	_, err = kinesis.New(g, nil)
	require.ErrorIs(t, err, idem.ErrInvalidOption)
}

// lambdaContext returns a context with the deadline of an invocation that has just begun:
// without a deadline, outcomes are recorded one by one (see idem.Batch).
func lambdaContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestOrderingKeyShard: with one ordering key for every record, the shard is one group: no
// record after a failure runs, whatever its partition key, and the failure alone is
// reported.
func TestOrderingKeyShard(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "ledger")
	require.NoError(t, err)
	l := &ledger{fail: map[string]bool{"e3": true}}
	shard := func(events.KinesisEventRecord) string { return "shard" }
	h, err := kinesis.New(g, l.apply, kinesis.WithOrderingKey(shard))
	require.NoError(t, err)
	ev := loadEvent(t, "kinesis-three-partition-keys")
	out := invoke(t, h, ev)
	assert.Equal(t, []string{ev.Records[2].Kinesis.SequenceNumber}, failures(t, out))
	assert.Equal(t, []string{"e1", "e2"}, l.order, "nothing after the failure ran")
	_, err = kinesis.New(g, l.apply, kinesis.WithOrderingKey(nil))
	require.ErrorIs(t, err, idem.ErrInvalidOption)
}

// TestDefaultKeyKeepsShardsApart: a sequence number is unique only within its shard (the
// Kinesis API reference), so two shards' records with one sequence number and the same
// data are two records, and both run.
func TestDefaultKeyKeepsShardsApart(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "shards")
	require.NoError(t, err)
	runs := 0
	h, err := kinesis.New(g, func(context.Context, events.KinesisEventRecord) error { runs++; return nil })
	require.NoError(t, err)
	for _, shard := range []string{"shardId-000000000000", "shardId-000000000001"} {
		r := record("4959", "pk", `{"n":1}`)
		r.EventID = shard + ":4959"
		rep, err := h.Process(lambdaContext(t), events.KinesisEvent{Records: []events.KinesisEventRecord{r}})
		require.NoError(t, err)
		assert.Equal(t, kinesis.StatusRan, rep.Outcomes[0].Status, shard)
	}
	assert.Equal(t, 2, runs)
}
