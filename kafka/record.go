package kafka

import (
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
)

// TopicPartition returns the record's "<topic>-<partition>", as Lambda names the groups
// of a Kafka event and as the partial batch response names a partition.
func TopicPartition(r events.KafkaRecord) string {
	return r.Topic + "-" + strconv.FormatInt(r.Partition, 10)
}

// OffsetKey returns "<topic>-<partition>@<offset>": the record's place in the log, which
// stays the same when Lambda delivers it again. It never fails.
func OffsetKey(r events.KafkaRecord) (string, error) {
	return TopicPartition(r) + "@" + strconv.FormatInt(r.Offset, 10), nil
}

// ValueFingerprint returns the record's value, as Lambda sent it (base64), as its
// fingerprint. It never fails.
func ValueFingerprint(r events.KafkaRecord) ([]byte, error) { return []byte(r.Value), nil }

// Value returns the record's value decoded from base64; nil for a record without one.
func Value(r events.KafkaRecord) ([]byte, error) {
	v, err := base64.StdEncoding.DecodeString(r.Value)
	if err != nil {
		return nil, fmt.Errorf("kafka: value of %s: %w", itemID(r), err)
	}
	return v, nil
}

// RecordKey returns the record's Kafka key decoded from base64; nil for a record without
// one.
func RecordKey(r events.KafkaRecord) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(r.Key)
	if err != nil {
		return nil, fmt.Errorf("kafka: key of %s: %w", itemID(r), err)
	}
	return k, nil
}

// Header returns the value of the record's first header named name, and whether there is
// one.
func Header(r events.KafkaRecord, name string) ([]byte, bool) {
	for _, h := range r.Headers {
		if v, ok := h[name]; ok {
			return v, true
		}
	}
	return nil, false
}

// itemID names a record in logs, hooks and errors: "<topic>-<partition>@<offset>", never
// its key or value.
func itemID(r events.KafkaRecord) string {
	id, _ := OffsetKey(r)
	return id
}
