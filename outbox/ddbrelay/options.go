package ddbrelay

import (
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamostream"
)

// Defaults of the [Relay] options.
const (
	// DefaultConcurrency is how many ordering keys are published at once (see
	// [WithConcurrency]).
	DefaultConcurrency = dynamostream.DefaultConcurrency
	// DefaultDeadlineMargin is how much Lambda time must remain for an event's publish to
	// be started (see [WithDeadlineMargin]).
	DefaultDeadlineMargin = dynamostream.DefaultDeadlineMargin
)

// Option configures a [Relay]. Options are applied in order by [New].
type Option func(*config) error

type config struct {
	concurrency int
	margin      time.Duration
	marginSet   bool
	hooks       Hooks
}

func invalid(option, msg string) error {
	return fmt.Errorf("%w: ddbrelay: %s: %s", idem.ErrInvalidOption, option, msg)
}

// WithConcurrency sets how many ordering keys are published at once, each key's events
// one at a time in order. Default [DefaultConcurrency]; must be at least 1. With 1 the
// batch is published one event at a time in the relay's order.
func WithConcurrency(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return invalid("WithConcurrency", "must be at least 1")
		}
		c.concurrency = n
		return nil
	}
}

// WithDeadlineMargin sets how much time must remain before the Lambda deadline for an
// event's publish to be started, as dynamostream.WithDeadlineMargin says; an event not
// started is reported and delivered again. Default [DefaultDeadlineMargin]; must not be
// negative.
func WithDeadlineMargin(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return invalid("WithDeadlineMargin", "must not be negative")
		}
		c.margin, c.marginSet = d, true
		return nil
	}
}

// Hooks are a relay's callbacks for metrics; a nil field does nothing. They run on the
// invocation's goroutine and must not block.
type Hooks struct {
	// OnLag runs once per batch that holds a record, with [Report.Lag]: the age of the
	// batch's oldest record (now − its ApproximateCreationDateTime, whole seconds). Publish
	// it as the outbox lag metric. Lambda's own IteratorAge metric of the event source
	// mapping measures the same from the service's side, without code.
	OnLag func(time.Duration)
	// OnBatch runs after each batch with its [Report].
	OnBatch func(*Report)
}

// WithHooks sets the relay's hooks. Default: none.
func WithHooks(h Hooks) Option {
	return func(c *config) error {
		c.hooks = h
		return nil
	}
}
