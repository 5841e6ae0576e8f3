package dynamostream

import (
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/internal/jmespathkey"
)

// Defaults of the [Handler] options.
const (
	// DefaultConcurrency is how many items are processed at once, each in order
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
	key         func(events.DynamoDBEventRecord) (string, error)
	fingerprint func(events.DynamoDBEventRecord) ([]byte, error)
	group       func(events.DynamoDBEventRecord) (string, error)
}

func defaultConfig() config {
	return config{
		Settings:    batch.DefaultSettings("dynamostream"),
		key:         DefaultKey,
		fingerprint: ChangeFingerprint,
		group:       ItemKey,
	}
}

func optErr(name, msg string) error {
	return fmt.Errorf("%w: dynamostream: %s: %s", idem.ErrInvalidOption, name, msg)
}

// WithConcurrency sets how many items (primary keys) are processed at once, each in
// sequence order. Default [DefaultConcurrency]; must be at least 1. With 1, the batch runs
// one record at a time in the shard's order.
func WithConcurrency(n int) Option {
	return func(c *config) error { return c.SetConcurrency(n) }
}

// WithKey sets how a record's idempotency key is chosen. Default [DefaultKey]: the
// eventID. Must not be nil. An error from key, or an empty key, fails the record with
// batch.ReasonKey, and stops its item.
func WithKey(key func(events.DynamoDBEventRecord) (string, error)) Option {
	return func(c *config) error {
		if key == nil {
			return optErr("WithKey", "must not be nil")
		}
		c.key = key
		return nil
	}
}

// WithKeyJMESPath keys each record by a JMESPath expression over the record decoded to
// plain JSON (see [Decoded]): "NewImage.order_id", or "[Keys.pk, NewImage.version]". It
// replaces [WithKey]. A selected string is the key as it is; any other value is the key
// in its compact JSON encoding; a null or empty value is no key (idem.ErrMissingKey), which
// fails the record. The Powertools functions powertools_json, powertools_base64 and
// powertools_base64_gzip are available. Errors name the expression, never the record's
// values. The expression must compile.
func WithKeyJMESPath(expr string) Option {
	return func(c *config) error {
		q, err := jmespathkey.Compile("dynamostream", expr)
		if err != nil {
			return fmt.Errorf("%w: dynamostream: WithKeyJMESPath: %w", idem.ErrInvalidOption, err)
		}
		c.key = func(r events.DynamoDBEventRecord) (string, error) { return q.Key(Decoded(r)) }
		return nil
	}
}

// WithOrderingKey sets a record's ordering group: the records of one group run one at a
// time in sequence order, and a group stops at its first failure. Default [ItemKey]: the
// item's primary key, the unit of order DynamoDB Streams keeps. Must not be nil. A
// function returning one value for every record orders the whole shard: the batch then
// runs one record at a time and stops at its first failure.
func WithOrderingKey(group func(events.DynamoDBEventRecord) string) Option {
	return func(c *config) error {
		if group == nil {
			return optErr("WithOrderingKey", "must not be nil")
		}
		c.group = func(r events.DynamoDBEventRecord) (string, error) { return group(r), nil }
		return nil
	}
}

// WithFingerprint sets what identifies a record's content, so a key reused for different
// content fails with idem.ErrPayloadMismatch instead of being acknowledged unprocessed.
// Default [ChangeFingerprint]. Must not be nil; a function returning nil turns payload
// validation off.
func WithFingerprint(fingerprint func(events.DynamoDBEventRecord) ([]byte, error)) Option {
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
// and stops its item.
func WithDeadlineMargin(d time.Duration) Option {
	return func(c *config) error { return c.SetDeadlineMargin(d) }
}

// WithBatchClaims sets whether a batch's keys are claimed and its outcomes recorded
// together, as batch.WithBatchClaims says. Default true:
//
//   - The keys are claimed in ⌈n/25⌉ calls on dynamo.Store, and a redelivered batch of
//     finished records replays in them.
//   - A record followed in the batch by another record of its item is recorded on its
//     own (one call) before that record starts: its completion and attached writes are
//     committed, or its failure is known. So the next record sees its writes, and a failed
//     recording (an attached write's condition, a lost lease, the store) stops the item
//     there: the failed record is the first failure reported, the later ones are not
//     started.
//   - The last record of each item in the batch is recorded with the others, in ⌈m/25⌉
//     completion calls for m such records. A batch of n new records with distinct items
//     thus costs 2⌈n/25⌉ calls; 100 records over 10 items cost 4 + 90 + 1. A last record
//     whose recording fails is reported, and Lambda delivers it again.
//
// Off, each record claims and completes on its own (two calls).
func WithBatchClaims(on bool) Option {
	return func(c *config) error { return c.SetBatchClaims(on) }
}

// WithWaitInFlight sets whether a record whose key is in flight elsewhere waits for it, as
// batch.WithWaitInFlight says. Default false: the record fails with [ReasonInProgress] at
// once, and stops its item. On, a record whose key a crashed invocation's claim holds
// is taken over once that claim's lease ends, if it ends before the record's cut-off
// (the deadline less the margin); else the record fails at the cut-off, so a retry of
// the batch is spent once per invocation, not once per quick retry of Lambda's.
func WithWaitInFlight(on bool) Option {
	return func(c *config) error { return c.SetWaitInFlight(on) }
}

// DefaultKey returns the record's eventID, which identifies one change of one item and
// stays the same when Lambda delivers the record again. It never fails.
func DefaultKey(r events.DynamoDBEventRecord) (string, error) { return r.EventID, nil }
