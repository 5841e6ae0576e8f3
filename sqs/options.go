package sqs

import (
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
)

// Defaults of the [Handler] options.
const (
	// DefaultConcurrency is how many messages (or FIFO message groups) are processed at once
	// (see [WithConcurrency]).
	DefaultConcurrency = batch.DefaultConcurrency
	// DefaultDeadlineMargin is how much Lambda time must remain for a message to be started
	// (see [WithDeadlineMargin]). Unless set explicitly, the margin is also never more than a
	// quarter of the time left when the batch arrives, so a function with a short timeout
	// still starts its messages.
	DefaultDeadlineMargin = batch.DefaultDeadlineMargin
)

// Option configures a [Handler]. Options are applied in order by [New].
type Option func(*config) error

type config struct {
	batch.Settings
	key         func(events.SQSMessage) (string, error)
	fingerprint func(events.SQSMessage) ([]byte, error)
}

func defaultConfig() config {
	return config{
		Settings:    batch.DefaultSettings("sqs"),
		key:         DefaultKey,
		fingerprint: BodyFingerprint,
	}
}

func optErr(name, msg string) error {
	return fmt.Errorf("%w: sqs: %s: %s", idem.ErrInvalidOption, name, msg)
}

// WithConcurrency sets how many messages are processed at once: on a standard queue, up to n
// messages run concurrently; on a FIFO queue, up to n message groups, each in order. Default
// [DefaultConcurrency]; must be at least 1. With 1, a batch is processed in order on the
// invoking goroutine.
func WithConcurrency(n int) Option {
	return func(c *config) error { return c.SetConcurrency(n) }
}

// WithKey sets how a message's idempotency key is chosen. Default [DefaultKey]: the
// [KeyAttribute] message attribute, else the FIFO MessageDeduplicationId, else the message
// ID. Must not be nil. An error from key fails the message with [ReasonKey]; an empty key
// does too ([idem.ErrMissingKey]). Wrap [DefaultKey] to keep its fallbacks.
func WithKey(key func(events.SQSMessage) (string, error)) Option {
	return func(c *config) error {
		if key == nil {
			return optErr("WithKey", "must not be nil")
		}
		c.key = key
		return nil
	}
}

// WithFingerprint sets what identifies a message's content, so a key reused for different
// content fails with [idem.ErrPayloadMismatch] instead of being acknowledged unprocessed.
// Default [BodyFingerprint]: the body's bytes. Must not be nil; a function returning nil
// turns payload validation off. An error from fingerprint fails the message with
// [ReasonKey].
func WithFingerprint(fingerprint func(events.SQSMessage) ([]byte, error)) Option {
	return func(c *config) error {
		if fingerprint == nil {
			return optErr("WithFingerprint", "must not be nil")
		}
		c.fingerprint = fingerprint
		return nil
	}
}

// WithDeadlineMargin sets how much time must remain before the Lambda deadline
// (ctx.Deadline()) for a message to be started. Must not be negative. Choose it above the
// time one message takes, including its two store round trips.
//
//   - Default: [DefaultDeadlineMargin], lowered to a quarter of the time left when the
//     batch arrives if that is less. An explicit value is used as is; 0 starts messages
//     until the context ends.
//   - A message not started for lack of time is reported as a batch item failure with
//     [ReasonNotStarted], so SQS delivers it again rather than losing it to a timeout. A
//     message already started runs to completion under ctx.
//   - Without a context deadline, no message is held back.
//   - The deadline is read on the guard's clock ([idem.WithClock]), while Lambda stops the
//     function at the deadline by its own. With batch claims, the margin is also how far
//     behind the function's clock may run before an invocation is stopped before it
//     records the outcomes that finished (see [WithBatchClaims]). Lambda's clocks are kept
//     within milliseconds.
func WithDeadlineMargin(d time.Duration) Option {
	return func(c *config) error { return c.SetDeadlineMargin(d) }
}

// WithBatchClaims sets whether a batch's keys are claimed and its outcomes recorded
// together. Default true.
//
// On, the keys of a standard-queue batch are claimed in one [idem.Guard.Claim]. Each
// message then runs (or replays, or fails) as on the per-message path. The outcome of a
// handler that ran waits to be recorded with the others once every message has finished,
// provided its lease lasts until the Lambda deadline (ctx.Deadline()), before which the
// batch ends. With a store that implements [idemstore.BatchStore], such as dynamo.Store:
//
//   - a batch of new messages costs one claim round trip and one completion round trip per
//     store batch (25 messages for DynamoDB) instead of two per message;
//   - a batch of replays costs two round trips instead of one per message. They are
//     sequential, where the per-message path's concurrent calls take one round trip's time;
//   - a batch with a single key to claim is claimed as the per-message path claims it (see
//     [idem.Guard.Claim]), so no batch costs more round trips than the per-message path.
//
// An outcome is instead recorded as soon as its handler returns, as on the per-message
// path, so that its lease never lapses unrecorded (another invocation would run the
// message again):
//
//   - when ctx has no deadline (Lambda always sets one; a test or local run should too, or
//     only the claims are batched);
//   - when idem.WithMaxLease caps the lease below the deadline (heartbeat extensions
//     count);
//   - when the handler attaches writes ([idem.Attach]) and the store cannot complete them
//     with others' (no [idemstore.BatchAttachStore]: its own transaction). With
//     dynamo.Store, outcomes with attached writes wait too, and are recorded in as few
//     TransactWriteItems as DynamoDB's limits allow, each completion still conditional on
//     its own lease;
//   - once less than the margin (see [WithDeadlineMargin]) is left. The batch then records
//     the outcomes finished by then and releases the claims of messages not yet started,
//     so a Lambda timeout loses no outcome that finished (as long as the function's clock
//     runs behind Lambda's by less than the margin).
//
// Outcomes, reasons and the response are those of the per-message path. The log lines of
// failed messages come after the batch is settled, and keys whose outcomes wait stay in
// progress for other invocations until then.
//
// Off, on a FIFO queue, or when two messages of the batch carry one key with different
// fingerprints, each message claims and completes on its own as soon as it runs: a FIFO
// message runs only after the one before it in its group has durably completed. A store
// without batch support behaves the same either way.
func WithBatchClaims(on bool) Option {
	return func(c *config) error { return c.SetBatchClaims(on) }
}
