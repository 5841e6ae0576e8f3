package kafka

import (
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/outbox"
)

// Defaults of the [Handler] options.
const (
	// DefaultConcurrency is how many record keys are processed at once, each in offset
	// order (see [WithConcurrency]).
	DefaultConcurrency = batch.DefaultConcurrency
	// DefaultDeadlineMargin is how much Lambda time must remain for a record to be started
	// (see [WithDeadlineMargin]).
	DefaultDeadlineMargin = batch.DefaultDeadlineMargin
	// DefaultKeyHeader is the record header whose value keys a record by default (see
	// [WithKeyHeader]): outbox.IDAttribute, the header an outbox relay sets to the event's
	// id. [Header] matches it without regard to case, so "idempotency-key" keys too.
	DefaultKeyHeader = outbox.IDAttribute
)

// Option configures a [Handler]. Options are applied in order by [New].
type Option func(*config) error

type config struct {
	batch.Settings
	key         func(events.KafkaRecord) (string, error)
	keyHeader   string
	fingerprint func(events.KafkaRecord) ([]byte, error)
	partial     bool
}

func defaultConfig() config {
	return config{
		Settings:    batch.DefaultSettings("kafka"),
		keyHeader:   DefaultKeyHeader,
		fingerprint: ValueFingerprint,
	}
}

func optErr(name, msg string) error {
	return fmt.Errorf("%w: kafka: %s: %s", idem.ErrInvalidOption, name, msg)
}

// keyOf returns the idempotency key of r, of an event from source ([EventSource]):
// [WithKey]'s function if set, else the key header's value if present and not empty, else
// [OffsetKey].
func (c *config) keyOf(source string, r events.KafkaRecord) (string, error) {
	if c.key != nil {
		return c.key(r)
	}
	if c.keyHeader != "" {
		if v, ok := Header(r, c.keyHeader); ok && len(v) > 0 {
			return string(v), nil
		}
	}
	return offsetKey(source, r), nil
}

// WithConcurrency sets how many record keys are processed at once, each in offset order.
// Default [DefaultConcurrency]; must be at least 1. With 1, the batch runs one record at a
// time, partition after partition, in offset order.
func WithConcurrency(n int) Option {
	return func(c *config) error { return c.SetConcurrency(n) }
}

// WithKeyHeader sets the record header whose value, when present and not empty, is the
// record's idempotency key: the event ID its producer (an outbox relay) set. It is found
// as [Header] finds it (an exact name first, else without regard to case). Default
// [DefaultKeyHeader]; "" turns the header off. A record without the header is keyed by
// [OffsetKey]. [WithKey] replaces both.
func WithKeyHeader(name string) Option {
	return func(c *config) error {
		c.keyHeader = name
		return nil
	}
}

// WithKey sets how a record's idempotency key is chosen, replacing the key header and
// [OffsetKey]. Must not be nil. An error from key, or an empty key, fails the record with
// batch.ReasonKey, and stops its record key in its partition.
func WithKey(key func(events.KafkaRecord) (string, error)) Option {
	return func(c *config) error {
		if key == nil {
			return optErr("WithKey", "must not be nil")
		}
		c.key = key
		return nil
	}
}

// WithFingerprint sets what identifies a record's content, so a key reused for different
// content fails with idem.ErrPayloadMismatch instead of being acknowledged unprocessed.
// Default [ValueFingerprint]. Must not be nil; a function returning nil turns payload
// validation off.
func WithFingerprint(fingerprint func(events.KafkaRecord) ([]byte, error)) Option {
	return func(c *config) error {
		if fingerprint == nil {
			return optErr("WithFingerprint", "must not be nil")
		}
		c.fingerprint = fingerprint
		return nil
	}
}

// WithDeadlineMargin sets how much time must remain before the Lambda deadline
// (ctx.Deadline()) for a record to be started, as batch.WithDeadlineMargin says. Must not
// be negative. Default [DefaultDeadlineMargin], lowered to a quarter of the time left when
// the batch arrives if that is less. A record not started fails with [ReasonNotStarted]
// and stops its record key.
func WithDeadlineMargin(d time.Duration) Option {
	return func(c *config) error { return c.SetDeadlineMargin(d) }
}

// WithBatchClaims sets whether a batch's keys are claimed and its outcomes recorded
// together, as batch.WithBatchClaims says. Default true: on dynamo.Store, a batch of n new
// records costs ⌈n/25⌉ claim calls and ⌈n/25⌉ completion calls, and a redelivered batch
// of finished records replays in its claim calls. Off, each record claims and completes on
// its own.
func WithBatchClaims(on bool) Option {
	return func(c *config) error { return c.SetBatchClaims(on) }
}

// WithReportBatchItemFailures sets whether [Handler.Handle] answers with a partial batch
// response. Default false: a failed record makes Handle return an error wrapping
// [ErrBatchFailed], and Lambda retries the whole batch, in which the finished records
// replay. Turn it on only for an event source mapping in provisioned poller mode with
// FunctionResponseTypes [ReportBatchItemFailures]: Handle then returns no error and names
// every failed record (a key's first failure and the records of the key not started after
// it) by topic-partition and offset. A mapping
// without the setting takes the response for a success and drops the failed records.
func WithReportBatchItemFailures(on bool) Option {
	return func(c *config) error {
		c.partial = on
		return nil
	}
}
