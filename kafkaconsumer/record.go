package kafkaconsumer

import (
	"encoding/base64"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemkit/idem/batch"
)

// TopicPartition returns the record's "<topic>-<partition>", as Kafka tools and the
// Lambda event name a partition.
func TopicPartition(r *kgo.Record) string {
	return r.Topic + "-" + strconv.FormatInt(int64(r.Partition), 10)
}

// OffsetKey returns "<cluster>/<topic id>:<topic>-<partition>@<offset>": the record's place
// in the log of its topic, which stays the same however often it is delivered.
//
//   - cluster is the Kafka cluster id the [Consumer] reads from its brokers at its first
//     poll, so two clusters with a topic of the same name never share a key, and a change
//     of the seed broker list changes no key. Without one (a broker too old to report
//     it), the key has no "<cluster>/".
//   - topicID is the id Kafka gave the topic's log when it was created (KIP-516), as the
//     broker returns it in the fetch (kgo.FetchTopic.TopicID, Kafka 3.1 and later), in
//     Kafka's own form (22 characters of URL-safe base64, as kafka-topics prints it): a
//     topic deleted and created again under the same name is a new log, whose offsets
//     start again at 0, and shares no key with the old one. A zero topicID (an older
//     broker, or a fetch version without topic ids) gives the key without "<topic id>:",
//     "<cluster>/<topic>-<partition>@<offset>", which a recreated topic's records share.
//   - The form is unambiguous: "<topic id>:<topic>-<partition>" is how Kafka names a
//     partition of a topic id; a topic name and a topic id hold neither "/" nor ":", so
//     the cluster id is everything before the last "/", and a ":" after it ends the topic
//     id.
//
// It never fails.
func OffsetKey(cluster string, topicID [16]byte, r *kgo.Record) (string, error) {
	place := itemID(r)
	if topicID != ([16]byte{}) {
		place = base64.RawURLEncoding.EncodeToString(topicID[:]) + ":" + place
	}
	if cluster == "" {
		return place, nil
	}
	return cluster + "/" + place, nil
}

// ValueFingerprint returns the record's value as its fingerprint. It never fails.
func ValueFingerprint(r *kgo.Record) ([]byte, error) { return r.Value, nil }

// Header returns the value of the record's first header named name, and whether there is
// one. Kafka header names are case-sensitive, but producers spell one name several ways
// ("Idempotency-Key", "idempotency-key"): without a header of exactly that name, Header
// returns the first whose name equals name without regard to case, as the Lambda adapter's
// kafka.Header does.
func Header(r *kgo.Record, name string) ([]byte, bool) {
	for _, h := range r.Headers {
		if h.Key == name {
			return h.Value, true
		}
	}
	for _, h := range r.Headers {
		if strings.EqualFold(h.Key, name) {
			return h.Value, true
		}
	}
	return nil, false
}

// keyOf returns r's idempotency key: [WithKey]'s function if set, else the key header's
// value if present and not empty, else [OffsetKey] in cluster and topicID.
func (c *config) keyOf(cluster string, topicID [16]byte, r *kgo.Record) (string, error) {
	if c.key != nil {
		return c.key(r)
	}
	if c.keyHeader != "" {
		if v, ok := Header(r, c.keyHeader); ok && len(v) > 0 {
			return string(v), nil
		}
	}
	return OffsetKey(cluster, topicID, r)
}

// identify returns r's idempotency key ([config.keyOf]) and fingerprint. A panic in the
// functions of [WithKey] or [WithFingerprint] is recovered as an error wrapping a
// *batch.PanicError that names the option: the record fails (batch.ReasonKey) and the
// engine logs the stack at ERROR, as for a handler's panic, instead of the process
// crashing, and with it every member the partition passes to.
func (c *config) identify(cluster string, topicID [16]byte, r *kgo.Record) (key string, fp []byte, err error) {
	what := "WithKey"
	defer func() {
		if v := recover(); v != nil {
			pe := &batch.PanicError{Value: v, Stack: debug.Stack()}
			key, fp, err = "", nil, fmt.Errorf("kafkaconsumer: %s function panicked: %w", what, pe)
		}
	}()
	if key, err = c.keyOf(cluster, topicID, r); err != nil {
		return "", nil, err
	}
	what = "WithFingerprint"
	fp, err = c.fingerprint(r)
	return key, fp, err
}

// itemID names a record in logs, hooks and errors: "<topic>-<partition>@<offset>", never
// its key or value.
func itemID(r *kgo.Record) string {
	return TopicPartition(r) + "@" + strconv.FormatInt(r.Offset, 10)
}

// KeyOf returns the idempotency key a [Consumer] made with opts gives r, read from the
// cluster of id cluster in a fetch that gave its topic's id topicID (zero if none):
// [WithKey]'s function if set, else the key header's value (see [WithKeyHeader]) if
// present and not empty, else [OffsetKey]. Invalid options return an error wrapping
// idem.ErrInvalidOption.
func KeyOf(cluster string, topicID [16]byte, r *kgo.Record, opts ...Option) (string, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return "", err
		}
	}
	return cfg.keyOf(cluster, topicID, r)
}
