package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/idemkit/idem/kafka"
	"github.com/idemkit/idem/memstore"
)

// loadEvent reads testdata/name.json.
func loadEvent(t testing.TB, name string) events.KafkaEvent {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	require.NoError(t, err)
	var ev events.KafkaEvent
	require.NoError(t, json.Unmarshal(raw, &ev))
	require.NotEmpty(t, ev.Records)
	return ev
}

// invoke sends ev through the Lambda runtime's JSON handler, as Lambda would, with the
// deadline of an invocation that has just begun, and returns the raw response and error.
func invoke(t testing.TB, h *kafka.Handler, ev events.KafkaEvent) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	payload, err := json.Marshal(ev)
	require.NoError(t, err)
	return lambda.NewHandler(h.Handle).Invoke(ctx, payload)
}

// lambdaContext returns a context with the deadline of an invocation that has just begun.
func lambdaContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// ledger applies each record's event, counting runs per event ID, and fails the events
// named in fail.
type ledger struct {
	mu      sync.Mutex
	applied map[string]int
	order   []string
	fail    map[string]bool
}

func (l *ledger) apply(_ context.Context, r events.KafkaRecord) error {
	value, err := kafka.Value(r)
	if err != nil {
		return err
	}
	var c struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal(value, &c); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail[c.EventID] {
		return errors.New("downstream unavailable")
	}
	if l.applied == nil {
		l.applied = map[string]int{}
	}
	l.applied[c.EventID]++
	l.order = append(l.order, c.EventID)
	return nil
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
	rep, err := h.Process(lambdaContext(t), ev)
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
	l := &ledger{fail: map[string]bool{"e2": true}}
	h, err := kafka.New(g, l.apply, kafka.WithReportBatchItemFailures(true))
	require.NoError(t, err)
	ev := loadEvent(t, "kafka-two-partitions")
	out, err := invoke(t, h, ev)
	require.NoError(t, err)
	assert.JSONEq(t, `{"batchItemFailures":[
		{"itemIdentifier":{"partition":"credits-0","offset":11}},
		{"itemIdentifier":{"partition":"credits-0","offset":12}}]}`, string(out))
	assert.Equal(t, map[string]int{"e1": 1, "e4": 1, "e5": 1}, l.applied)

	l.mu.Lock()
	l.fail = nil
	l.mu.Unlock()
	rep, err := h.Process(lambdaContext(t), from(ev, "credits-0", 11))
	require.NoError(t, err)
	var statuses []kafka.Status
	for _, o := range rep.Outcomes {
		statuses = append(statuses, o.Status)
	}
	assert.Equal(t, []kafka.Status{kafka.StatusRan, kafka.StatusRan, kafka.StatusReplayed}, statuses)
	assert.Equal(t, map[string]int{"e1": 1, "e2": 1, "e3": 1, "e4": 1, "e5": 1}, l.applied)
	assert.Less(t, indexOf(l.order, "e2"), indexOf(l.order, "e3"), "acct-1 in offset order")
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
	l := &ledger{fail: map[string]bool{"e2": true}}
	h, err := kafka.New(g, l.apply)
	require.NoError(t, err)
	ev := loadEvent(t, "kafka-two-partitions")
	_, err = invoke(t, h, ev)
	require.Error(t, err, "the runtime reports the error, so Lambda retries the batch")
	_, err = h.Handle(lambdaContext(t), ev)
	require.ErrorIs(t, err, kafka.ErrBatchFailed)
	assert.Contains(t, err.Error(), "credits-0@11")
	assert.Equal(t, map[string]int{"e1": 1, "e4": 1, "e5": 1}, l.applied)

	l.mu.Lock()
	l.fail = nil
	l.mu.Unlock()
	out, err := invoke(t, h, ev)
	require.NoError(t, err)
	assert.JSONEq(t, `{"batchItemFailures":[]}`, string(out))
	assert.Equal(t, map[string]int{"e1": 1, "e2": 1, "e3": 1, "e4": 1, "e5": 1}, l.applied)
}

// TestHeaderKeyRunsADuplicateOnce: a producer's retry wrote e1 again at a new offset;
// the idempotency-key header keys both alike, so it runs once, and once more only if its
// value differs (a payload mismatch).
func TestHeaderKeyRunsADuplicateOnce(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "ledger")
	require.NoError(t, err)
	l := &ledger{}
	h, err := kafka.New(g, l.apply, kafka.WithConcurrency(1))
	require.NoError(t, err)
	ev := loadEvent(t, "kafka-two-partitions")
	p0 := ev.Records["credits-0"]
	retried := p0[0]
	retried.Offset = 14
	ev.Records["credits-0"] = append(p0, retried)
	rep, err := h.Process(lambdaContext(t), ev)
	require.NoError(t, err)
	assert.Equal(t, kafka.StatusDuplicate, rep.Outcomes[4].Status, "credits-0@14 is e1 again")
	assert.Equal(t, "credits-0@14", rep.Outcomes[4].ID)
	assert.Equal(t, 1, l.applied["e1"])

	// Without the header, records are keyed by their offsets: the retry runs again.
	l2 := &ledger{}
	h2, err := kafka.New(g, l2.apply, kafka.WithKeyHeader(""), kafka.WithConcurrency(1))
	require.NoError(t, err)
	rep, err = h2.Process(lambdaContext(t), ev)
	require.NoError(t, err)
	assert.Equal(t, ev.EventSourceARN+"/credits-0@14", rep.Outcomes[4].Key)
	assert.Equal(t, 2, l2.applied["e1"])
}

// TestMissingKey: a key function that finds no key fails its record with ReasonKey
// without running it, stops its record key, and leaves the other keys running.
func TestMissingKey(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "ledger")
	require.NoError(t, err)
	l := &ledger{}
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
	rep, err := h.Process(lambdaContext(t), loadEvent(t, "kafka-two-partitions"))
	require.NoError(t, err)
	assert.Equal(t, kafka.ReasonKey, rep.Outcomes[0].Reason)
	require.ErrorIs(t, rep.Outcomes[0].Err, idem.ErrMissingKey)
	assert.Equal(t, kafka.ReasonGroupStopped, rep.Outcomes[1].Reason)
	assert.Equal(t, kafka.ReasonGroupStopped, rep.Outcomes[2].Reason)
	assert.Equal(t, map[string]int{"e4": 1, "e5": 1}, l.applied)
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
	g, err := idem.New(memstore.New(), "options")
	require.NoError(t, err)
	fn := func(context.Context, events.KafkaRecord) error { return nil }
	for _, tc := range []struct {
		name string
		opt  kafka.Option
	}{
		{"WithConcurrency", kafka.WithConcurrency(0)},
		{"WithKey", kafka.WithKey(nil)},
		{"WithFingerprint", kafka.WithFingerprint(nil)},
		{"WithDeadlineMargin", kafka.WithDeadlineMargin(-time.Second)},
	} {
		_, err := kafka.New(g, fn, tc.opt)
		require.ErrorIs(t, err, idem.ErrInvalidOption, tc.name)
		assert.Contains(t, err.Error(), tc.name)
	}
	_, err = kafka.New(nil, fn)
	require.ErrorIs(t, err, idem.ErrInvalidOption)
	_, err = kafka.New(g, nil)
	require.ErrorIs(t, err, idem.ErrInvalidOption)
}
