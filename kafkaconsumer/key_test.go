package kafkaconsumer_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/kafkaconsumer"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/outbox"
)

func TestKeys(t *testing.T) {
	t.Parallel()
	rec := func(headers ...kgo.RecordHeader) *kgo.Record {
		return &kgo.Record{Topic: "orders", Partition: 2, Offset: 41, Headers: headers}
	}
	custom := func(r *kgo.Record) (string, error) { return "order-" + string(r.Key), nil }
	tests := []struct {
		name string
		opts []kafkaconsumer.Option
		rec  *kgo.Record
		want string
	}{
		{"outbox header", nil, rec(kgo.RecordHeader{Key: outbox.IDAttribute, Value: []byte("evt-1")}), "evt-1"},
		{"exact spelling first", nil, rec(kgo.RecordHeader{Key: "idempotency-key", Value: []byte("evt-lower")},
			kgo.RecordHeader{Key: outbox.IDAttribute, Value: []byte("evt-exact")}), "evt-exact"},
		{"header in lower case", nil, rec(kgo.RecordHeader{Key: "idempotency-key", Value: []byte("evt-2")}), "evt-2"},
		{"empty header", nil, rec(kgo.RecordHeader{Key: outbox.IDAttribute}), "c1/orders-2@41"},
		{"no header", nil, rec(), "c1/orders-2@41"},
		{"header off", []kafkaconsumer.Option{kafkaconsumer.WithKeyHeader("")},
			rec(kgo.RecordHeader{Key: outbox.IDAttribute, Value: []byte("evt-1")}), "c1/orders-2@41"},
		{"other header", []kafkaconsumer.Option{kafkaconsumer.WithKeyHeader("event-id")},
			rec(kgo.RecordHeader{Key: "Event-ID", Value: []byte("evt-3")}), "evt-3"},
		{"WithKey", []kafkaconsumer.Option{kafkaconsumer.WithKey(custom)},
			&kgo.Record{Topic: "orders", Key: []byte("7"), Headers: []kgo.RecordHeader{{Key: outbox.IDAttribute, Value: []byte("evt-1")}}}, "order-7"},
	}
	t.Run("no cluster id", func(t *testing.T) {
		t.Parallel()
		got, err := kafkaconsumer.KeyOf("", [16]byte{}, rec())
		require.NoError(t, err)
		assert.Equal(t, "orders-2@41", got)
	})
	// Kafka prints the topic id 0x...01 as AAAAAAAAAAAAAAAAAAAAAQ (Uuid.toString: URL-safe
	// base64, unpadded).
	id := [16]byte{15: 1}
	for _, tc := range []struct {
		name, cluster string
		id            [16]byte
		want          string
	}{
		{"topic id", "c1", id, "c1/AAAAAAAAAAAAAAAAAAAAAQ:orders-2@41"},
		{"topic id, no cluster id", "", id, "AAAAAAAAAAAAAAAAAAAAAQ:orders-2@41"},
		{"URL-safe alphabet", "c1", [16]byte{0: 0xfb, 1: 0xff}, "c1/-_8AAAAAAAAAAAAAAAAAAA:orders-2@41"},
		{"zero topic id", "c1", [16]byte{}, "c1/orders-2@41"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := kafkaconsumer.KeyOf(tc.cluster, tc.id, rec())
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			got, err = kafkaconsumer.OffsetKey(tc.cluster, tc.id, rec())
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := kafkaconsumer.KeyOf("c1", [16]byte{}, tc.rec, tc.opts...)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	guard, err := idem.New(memstore.New(), "op")
	require.NoError(t, err)
	fn := func(context.Context, *kgo.Record) error { return nil }
	group := []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t")}
	tests := []struct {
		name  string
		guard *idem.Guard
		fn    func(context.Context, *kgo.Record) error
		kopts []kgo.Opt
		opts  []kafkaconsumer.Option
	}{
		{"nil guard", nil, fn, group, nil},
		{"nil handler", guard, nil, group, nil},
		{"no group", guard, fn, []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("t")}, nil},
		{"concurrency", guard, fn, group, []kafkaconsumer.Option{kafkaconsumer.WithConcurrency(0)}},
		{"max records", guard, fn, group, []kafkaconsumer.Option{kafkaconsumer.WithMaxRecords(0)}},
		{"batch timeout", guard, fn, group, []kafkaconsumer.Option{kafkaconsumer.WithBatchTimeout(-1)}},
		{"backoff", guard, fn, group, []kafkaconsumer.Option{kafkaconsumer.WithRetryBackoff(2, 1)}},
		{"commit timeout", guard, fn, group, []kafkaconsumer.Option{kafkaconsumer.WithCommitTimeout(0)}},
		{"nil key", guard, fn, group, []kafkaconsumer.Option{kafkaconsumer.WithKey(nil)}},
		{"nil fingerprint", guard, fn, group, []kafkaconsumer.Option{kafkaconsumer.WithFingerprint(nil)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := kafkaconsumer.New(tc.guard, tc.fn, tc.kopts, tc.opts...)
			require.ErrorIs(t, err, idem.ErrInvalidOption)
			assert.Nil(t, c)
		})
	}
}

// TestKeyErrorStopsKey: a key function's error fails the record with ReasonKey without
// running it, and the partition is not committed past it.
func TestKeyErrorStopsKey(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 1)
	k.produce(0, 3, func(int) string { return "a" })
	l := newLedger()
	bad := errors.New("no order id")
	c := newConsumer(t, k, memstore.New(), "g", nil, func(_ context.Context, r *kgo.Record) error {
		l.apply(r)
		return nil
	}, nil, kafkaconsumer.WithKey(func(r *kgo.Record) (string, error) {
		if r.Offset == 1 {
			return "", bad
		}
		return "order-" + strconv.FormatInt(r.Offset, 10), nil
	}))
	rep, err := c.Poll(context.Background())
	require.NoError(t, err)
	require.Len(t, rep.Outcomes, 3)
	assert.Equal(t, batch.ReasonKey, rep.Outcomes[1].Reason)
	assert.ErrorIs(t, rep.Outcomes[1].Err, bad)
	assert.Equal(t, batch.ReasonGroupStopped, rep.Outcomes[2].Reason)
	assert.Equal(t, []kafkaconsumer.Offset{{Topic: topic, Partition: 0, Offset: 1}}, rep.Committed)
	assert.Equal(t, []kafkaconsumer.Offset{{Topic: topic, Partition: 0, Offset: 1}}, rep.Retried)
	assert.Equal(t, map[string]int{"0@0": 1}, l.effects)
}

