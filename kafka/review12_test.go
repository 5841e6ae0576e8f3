package kafka_test

import (
	"context"
	"encoding/base64"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/kafka"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/outbox"
)

// TestReview12_OutboxIDHeaderKeysTheRecord: package outbox documents outbox.IDAttribute
// ("Idempotency-Key") as the Kafka header that carries an event's id, and package kafka
// says "A transactional outbox relay sets the header to the event's ID". The relay
// publishes at least once: a relay that crashes between its publish and its mark (or whose
// publish answer was lost) publishes the same event, same id, again, at a new offset.
// Schedule:
//  1. the relay publishes event E (header Idempotency-Key: E) at orders-0 offset 40, and
//     crashes before marking it published;
//  2. Lambda delivers offset 40: the handler runs for E;
//  3. another relay publishes E again, same id, at offset 41;
//  4. Lambda delivers offset 41.
//
// The consumer must deduplicate on the id: the handler runs once. On main the kafka
// handler's default header is "idempotency-key" and Header matches names exactly, so
// neither record has it; both are keyed by their offset ("orders-0@40", "orders-0@41"),
// and the handler runs twice for one event: double execution.
func TestReview12_OutboxIDHeaderKeysTheRecord(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "review12-outbox-header")
	require.NoError(t, err)
	runs := map[string]int{}
	h, err := kafka.New(g, func(_ context.Context, r events.KafkaRecord) error {
		v, err := kafka.Value(r)
		runs[string(v)]++
		return err
	})
	require.NoError(t, err)
	const id = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	value := base64.StdEncoding.EncodeToString([]byte(`{"event":"` + id + `"}`))
	rec := func(offset int64) events.KafkaEvent {
		return events.KafkaEvent{EventSource: "aws:kafka", Records: map[string][]events.KafkaRecord{
			"orders-0": {{
				Topic: "orders", Partition: 0, Offset: offset, Value: value,
				Key:     base64.StdEncoding.EncodeToString([]byte("customer-42")),
				Headers: []map[string]events.JSONNumberBytes{{outbox.IDAttribute: []byte(id)}},
			}},
		}}
	}
	for _, offset := range []int64{40, 41} {
		rep, err := h.Process(adaptertest.Context(t), rec(offset))
		require.NoError(t, err)
		require.NoError(t, rep.Err())
	}
	assert.Equal(t, 1, runs[`{"event":"`+id+`"}`], "one event, published twice by an at-least-once relay, runs its handler once")
}

// TestReview12_OffsetKeyNamesTheCluster: a function may have several Kafka event source
// mappings (two MSK clusters during a migration, MSK and a self-managed cluster, two
// regions' replicas), each delivering a topic of the same name. A record without the key
// header is keyed "<topic>-<partition>@<offset>", which names no cluster: the records at
// orders-0 offset 7 of two clusters are two different events under one idempotency key.
// Schedule:
//  1. cluster A delivers orders-0@7; the handler runs; the key completes;
//  2. cluster B delivers its own orders-0@7.
//
// Same value (a tick, "{}", a repeated command): B's record is acknowledged as a replay of
// A's and never runs: a lost event. Another value: it fails with a payload mismatch at
// every delivery, holding its record key back until the record expires from the retry
// policy: a lost event too. Both subtests fail on main; each record should run once.
func TestReview12_OffsetKeyNamesTheCluster(t *testing.T) {
	t.Parallel()
	for name, values := range map[string][2]string{
		"SameValue":    {`{"tick":1}`, `{"tick":1}`},
		"AnotherValue": {`{"order":"o-1"}`, `{"order":"o-2"}`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			g, err := idem.New(memstore.New(), "review12-clusters")
			require.NoError(t, err)
			var ran []string
			h, err := kafka.New(g, func(_ context.Context, r events.KafkaRecord) error {
				ran = append(ran, r.Value)
				return nil
			})
			require.NoError(t, err)
			for i, arn := range []string{
				"arn:aws:kafka:eu-west-1:123456789012:cluster/old/e9f754c6-d29a-4430-a7db-958a19fd2c54-4",
				"arn:aws:kafka:eu-west-1:123456789012:cluster/new/0c1d2e3f-4a5b-4c6d-8e7f-8a9b0c1d2e3f-2",
			} {
				ev := events.KafkaEvent{EventSource: "aws:kafka", EventSourceARN: arn, Records: map[string][]events.KafkaRecord{
					"orders-0": {{Topic: "orders", Partition: 0, Offset: 7,
						Value: base64.StdEncoding.EncodeToString([]byte(values[i]))}},
				}}
				rep, err := h.Process(adaptertest.Context(t), ev)
				require.NoError(t, err)
				assert.NoError(t, rep.Err(), "cluster %d's record", i)
			}
			assert.Len(t, ran, 2, "each cluster's record at orders-0@7 is its own event and runs once")
		})
	}
}
