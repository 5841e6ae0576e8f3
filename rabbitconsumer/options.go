package rabbitconsumer

import (
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem"
)

// Defaults of the [Consumer] options.
const (
	// DefaultPrefetch is how many unacknowledged deliveries the broker sends the consumer
	// at most (see [WithPrefetch]).
	DefaultPrefetch = 20
	// DefaultRequeueDelay is how long a message that may succeed later is held before it
	// is requeued (see [WithRequeueDelay]).
	DefaultRequeueDelay = time.Second
	// DefaultReconnectDelay is the first wait of [Consumer.Run] before it dials again
	// after losing its connection; it doubles up to a minute.
	DefaultReconnectDelay = 500 * time.Millisecond
	// MaxPrefetch is the largest prefetch [WithPrefetch] takes: basic.qos carries it in 16
	// bits.
	MaxPrefetch = 1<<16 - 1
	// DefaultNotCommittedRetries is how many times a delivery whose completion committed
	// nothing is run again in hand before the failure policy settles it (see
	// [WithNotCommittedRetries]).
	DefaultNotCommittedRetries = 5
)

// Policy says what becomes of a message whose handler failed.
type Policy int

// The failure policies of [WithFailurePolicy].
const (
	// Requeue rejects the message with requeue (basic.reject) after the requeue delay
	// ([WithRequeueDelay]): the broker delivers it again, to this consumer or another,
	// and it runs again. The default. A message that always fails loops; bound it with a
	// quorum queue's delivery limit (x-delivery-limit), which dead-letters it then: these
	// rejects count toward it on every RabbitMQ version (4.3 and later count a reject, not
	// a nack), where holding a message that may pass later does not. A stream queue
	// (x-queue-type stream) has no delivery limit and refuses a reject: see the package
	// documentation.
	Requeue Policy = iota
	// DeadLetter nacks the message without requeue at once: the broker moves it to the
	// queue's dead-letter exchange (x-dead-letter-exchange), or drops it when the queue
	// has none.
	DeadLetter
)

// Option configures a [Consumer]. Options are applied in order by [New].
type Option func(*config) error

type config struct {
	prefetch       int
	requeueDelay   time.Duration
	reconnectDelay time.Duration
	policy         Policy
	keyHeader      string
	key            func(amqp.Delivery) (string, error)
	tag            string
	batchClaims    bool
	batchDeadline  time.Duration
	amqp           amqp.Config
	// notCommittedRetries is how many times a delivery whose runs committed nothing is
	// run again in hand.
	notCommittedRetries int
}

func defaultConfig() config {
	return config{
		prefetch:     DefaultPrefetch,
		requeueDelay: DefaultRequeueDelay, reconnectDelay: DefaultReconnectDelay,
		batchClaims: true, notCommittedRetries: DefaultNotCommittedRetries,
	}
}

func optErr(name, msg string) error {
	return fmt.Errorf("%w: rabbitconsumer: %s: %s", idem.ErrInvalidOption, name, msg)
}

// WithPrefetch sets the channel's prefetch count (basic.qos): how many unacknowledged
// deliveries the broker sends the consumer at most. It bounds the work in hand: the
// messages whose handlers run at once, those waiting to be recorded or acknowledged, those
// held to be tried again and those waiting for a delayed requeue, all together. A consumer
// whose every delivery is held (a long store outage) gets no others until one settles.
// Default [DefaultPrefetch]; must be from 1 to [MaxPrefetch]: basic.qos carries the count
// in 16 bits, and amqp091-go would cut a larger one (65536 to 0, which the broker reads as
// unlimited).
func WithPrefetch(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return optErr("WithPrefetch", "must be at least 1")
		}
		if n > MaxPrefetch {
			return optErr("WithPrefetch", fmt.Sprintf("%d is above %d, the most basic.qos carries", n, MaxPrefetch))
		}
		c.prefetch = n
		return nil
	}
}