// TestKeyFunctionPanicFailsTheRecord: a panic in WithKey's or WithFingerprint's function
// fails its record (batch.ReasonKey, the error wrapping a *batch.PanicError with the
// stack), as a handler's panic fails its record, instead of crashing the process (and then
// every member that takes the partition over): the record does not run, its record key
// stops, the partition is committed up to it and polled again from it.
func TestKeyFunctionPanicFailsTheRecord(t *testing.T) {
	t.Parallel()
	key := func(r *kgo.Record) (string, error) { return "order-" + strconv.FormatInt(r.Offset, 10), nil }
	for _, tc := range []struct {
		name string
		opts []kafkaconsumer.Option
	}{
		{"WithKey", []kafkaconsumer.Option{kafkaconsumer.WithKey(func(r *kgo.Record) (string, error) {
			if r.Offset == 1 {
				panic("no order id")
			}
			return key(r)
		})}},
		{"WithFingerprint", []kafkaconsumer.Option{kafkaconsumer.WithKey(key),
			kafkaconsumer.WithFingerprint(func(r *kgo.Record) ([]byte, error) {
				if r.Offset == 1 {
					panic("no order id")
				}
				return r.Value, nil
			})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := newCluster(t, 1)
			k.produce(0, 3, func(int) string { return "a" })
			l := newLedger()
			c := newConsumer(t, k, memstore.New(), "g", nil, func(_ context.Context, r *kgo.Record) error {
				l.apply(r)
				return nil
			}, nil, tc.opts...)
			rep, err := c.Poll(context.Background())
			require.NoError(t, err)
			require.Len(t, rep.Outcomes, 3)
			assert.Equal(t, batch.StatusRan, rep.Outcomes[0].Status)
			assert.Equal(t, batch.ReasonKey, rep.Outcomes[1].Reason)
			var pe *batch.PanicError
			require.ErrorAs(t, rep.Outcomes[1].Err, &pe)
			assert.Equal(t, "no order id", pe.Value)
			assert.NotEmpty(t, pe.Stack)
			assert.Contains(t, rep.Outcomes[1].Err.Error(), tc.name)
			assert.Equal(t, batch.ReasonGroupStopped, rep.Outcomes[2].Reason)
			assert.Equal(t, []kafkaconsumer.Offset{{Topic: topic, Partition: 0, Offset: 1}}, rep.Committed)
			assert.Equal(t, []kafkaconsumer.Offset{{Topic: topic, Partition: 0, Offset: 1}}, rep.Retried)
			assert.Equal(t, map[string]int{"0@0": 1}, l.effects)
		})
	}
}
