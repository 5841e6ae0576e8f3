package kafka

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// TopicPartition returns the record's "<topic>-<partition>", as Lambda names the groups
// of a Kafka event and as the partial batch response names a partition.
func TopicPartition(r events.KafkaRecord) string {
	return r.Topic + "-" + strconv.FormatInt(r.Partition, 10)
}

// OffsetKey returns "<source>/<topic>-<partition>@<offset>": the record's place in the
// log of its cluster, which stays the same when Lambda delivers it again. The source names
// the cluster as the event does ([EventSource]): the MSK cluster's ARN, or a self-managed
// cluster's bootstrap servers; two event source mappings of one function, on two clusters
// with a topic of the same name, thus never share a key. A Kafka topic name holds no "/",
// so the source is everything before the last one. An event that names no source gives
// "<topic>-<partition>@<offset>". The event carries no topic id, so a topic deleted and
// created again under the same name gives its records the old records' keys (see the
// package doc's Keys). It never fails.
func OffsetKey(ev events.KafkaEvent, r events.KafkaRecord) (string, error) {
	return offsetKey(EventSource(ev), r), nil
}

// offsetKey is [OffsetKey] of a record of source.
func offsetKey(source string, r events.KafkaRecord) string {
	place := itemID(r)
	if source == "" {
		return place
	}
	return source + "/" + place
}

// EventSource returns what names the cluster of an event: its eventSourceArn (Amazon
// MSK), else its bootstrapServers (self-managed Apache Kafka, as the event source
// mapping lists them: changing that list changes the keys [OffsetKey] gives).
func EventSource(ev events.KafkaEvent) string {
	if ev.EventSourceARN != "" {
		return ev.EventSourceARN
	}
	return ev.BootstrapServers
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
// one. Kafka header names are case-sensitive, but producers spell one name several ways
// ("Idempotency-Key", "idempotency-key"): without a header of exactly that name, Header
// returns the first whose name equals name without regard to case.
func Header(r events.KafkaRecord, name string) ([]byte, bool) {
	for _, h := range r.Headers {
		if v, ok := h[name]; ok {
			return v, true
		}
	}
	for _, h := range r.Headers {
		for _, k := range slices.Sorted(maps.Keys(h)) {
			if strings.EqualFold(k, name) {
				return h[k], true
			}
		}
	}
	return nil, false
}

// itemID names a record in logs, hooks and errors: "<topic>-<partition>@<offset>", never
// its key or value.
func itemID(r events.KafkaRecord) string {
	return TopicPartition(r) + "@" + strconv.FormatInt(r.Offset, 10)
}
