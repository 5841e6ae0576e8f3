package kafka_test

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem/kafka"
)

// TestOffsetKeyFormat: the offset key names the cluster by the MSK ARN, else by the
// self-managed bootstrap servers, before the record's place in the log.
func TestOffsetKeyFormat(t *testing.T) {
	t.Parallel()
	r := events.KafkaRecord{Topic: "orders", Partition: 3, Offset: 42}
	for _, tc := range []struct {
		ev   events.KafkaEvent
		want string
	}{
		{events.KafkaEvent{EventSourceARN: "arn:aws:kafka:eu-west-1:1:cluster/c/u-1", BootstrapServers: "b-1:9092"}, "arn:aws:kafka:eu-west-1:1:cluster/c/u-1/orders-3@42"},
		{events.KafkaEvent{EventSource: "SelfManagedKafka", BootstrapServers: "b-1:9092,b-2:9092"}, "b-1:9092,b-2:9092/orders-3@42"},
		{events.KafkaEvent{}, "orders-3@42"},
	} {
		got, err := kafka.OffsetKey(tc.ev, r)
		assert.NoError(t, err)
		assert.Equal(t, tc.want, got)
	}
}

// TestHeaderMatchesWithoutCase: an exact name first, else one without regard to case.
func TestHeaderMatchesWithoutCase(t *testing.T) {
	t.Parallel()
	r := events.KafkaRecord{Headers: []map[string]events.JSONNumberBytes{{"idempotency-key": []byte("a")}, {"Idempotency-Key": []byte("b")}}}
	v, ok := kafka.Header(r, "Idempotency-Key")
	assert.True(t, ok)
	assert.Equal(t, "b", string(v), "the exact name first")
	v, ok = kafka.Header(r, "IDEMPOTENCY-KEY")
	assert.True(t, ok)
	assert.Equal(t, "a", string(v))
	_, ok = kafka.Header(r, "other")
	assert.False(t, ok)
}
