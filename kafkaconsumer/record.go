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

// OffsetKey returns "<topic>-<partition>@<offset>": the record's place in the log, which
// stays the same however often it is delivered. It never fails. It is the key the kafka
// package gives the same record in Lambda, so a topic may move between the two.
func OffsetKey(r *kgo.Record) (string, error) {
	return TopicPartition(r) + "@" + strconv.FormatInt(r.Offset, 10), nil
}

// ValueFingerprint returns the record's value as its fingerprint. It never fails.
func ValueFingerprint(r *kgo.Record) ([]byte, error) { return r.Value, nil }

// Header returns the value of the record's first header whose name equals name in any
// case, and whether there is one.
func Header(r *kgo.Record, name string) ([]byte, bool) {
	for _, h := range r.Headers {
		if strings.EqualFold(h.Key, name) {
			return h.Value, true
		}
	}
	return nil, false
}

// keyOf returns r's idempotency key: [WithKey]'s function if set, else the key header's
// value if present and not empty, else [OffsetKey].
func (c *config) keyOf(r *kgo.Record) (string, error) {
	if c.key != nil {
		return c.key(r)
	}
	if c.keyHeader != "" {
		if v, ok := Header(r, c.keyHeader); ok && len(v) > 0 {
			return string(v), nil
		}
	}
	return OffsetKey(r)
}

// itemID names a record in logs, hooks and errors: "<topic>-<partition>@<offset>", never
// its key or value.
func itemID(r *kgo.Record) string {
	id, _ := OffsetKey(r)
	return id
}

// KeyOf returns the idempotency key a [Consumer] made with opts gives r: [WithKey]'s
// function if set, else the key header's value (see [WithKeyHeader]) if present and not
// empty, else [OffsetKey]. Invalid options return an error wrapping idem.ErrInvalidOption.
func KeyOf(r *kgo.Record, opts ...Option) (string, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return "", err
		}
	}
	return cfg.keyOf(r)
}
