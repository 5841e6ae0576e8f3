package kafka_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/kafka"
	"github.com/idemkit/idem/memstore"
)

// loadEvent reads testdata/name.json.
func loadEvent(t testing.TB, name string) events.KafkaEvent {
	t.Helper()
	return adaptertest.Load[events.KafkaEvent](t, name)
}

// invoke sends ev through the Lambda runtime's JSON handler, as Lambda would, and returns
// the raw response and error.
func invoke(t testing.TB, h *kafka.Handler, ev events.KafkaEvent) ([]byte, error) {
	t.Helper()
	return adaptertest.Invoke(t, context.Background(), h.Handle, ev)
}

// ledger applies each record's event (see adaptertest.Ledger).
type ledger struct{ *adaptertest.Ledger }

func newLedger(fail ...string) *ledger { return &ledger{adaptertest.NewLedger(fail...)} }

func (l *ledger) apply(_ context.Context, r events.KafkaRecord) error {
	value, err := kafka.Value(r)
	if err != nil {
		return err
	}
	return l.Apply(value)
}

// from returns the records of ev's partition tp from offset on, as Lambda delivers a
// partition again from a reported failure.
func from(ev events.KafkaEvent, tp string, offset int64) events.KafkaEvent {
	out := ev
	out.Records = map[string][]events.KafkaRecord{}
	for _, r := range ev.Records[tp] {
		if r.Offset >= offset {
			out.Records[tp] = append(out.Records[tp], r)
		}
	}
	return out
}

// TestAWSLambdaGoFixture: aws-lambda-go's own Kafka event runs through the Lambda runtime;
// its record carries no idempotency-key header, so it is keyed by its cluster and offset.
func TestAWSLambdaGoFixture(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "fixture")
	require.NoError(t, err)
	var got []string
	h, err := kafka.New(g, func(_ context.Context, r events.KafkaRecord) error {
		v, err := kafka.Value(r)
		got = append(got, string(v))
		return err
	})
	require.NoError(t, err)
	ev := loadEvent(t, "kafka-aws-lambda-go")
	out, err := invoke(t, h, ev)
	require.NoError(t, err)
	assert.JSONEq(t, `{"batchItemFailures":[]}`, string(out))
	assert.Equal(t, []string{"8d5596b4-1813-4238-b24b-6dad8e3d1c0c"}, got, "the value decoded from base64")
	rep, err := h.Process(adaptertest.Context(t), ev)
	require.NoError(t, err)
	assert.Equal(t, kafka.StatusReplayed, rep.Outcomes[0].Status)
	assert.Equal(t, ev.EventSourceARN+"/AWSKafkaTopic-0@0", rep.Outcomes[0].Key, "the offset key names the cluster")
	assert.Equal(t, "AWSKafkaTopic-0@0", rep.Outcomes[0].ID)
}

// TestPartialResponseStopsTheKey: in provisioned mode, e2 (credits-0, offset 11, key
// acct-1) fails: e3 after it on acct-1 does not run, e4 (acct-2, same partition) and e5
// (another partition) do, and the response names credits-0 offsets 11 and 12. Lambda then
// delivers credits-0 from offset 11: e2 and e3 run, e4 replays, and nothing ran twice.
func TestPartialResponseStopsTheKey(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "ledger")
	require.NoError(t, err)
	l := newLedger("e2")
	h, err := kafka.New(g, l.apply, kafka.WithReportBatchItemFailures(true))
	require.NoError(t, err)
	ev := loadEvent(t, "kafka-two-partitions")
	out, err := invoke(t, h, ev)
	require.NoError(t, err)
	assert.JSONEq(t, `{"batchItemFailures":[
		{"itemIdentifier":{"partition":"credits-0","offset":11}},
		{"itemIdentifier":{"partition":"credits-0","offset":12}}]}`, string(out))
	assert.Equal(t, map[string]int{"e1": 1, "e4": 1, "e5": 1}, l.Applied)

	l.Heal()
	rep, err := h.Process(adaptertest.Context(t), from(ev, "credits-0", 11))
	require.NoError(t, err)
	var statuses []kafka.Status
	for _, o := range rep.Outcomes {
		statuses = append(statuses, o.Status)
	}
	assert.Equal(t, []kafka.Status{kafka.StatusRan, kafka.StatusRan, kafka.StatusReplayed}, statuses)
	assert.Equal(t, map[string]int{"e1": 1, "e2": 1, "e3": 1, "e4": 1, "e5": 1}, l.Applied)
	assert.Less(t, indexOf(l.Order, "e2"), indexOf(l.Order, "e3"), "acct-1 in offset order")
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// TestDefaultModeFailsTheBatch: without a partial response, a failure fails the whole
// batch after recording every record that finished; Lambda's retry of the whole batch
// replays them from the store and runs the rest, each record once.
func TestDefaultModeFailsTheBatch(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "ledger")
	require.NoError(t, err)
	l := newLedger("e2")
	h, err := kafka.New(g, l.apply)
	require.NoError(t, err)
	ev := loadEvent(t, "kafka-two-partitions")
	_, err = invoke(t, h, ev)
	require.Error(t, err, "the runtime reports the error, so Lambda retries the batch")
	_, err = h.Handle(adaptertest.Context(t), ev)
	require.ErrorIs(t, err, kafka.ErrBatchFailed)
	assert.Contains(t, err.Error(), "credits-0@11")
	assert.Equal(t, map[string]int{"e1": 1, "e4": 1, "e5": 1}, l.Applied)

	l.Heal()
	out, err := invoke(t, h, ev)
	require.NoError(t, err)
	assert.JSONEq(t, `{"batchItemFailures":[]}`, string(out))
	assert.Equal(t, map[string]int{"e1": 1, "e2": 1, "e3": 1, "e4": 1, "e5": 1}, l.Applied)
}