// WithRequeueDelay sets how long a message that may succeed later is held, unacknowledged,
// before its claim is tried again in the consumer (see the package documentation): one
// whose key is in flight elsewhere (idem.ErrInProgress, or taken over by another
// invocation), whose store call failed (idem.ErrStore, a completion that committed
// nothing included, within [WithNotCommittedRetries]; not a record the guard cannot read),
// or which the batch deadline left unstarted. Each further wait doubles, up to 30 s (or d,
// when longer). It is also how long a message whose handler failed under the [Requeue]
// policy, or was cut off, or one with a per-message TTL that would have been held, waits
// before it is returned to the queue. The delay keeps a message whose key is busy from
// spinning; while held it counts against the prefetch. Default [DefaultRequeueDelay]; must
// not be negative.
func WithRequeueDelay(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return optErr("WithRequeueDelay", "must not be negative")
		}
		c.requeueDelay = d
		return nil
	}
}

// WithFailurePolicy sets what becomes of a message whose handler returned an error or
// panicked, or whose completion committed nothing (idemstore.ErrNotCommitted: the handler
// ran, and the store refused its outcome as a whole) more times than
// [WithNotCommittedRetries] lets it run again in hand: [Requeue] (the default) or
// [DeadLetter]. Always dead-lettered: messages without a key, messages whose key was used
// before with another body, messages whose key has a record the guard cannot read
// (idem.ErrIncompatibleRecord) and messages whose failure the guard remembers
// (idem.WithRememberFailures: a redelivery gets the same idem.ErrFailed). Messages that
// may succeed later are held and tried again (see [WithRequeueDelay]); handlers cut off
// (their context ended by a lost lease, the batch deadline or the consumer stopping, see
// the package documentation) and messages in hand when the consumer stops are always
// requeued.
func WithFailurePolicy(p Policy) Option {
	return func(c *config) error {
		if p != Requeue && p != DeadLetter {
			return optErr("WithFailurePolicy", fmt.Sprintf("unknown policy %d", p))
		}
		c.policy = p
		return nil
	}
}

// WithNotCommittedRetries sets how many times a delivery whose completion committed nothing
// (idemstore.ErrNotCommitted: the handler ran, the store refused its outcome and attached
// writes as a whole, and the guard released the key) is held and run again in hand, like a
// store outage, before the failure policy ([WithFailurePolicy]) settles it. The store
// answers so for a failure that passes and for one that recurs, and the error does not
// tell them apart, so the consumer counts:
//   - passing: a broken connection, a PostgreSQL deadlock or serialization failure, a
//     DynamoDB transaction cancelled by a conflict or throttling (idem.IsRefused's
//     retryable refusals). Held, the run after it commits: the message is neither
//     dead-lettered nor counted toward a quorum queue's delivery limit;
//   - recurring: an attached write over the store's size limit, or one that swallows a
//     failed statement (a handler bug). Held for ever, it would run at every back-off.
//
// The cost: each retry runs the handler again, repeating its effects outside the attached
// writes, which is why the count is bounded. It starts at 0 for a message the failure
// policy returned to the queue: on a quorum queue with x-delivery-limit L, under [Requeue],
// a completion refused every time runs (L+1)×(n+1) times before it is dead-lettered; under
// [DeadLetter], n+1 times. A message with a per-message TTL, never held, is rejected with
// requeue after each such run instead: the consumer keeps its count per key for the
// redelivery (for up to 10,000 keys, each for 10 minutes after its last run that committed
// nothing, and dropped once the key settles), so the bound holds for it on this consumer.
// Runs held for other causes (a claim failing while the store is down) do not count.
// Default [DefaultNotCommittedRetries], 5: with the default requeue delay the retries come
// after waits of 1, 2, 4, 8 and 16 s, which a blip, a deadlock or a short partial outage
// does not outlast. 0 settles the first as a failure. Must not be negative.
func WithNotCommittedRetries(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return optErr("WithNotCommittedRetries", "must not be negative")
		}
		c.notCommittedRetries = n
		return nil
	}
}

