package kafkaconsumer

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/outbox"
)

// Defaults of the [Consumer] options.
const (
	// DefaultConcurrency is how many record keys are processed at once, each in offset
	// order (see [WithConcurrency]).
	DefaultConcurrency = batch.DefaultConcurrency
	// DefaultMaxRecords is how many records one poll takes at most (see [WithMaxRecords]).
	DefaultMaxRecords = 500
	// DefaultBatchTimeout is how long one polled batch may run (see [WithBatchTimeout]).
	DefaultBatchTimeout = 30 * time.Second
	// DefaultRetryBackoff is the first wait before a partition whose record failed is
	// polled again (see [WithRetryBackoff]); it doubles up to [DefaultMaxRetryBackoff].
	DefaultRetryBackoff = 100 * time.Millisecond
	// DefaultMaxRetryBackoff caps the wait between retries (see [WithRetryBackoff]).
	DefaultMaxRetryBackoff = 5 * time.Second
	// DefaultCommitTimeout bounds one offset commit (see [WithCommitTimeout]).
	DefaultCommitTimeout = 10 * time.Second
	// DefaultKeyHeader is the record header whose value keys a record by default: the
	// outbox's event id header (outbox.IDAttribute), matched in any case (see
	// [WithKeyHeader]).
	DefaultKeyHeader = outbox.IDAttribute
)

// Option configures a [Consumer]. Options are applied in order by [New].
type Option func(*config) error

type config struct {
	batch.Settings
	maxRecords   int
	batchTimeout time.Duration
	backoff      time.Duration
	maxBackoff   time.Duration
	commitTime   time.Duration
	keyHeader    string
	key          func(*kgo.Record) (string, error)
	fingerprint  func(*kgo.Record) ([]byte, error)
}

func defaultConfig() config {
	return config{
		Settings:     batch.DefaultSettings("kafkaconsumer"),
		maxRecords:   DefaultMaxRecords,
		batchTimeout: DefaultBatchTimeout,
		backoff:      DefaultRetryBackoff,
		maxBackoff:   DefaultMaxRetryBackoff,
		commitTime:   DefaultCommitTimeout,
		keyHeader:    DefaultKeyHeader,
		fingerprint:  ValueFingerprint,
	}
}

func optErr(name, msg string) error {
	return fmt.Errorf("%w: kafkaconsumer: %s: %s", idem.ErrInvalidOption, name, msg)
}

// WithConcurrency sets how many record keys of a batch are processed at once, each in
// offset order. Default [DefaultConcurrency]; must be at least 1. With 1, a batch runs
// one record at a time in the order the poll returned them.
func WithConcurrency(n int) Option {
	return func(c *config) error { return c.SetConcurrency(n) }
}

// WithMaxRecords sets how many records one poll takes at most: the size of a batch.
// Default [DefaultMaxRecords]; must be at least 1. A batch holds off rebalances until it
// is done (see [Consumer.Poll]), so keep it small enough to finish within the group's
// rebalance timeout.
func WithMaxRecords(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return optErr("WithMaxRecords", "must be at least 1")
		}
		c.maxRecords = n
		return nil
	}
}

// WithBatchTimeout sets how long one batch may run: its context's deadline, from which
// idem takes the leases of the batch's claims, and before which records not yet started
// are held back (batch.WithDeadlineMargin: a quarter of it, at most 5s) and polled again.
// Outcomes are recorded together at the end of the batch. Default [DefaultBatchTimeout];
// must not be negative. 0 gives the batch no deadline: each record's lease is then the
// guard's idem.WithLease, extended by idem.WithHeartbeat while its handler runs, and each
// outcome is recorded as soon as its handler returns; use it, with WithBatchClaims(false),
// for handlers that may run longer than a batch should.
func WithBatchTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return optErr("WithBatchTimeout", "must not be negative")
		}
		c.batchTimeout = d
		return nil
	}
}

// WithBatchClaims sets whether a batch's keys are claimed together and its outcomes
// recorded together, as batch.WithBatchClaims says. Default true: on dynamo.Store a batch
// of n new records costs ⌈n/25⌉ claim calls and ⌈n/25⌉ completion calls. Off, each
// record claims its key when it starts, so its lease counts from then.
func WithBatchClaims(on bool) Option {
	return func(c *config) error { return c.SetBatchClaims(on) }
}

// WithRetryBackoff sets how long [Consumer.Run] waits before polling again after a batch
// in which a record failed (the partition is polled again from that record), or a poll or
// commit failed: first, then doubling up to max. Defaults [DefaultRetryBackoff] and
// [DefaultMaxRetryBackoff]; first must be positive and max at least first.
func WithRetryBackoff(first, max time.Duration) Option {
	return func(c *config) error {
		if first <= 0 || max < first {
			return optErr("WithRetryBackoff", "first must be positive and max at least first")
		}
		c.backoff, c.maxBackoff = first, max
		return nil
	}
}

// WithCommitTimeout bounds one offset commit; commits run even after the context of
// [Consumer.Run] or [Consumer.Poll] has ended, so that a shutdown commits the records
// that finished. Default [DefaultCommitTimeout]; must be positive.
func WithCommitTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return optErr("WithCommitTimeout", "must be positive")
		}
		c.commitTime = d
		return nil
	}
}

// WithKeyHeader sets the record header whose value, when present and not empty, is the
// record's idempotency key; its name is matched in any case. Default [DefaultKeyHeader],
// the header an outbox relay sets to the event id; "" turns the header off. A record
// without it is keyed by [OffsetKey]. [WithKey] replaces both.
func WithKeyHeader(name string) Option {
	return func(c *config) error {
		c.keyHeader = name
		return nil
	}
}

// WithKey sets how a record's idempotency key is chosen, replacing the key header and
// [OffsetKey]. Must not be nil. An error from key, or an empty key, fails the record with
// batch.ReasonKey and stops its record key in its partition, which is polled again; so
// does a panic in key, recovered as an error wrapping a *batch.PanicError, its stack logged
// at ERROR.
func WithKey(key func(*kgo.Record) (string, error)) Option {
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
// validation off. An error from fingerprint, or a panic in it, fails the record as one
// from [WithKey]'s function does.
func WithFingerprint(fingerprint func(*kgo.Record) ([]byte, error)) Option {
	return func(c *config) error {
		if fingerprint == nil {
			return optErr("WithFingerprint", "must not be nil")
		}
		c.fingerprint = fingerprint
		return nil
	}
}
