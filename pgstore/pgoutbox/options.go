package pgoutbox

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemkit/idem"
)

// Defaults of the options.
const (
	// DefaultBatchSize is the default of [WithBatchSize].
	DefaultBatchSize = 100
	// DefaultPollInterval is the default of [WithPollInterval].
	DefaultPollInterval = time.Second
	// DefaultRetryDelay is the default of [WithRetryDelay].
	DefaultRetryDelay = time.Second
)

// Option configures a [Relay].
type Option func(*config) error

type config struct {
	batchSize   int
	poll, retry time.Duration
	markTimeout time.Duration
	hooks       Hooks
}

func newConfig(opts []Option) (config, error) {
	c := config{batchSize: DefaultBatchSize, poll: DefaultPollInterval, retry: DefaultRetryDelay, markTimeout: 10 * time.Second}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&c); err != nil {
			return config{}, err
		}
	}
	return c, nil
}

func invalid(option, msg string) error {
	return fmt.Errorf("%w: pgoutbox: %s: %s", idem.ErrInvalidOption, option, msg)
}

// WithBatchSize sets how many events one pass takes at most. Default [DefaultBatchSize]
// (100); it must be between 1 and 10000.
func WithBatchSize(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 10000 {
			return invalid("WithBatchSize", fmt.Sprintf("%d, must be between 1 and 10000", n))
		}
		c.batchSize = n
		return nil
	}
}

// WithPollInterval sets how long [Relay.Run] waits for a notification before it runs a
// pass anyway: the fallback for notifications missed. Default [DefaultPollInterval] (1s);
// it must be positive.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return invalid("WithPollInterval", "must be positive")
		}
		c.poll = d
		return nil
	}
}

// WithRetryDelay sets how long [Relay.Run] waits after a failed pass, a pass with
// messages the publisher refused, or a lost listening connection. Default
// [DefaultRetryDelay] (1s); it must be positive.
func WithRetryDelay(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return invalid("WithRetryDelay", "must be positive")
		}
		c.retry = d
		return nil
	}
}

// Hooks are a relay's callbacks for metrics and logs; a nil field does nothing. They run
// on the relay's goroutine and must not block.
type Hooks struct {
	// OnPass runs after each pass that committed and took events.
	OnPass func(Pass)
	// OnLag runs in [Relay.Run] about once per poll interval with [Relay.Lag]: publish
	// it as the outbox lag metric.
	OnLag func(time.Duration)
	// OnError runs with each error [Relay.Run] retries, and with a failure to record the
	// publisher's failures on their rows (which never undoes a pass's marks).
	OnError func(error)
}

// WithHooks sets the relay's hooks. Default: none.
func WithHooks(h Hooks) Option {
	return func(c *config) error {
		c.hooks = h
		return nil
	}
}

// splitName splits "schema.name" for quoting, as pgstore does.
func splitName(table string) []string { return strings.Split(table, ".") }