// WithKeyHeader names the header that keys a message without a message ID (the
// message-id property). Default none: a message without a message ID is dead-lettered
// ([ErrMissingKey]). The header's value must be a string or bytes.
func WithKeyHeader(name string) Option {
	return func(c *config) error {
		if name == "" {
			return optErr("WithKeyHeader", "must not be empty")
		}
		c.keyHeader = name
		return nil
	}
}

// WithKey sets how a message's idempotency key is chosen, in place of the message ID and
// [WithKeyHeader]. Must not be nil. An error from key, an empty key, or a panic in key
// ([ErrKeyPanic]) dead-letters the message without running it.
func WithKey(key func(amqp.Delivery) (string, error)) Option {
	return func(c *config) error {
		if key == nil {
			return optErr("WithKey", "must not be nil")
		}
		c.key = key
		return nil
	}
}

// WithConsumerTag sets the consumer tag the consumer subscribes with. Default empty: the
// client makes a unique one.
func WithConsumerTag(tag string) Option {
	return func(c *config) error {
		c.tag = tag
		return nil
	}
}

// WithBatchClaims sets whether the keys of the deliveries in hand are claimed and their
// outcomes recorded together, as batch.WithBatchClaims says. Default true: on dynamo.Store
// a batch of n new messages costs ⌈n/25⌉ claim calls and ⌈n/25⌉ completion calls. Off, each
// message claims and completes on its own.
func WithBatchClaims(on bool) Option {
	return func(c *config) error {
		c.batchClaims = on
		return nil
	}
}

// WithAMQPConfig sets the configuration [Consumer.Run] dials with (heartbeat, TLS, dial
// timeout, client properties). Default amqp091-go's defaults (amqp.DialConfig with a zero
// Config). A Config with Recovery set is refused: amqp091-go's automatic recovery reopens
// the same channel after a lost connection and subscribes again, so the consumer would
// not see the loss, and would settle the delivery tags of the lost channel on the new one,
// where they name other messages (an ack of one message would acknowledge another). Run
// dials again itself; the broker redelivers what was not acknowledged.
func WithAMQPConfig(cfg amqp.Config) Option {
	return func(c *config) error {
		if cfg.Recovery != nil {
			return optErr("WithAMQPConfig", "Recovery must be nil: a recovered channel reuses "+
				"delivery tags, and the consumer would settle other messages with the lost "+
				"channel's tags; Run dials again itself")
		}
		c.amqp = cfg
		return nil
	}
}

// WithReconnectDelay sets the first wait of [Consumer.Run] before it dials again after
// losing its connection or failing to dial; each further failure doubles it, up to a
// minute, and a connection that consumed resets it. Default [DefaultReconnectDelay]; must
// be positive.
func WithReconnectDelay(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return optErr("WithReconnectDelay", "must be positive")
		}
		c.reconnectDelay = d
		return nil
	}
}

// WithBatchDeadline gives each batch a deadline, d after it starts, as a Lambda invocation
// has one. Default 0: none. Must not be negative. What it changes:
//   - recording: a batch's outcomes are recorded together once its last handler has
//     returned (on pgstore one transaction for the completions and their attached writes,
//     on dynamo.Store ⌈n/25⌉ calls); without a deadline each outcome is recorded on its own
//     as its handler returns, since nothing would bound how long a key waits for its record.
//   - at the deadline each handler's context ends (context.DeadlineExceeded): a handler that
//     returns an error then is cut off, not failed: nothing is stored for it and its message
//     is rejected with requeue whatever the failure policy (see [WithFailurePolicy]), which a
//     quorum queue's delivery limit counts;
//   - a message not yet started when less than batch.DefaultDeadlineMargin (or a quarter of
//     d) is left is held and tried again without running.
//
// Choose d above the time a handler takes: a handler that ignores its context and overruns
// it fails its recording, and its message comes back once the lease ends. Leave it off for
// handlers kept alive with idem.WithHeartbeat, which it would cut off whatever their
// heartbeat.
func WithBatchDeadline(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return optErr("WithBatchDeadline", "must not be negative")
		}
		c.batchDeadline = d
		return nil
	}
}
