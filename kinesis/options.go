package kinesis

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/internal/jmespathkey"
)

// Defaults of the [Handler] options.
const (
	// DefaultConcurrency is how many partition keys are processed at once, each in order
	// (see [WithConcurrency]).
	DefaultConcurrency = batch.DefaultConcurrency
	// DefaultDeadlineMargin is how much Lambda time must remain for a record to be started
	// (see [WithDeadlineMargin]).
	DefaultDeadlineMargin = batch.DefaultDeadlineMargin
)

// Option configures a [Handler]. Options are applied in order by [New].
type Option func(*config) error

type config struct {
	batch.Settings
	key         func(events.KinesisEventRecord) (string, error)
	fingerprint func(events.KinesisEventRecord) ([]byte, error)
	group       func(events.KinesisEventRecord) string
}

func defaultConfig() config {
	return config{
		Settings:    batch.DefaultSettings("kinesis"),
		key:         DefaultKey,
		fingerprint: DataFingerprint,
		group:       func(r events.KinesisEventRecord) string { return r.Kinesis.PartitionKey },
	}
}

func optErr(name, msg string) error {
	return fmt.Errorf("%w: kinesis: %s: %s", idem.ErrInvalidOption, name, msg)
}

// WithConcurrency sets how many partition keys are processed at once, each in sequence
// order. Default [DefaultConcurrency]; must be at least 1. With 1, the batch runs one
// record at a time in the shard's order.
func WithConcurrency(n int) Option {
	return func(c *config) error { return c.SetConcurrency(n) }
}

// WithKey sets how a record's idempotency key is chosen. Default [DefaultKey]: the
// sequence number with its shard. Must not be nil. An error from key, or an empty key,
// fails the record with batch.ReasonKey, and stops its partition key.
//
// A producer that retries a PutRecord whose answer it lost (a timeout, a connection
// reset) writes the record again under a new sequence number: only a key carried in the
// data, such as an event or order ID, tells the two apart. See [WithKeyJMESPath].
func WithKey(key func(events.KinesisEventRecord) (string, error)) Option {
	return func(c *config) error {
		if key == nil {
			return optErr("WithKey", "must not be nil")
		}
		c.key = key
		return nil
	}
}

// WithKeyJMESPath keys each record by a JMESPath expression over its data, decoded as
// JSON: "order_id", or "[tenant, order_id]" for both. It replaces [WithKey]. A selected
// string is the key as it is; any other value is the key in its compact JSON encoding; a
// null or empty value is no key (idem.ErrMissingKey). The Powertools functions
// powertools_json, powertools_base64 and powertools_base64_gzip are available. Data that
// is not JSON fails its record with batch.ReasonKey; errors name the expression, never the
// data. The expression must compile.
//
// This is the key a producer retry needs: the retried record has a new sequence number
// but the same data.
func WithKeyJMESPath(expr string) Option {
	return func(c *config) error {
		q, err := jmespathkey.Compile("kinesis", expr)
		if err != nil {
			return fmt.Errorf("%w: kinesis: WithKeyJMESPath: %w", idem.ErrInvalidOption, err)
		}
		c.key = func(r events.KinesisEventRecord) (string, error) {
			return q.Key(json.RawMessage(r.Kinesis.Data))
		}
		return nil
	}
}

// WithOrderingKey sets a record's ordering group: the records of one group run one at a
// time in sequence order, and a group stops at its first failure. Default: the partition
// key, the unit of order Kinesis keeps. Must not be nil. A function returning one value
// for every record orders the whole shard: the batch then runs one record at a time and
// stops at its first failure, so no record after a failure runs before it has succeeded.
func WithOrderingKey(group func(events.KinesisEventRecord) string) Option {
	return func(c *config) error {
		if group == nil {
			return optErr("WithOrderingKey", "must not be nil")
		}
		c.group = group
		return nil
	}
}

// WithFingerprint sets what identifies a record's content, so a key reused for different
// content fails with idem.ErrPayloadMismatch instead of being acknowledged unprocessed.
// Default [DataFingerprint]. Must not be nil; a function returning nil turns payload
// validation off.
func WithFingerprint(fingerprint func(events.KinesisEventRecord) ([]byte, error)) Option {
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
// and stops its partition key.
func WithDeadlineMargin(d time.Duration) Option {
	return func(c *config) error { return c.SetDeadlineMargin(d) }
}

// WithBatchClaims sets whether a batch's keys are claimed and its outcomes recorded
// together, as batch.WithBatchClaims says. Default true:
//
//   - The keys are claimed in ⌈n/25⌉ calls on dynamo.Store, and a redelivered batch of
//     finished records replays in them.
//   - A record followed in the batch by another record of its partition key is recorded on its
//     own (one call) before that record starts: its completion and attached writes are
//     committed, or its failure is known. So the next record sees its writes, and a failed
//     recording (an attached write's condition, a lost lease, the store) stops the partition key
//     there: the failed record is the first failure reported, the later ones are not
//     started.
//   - The last record of each partition key in the batch is recorded with the others, in ⌈m/25⌉
//     completion calls for m such records. A batch of n new records with distinct partition keys
//     thus costs 2⌈n/25⌉ calls; 100 records over 10 partition keys cost 4 + 90 + 1. A last record
//     whose recording fails is reported, and Lambda delivers it again.
//
// Off, each record claims and completes on its own (two calls).
func WithBatchClaims(on bool) Option {
	return func(c *config) error { return c.SetBatchClaims(on) }
}

// DefaultKey returns the record's sequence number qualified by its shard: the eventID
// Lambda forms of the two ("shardId-000000000000:4959…"), or the sequence number alone for
// a record without one. Both stay the same when Lambda delivers a record again (a retried
// batch, a redelivery after a reported failure). The shard counts because a sequence
// number is unique only within its shard. It never fails. A producer's retried PutRecord
// gets a new sequence number: key those by their data ([WithKeyJMESPath]).
func DefaultKey(r events.KinesisEventRecord) (string, error) {
	if r.EventID != "" {
		return r.EventID, nil
	}
	return r.Kinesis.SequenceNumber, nil
}

// DataFingerprint returns the record's data as its fingerprint. It never fails.
func DataFingerprint(r events.KinesisEventRecord) ([]byte, error) { return r.Kinesis.Data, nil }
