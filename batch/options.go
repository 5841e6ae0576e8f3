package batch

import (
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// Defaults of the [Engine] options.
const (
	// DefaultConcurrency is how many items (or ordered groups) are processed at once (see
	// [WithConcurrency]).
	DefaultConcurrency = 10
	// DefaultDeadlineMargin is how much Lambda time must remain for an item to be started
	// (see [WithDeadlineMargin]). Unless set explicitly, the margin is also never more than
	// a quarter of the time left when the batch arrives, so a function with a short timeout
	// still starts its items.
	DefaultDeadlineMargin = 5 * time.Second
)

// Option configures an [Engine]. Options are applied in order by [New].
type Option func(*config) error

type config struct {
	concurrency int
	margin      time.Duration
	marginSet   bool
	batchClaims bool
}

func defaultConfig() config {
	return config{concurrency: DefaultConcurrency, margin: DefaultDeadlineMargin, batchClaims: true}
}

func optErr(name, msg string) error {
	return fmt.Errorf("%w: batch: %s: %s", idem.ErrInvalidOption, name, msg)
}

// WithConcurrency sets how many items are processed at once: up to n items of an
// unordered batch, or up to n groups of an ordered one, each in order. Default
// [DefaultConcurrency]; must be at least 1. With 1, a batch is processed in order on the
// invoking goroutine, one item after another.
func WithConcurrency(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return optErr("WithConcurrency", "must be at least 1")
		}
		c.concurrency = n
		return nil
	}
}

// WithDeadlineMargin sets how much time must remain before the Lambda deadline
// (ctx.Deadline()) for an item to be started. Must not be negative. Choose it above the
// time one item takes, including its two store round trips.
//
//   - Default: [DefaultDeadlineMargin], lowered to a quarter of the time left when the
//     batch arrives if that is less. An explicit value is used as is; 0 starts items until
//     the context ends.
//   - An item not started for lack of time fails with [ReasonNotStarted], so the source
//     delivers it again rather than losing it to a timeout. An item already started runs
//     to completion under ctx.
//   - Without a context deadline, no item is held back.
//   - The deadline is read on the guard's clock ([idem.WithClock]). With batch claims, the
//     margin is also how far behind the function's clock may run before an invocation is
//     stopped before it records the outcomes that finished (see [WithBatchClaims]).
func WithDeadlineMargin(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return optErr("WithDeadlineMargin", "must not be negative")
		}
		c.margin = d
		c.marginSet = true
		return nil
	}
}

// WithBatchClaims sets whether a batch's keys are claimed and its outcomes recorded
// together. Default true.
//
//   - On, the keys of a batch are claimed in one [idem.Guard.Claim]: a store that
//     implements [idemstore.BatchStore] (dynamo.Store) claims them in one round trip per
//     store batch (25 keys for DynamoDB), and answers the keys completed before in the same
//     calls.
//   - The outcome of a handler that ran waits to be recorded with the others once every
//     item has finished, while its lease lasts until the Lambda deadline; [idem.Batch]
//     lists when an outcome is recorded at once instead.
//   - Once less than the margin (see [WithDeadlineMargin]) is left, the batch records the
//     outcomes finished by then and releases the claims of items not yet started.
//   - With [Mode.RecordBeforeNext], an item that another item of its group follows is
//     recorded on its own before that item starts; the keys are still claimed together.
//   - Off, with [Mode.RecordEach], or when two items of the batch carry one key with
//     different fingerprints, each item claims and records its outcome on its own as it
//     runs.
func WithBatchClaims(on bool) Option {
	return func(c *config) error {
		c.batchClaims = on
		return nil
	}
}
