package kinesis_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/kinesis"
	"github.com/idemkit/idem/memstore"
)

// loadEvent reads testdata/name.json.
func loadEvent(t testing.TB, name string) events.KinesisEvent {
	t.Helper()
	return adaptertest.Load[events.KinesisEvent](t, name)
}

// invoke sends ev through the Lambda runtime's JSON handler, as Lambda would, and
// returns the raw response.
func invoke(t testing.TB, h *kinesis.Handler, ev events.KinesisEvent) []byte {
	t.Helper()
	out, err := adaptertest.Invoke(t, context.Background(), h.Handle, ev)
	require.NoError(t, err)
	return out
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

type credit struct {
	EventID   string `json:"event_id"`
	AccountID string `json:"account_id"`
	Amount    int    `json:"amount_cents"`
}

// ledger applies each record's event (see adaptertest.Ledger).
type ledger struct{ *adaptertest.Ledger }

func newLedger(fail ...string) *ledger { return &ledger{adaptertest.NewLedger(fail...)} }

func (l *ledger) apply(_ context.Context, r events.KinesisEventRecord) error {
	return l.Apply(r.Kinesis.Data)
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
			l := newLedger("e3")
			h, err := kinesis.New(g, l.apply, kinesis.WithConcurrency(concurrency))
			require.NoError(t, err)
			ev := loadEvent(t, "kinesis-three-partition-keys")

			out := invoke(t, h, ev)
			adaptertest.Golden(t, "kinesis-three-partition-keys-third-fails", out)
			reported := adaptertest.Failures(t, out)
			assert.Equal(t, []string{ev.Records[2].Kinesis.SequenceNumber}, reported)
			assert.Zero(t, l.Applied["e4"], "acct-1's record after the failure is not started")

			l.Heal()
			retry := retryFrom(ev, reported)
			require.Len(t, retry.Records, 4)
			out = invoke(t, h, retry)
			assert.Empty(t, adaptertest.Failures(t, out))
			for _, id := range []string{"e1", "e2", "e3", "e4", "e5", "e6"} {
				assert.Equal(t, 1, l.Applied[id], "event %s applied once", id)
			}
			pos := map[string]int{}
			for i, id := range l.Order {
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
	assert.Empty(t, adaptertest.Failures(t, invoke(t, h, ev)))
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
			l := newLedger()
			h, err := kinesis.New(g, l.apply, tc.opts...)
			require.NoError(t, err)
			assert.Empty(t, adaptertest.Failures(t, invoke(t, h, ev)))
			assert.Equal(t, tc.applied, l.Applied["e1"])
			// The retried record alone, in a later batch.
			assert.Empty(t, adaptertest.Failures(t, invoke(t, h, events.KinesisEvent{Records: []events.KinesisEventRecord{again}})))
			assert.Equal(t, tc.applied, l.Applied["e1"])
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
	adaptertest.OptionErrors(t, kinesis.New, func(context.Context, events.KinesisEventRecord) error { return nil }, map[string]kinesis.Option{
		"WithConcurrency":    kinesis.WithConcurrency(0),
		"WithKey":            kinesis.WithKey(nil),
		"WithFingerprint":    kinesis.WithFingerprint(nil),
		"WithDeadlineMargin": kinesis.WithDeadlineMargin(-time.Second),
		"WithKeyJMESPath":    kinesis.WithKeyJMESPath("["),
	})
}

// TestOrderingKeyShard: with one ordering key for every record, the shard is one group: no
// record after a failure runs, whatever its partition key, and the failure alone is
// reported.
func TestOrderingKeyShard(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "ledger")
	require.NoError(t, err)
	l := newLedger("e3")
	shard := func(events.KinesisEventRecord) string { return "shard" }
	h, err := kinesis.New(g, l.apply, kinesis.WithOrderingKey(shard))
	require.NoError(t, err)
	ev := loadEvent(t, "kinesis-three-partition-keys")
	out := invoke(t, h, ev)
	assert.Equal(t, []string{ev.Records[2].Kinesis.SequenceNumber}, adaptertest.Failures(t, out))
	assert.Equal(t, []string{"e1", "e2"}, l.Order, "nothing after the failure ran")
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
		rep, err := h.Process(adaptertest.Context(t), events.KinesisEvent{Records: []events.KinesisEventRecord{r}})
		require.NoError(t, err)
		assert.Equal(t, kinesis.StatusRan, rep.Outcomes[0].Status, shard)
	}
	assert.Equal(t, 2, runs)
}
