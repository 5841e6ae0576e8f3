package kafkaconsumer

import (
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TopicPartition returns the record's "<topic>-<partition>", as Kafka tools and the
// Lambda event name a partition.
func TopicPartition(r *kgo.Record) string {
	return r.Topic + "-" + strconv.FormatInt(int64(r.Partition), 10)
}

// OffsetKey returns "<cluster>/<topic>-<partition>@<offset>": the record's place in the
// log of its cluster, which stays the same however often it is delivered. cluster is the
// Kafka cluster id the [Consumer] reads from its brokers at its first poll, so two
// clusters with a topic of the same name never share a key, and a change of the seed
// broker list changes no key; without one (a broker too old to report it),
// "<topic>-<partition>@<offset>". It never fails.
func OffsetKey(cluster string, r *kgo.Record) (string, error) {
	if cluster == "" {
		return itemID(r), nil
	}
	return cluster + "/" + itemID(r), nil
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
// value if present and not empty, else [OffsetKey] in cluster.
func (c *config) keyOf(cluster string, r *kgo.Record) (string, error) {
	if c.key != nil {
		return c.key(r)
	}
	if c.keyHeader != "" {
		if v, ok := Header(r, c.keyHeader); ok && len(v) > 0 {
			return string(v), nil
		}
	}
	return OffsetKey(cluster, r)
}

// itemID names a record in logs, hooks and errors: "<topic>-<partition>@<offset>", never
// its key or value.
func itemID(r *kgo.Record) string {
	return TopicPartition(r) + "@" + strconv.FormatInt(r.Offset, 10)
}

// KeyOf returns the idempotency key a [Consumer] made with opts gives r, read from the
// cluster of id cluster: [WithKey]'s function if set, else the key header's value (see
// [WithKeyHeader]) if present and not empty, else [OffsetKey]. Invalid options return an
// error wrapping idem.ErrInvalidOption.
func KeyOf(cluster string, r *kgo.Record, opts ...Option) (string, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return "", err
		}
	}
	return cfg.keyOf(cluster, r)
}