// TestHeaderKeyRunsADuplicateOnce: a producer's retry wrote e1 again at a new offset;
// the idempotency-key header keys both alike, so it runs once, and once more only if its
// value differs (a payload mismatch).
func TestHeaderKeyRunsADuplicateOnce(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "ledger")
	require.NoError(t, err)
	l := newLedger()
	h, err := kafka.New(g, l.apply, kafka.WithConcurrency(1))
	require.NoError(t, err)
	ev := loadEvent(t, "kafka-two-partitions")
	p0 := ev.Records["credits-0"]
	retried := p0[0]
	retried.Offset = 14
	ev.Records["credits-0"] = append(p0, retried)
	rep, err := h.Process(adaptertest.Context(t), ev)
	require.NoError(t, err)
	assert.Equal(t, kafka.StatusDuplicate, rep.Outcomes[4].Status, "credits-0@14 is e1 again")
	assert.Equal(t, "credits-0@14", rep.Outcomes[4].ID)
	assert.Equal(t, 1, l.Applied["e1"])

	// Without the header, records are keyed by their offsets: the retry runs again.
	l2 := newLedger()
	h2, err := kafka.New(g, l2.apply, kafka.WithKeyHeader(""), kafka.WithConcurrency(1))
	require.NoError(t, err)
	rep, err = h2.Process(adaptertest.Context(t), ev)
	require.NoError(t, err)
	assert.Equal(t, ev.EventSourceARN+"/credits-0@14", rep.Outcomes[4].Key)
	assert.Equal(t, 2, l2.Applied["e1"])
}

// TestMissingKey: a key function that finds no key fails its record with ReasonKey
// without running it, stops its record key, and leaves the other keys running.
func TestMissingKey(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "ledger")
	require.NoError(t, err)
	l := newLedger()
	key := func(r events.KafkaRecord) (string, error) {
		if r.Offset == 10 {
			return "", nil
		}
		v, ok := kafka.Header(r, "idempotency-key")
		if !ok {
			return "", errors.New("no idempotency-key header")
		}
		return string(v), nil
	}
	h, err := kafka.New(g, l.apply, kafka.WithKey(key), kafka.WithReportBatchItemFailures(true))
	require.NoError(t, err)
	rep, err := h.Process(adaptertest.Context(t), loadEvent(t, "kafka-two-partitions"))
	require.NoError(t, err)
	assert.Equal(t, kafka.ReasonKey, rep.Outcomes[0].Reason)
	require.ErrorIs(t, rep.Outcomes[0].Err, idem.ErrMissingKey)
	assert.Equal(t, kafka.ReasonGroupStopped, rep.Outcomes[1].Reason)
	assert.Equal(t, kafka.ReasonGroupStopped, rep.Outcomes[2].Reason)
	assert.Equal(t, map[string]int{"e4": 1, "e5": 1}, l.Applied)
	assert.Equal(t, []kafka.BatchItemFailure{
		{ItemIdentifier: kafka.ItemIdentifier{Partition: "credits-0", Offset: 10}},
		{ItemIdentifier: kafka.ItemIdentifier{Partition: "credits-0", Offset: 11}},
		{ItemIdentifier: kafka.ItemIdentifier{Partition: "credits-0", Offset: 12}},
	}, rep.Response().BatchItemFailures)
}

// TestInvalidEvent: a record without a topic cannot be named, so the whole batch fails.
func TestInvalidEvent(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "invalid")
	require.NoError(t, err)
	h, err := kafka.New(g, func(context.Context, events.KafkaRecord) error { return nil })
	require.NoError(t, err)
	ev := loadEvent(t, "kafka-two-partitions")
	ev.Records["credits-1"][0].Topic = ""
	_, err = h.Handle(context.Background(), ev)
	require.ErrorIs(t, err, kafka.ErrInvalidEvent)
}

// TestOptions: invalid settings fail New with an error naming the option.
func TestOptions(t *testing.T) {
	t.Parallel()
	adaptertest.OptionErrors(t, kafka.New, func(context.Context, events.KafkaRecord) error { return nil }, map[string]kafka.Option{
		"WithConcurrency":    kafka.WithConcurrency(0),
		"WithKey":            kafka.WithKey(nil),
		"WithFingerprint":    kafka.WithFingerprint(nil),
		"WithDeadlineMargin": kafka.WithDeadlineMargin(-time.Second),
	})
}
