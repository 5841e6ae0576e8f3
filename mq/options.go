package mq

import (
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
)

// DefaultDeadlineMargin is how much Lambda time must remain for a message to be started
// (see [WithDeadlineMargin]).
const DefaultDeadlineMargin = batch.DefaultDeadlineMargin

// Option configures an [ActiveMQHandler] or a [RabbitMQHandler]. Options are applied in
// order by [NewActiveMQ] and [NewRabbitMQ].
type Option func(*config) error

type config struct {
	batch.Settings
	activeKey func(events.ActiveMQMessage) (string, error)
	rabbitKey func(events.RabbitMQMessage) (string, error)
}

func defaultConfig() config {
	return config{Settings: batch.DefaultSettings("mq")}
}

func optErr(name, msg string) error {
	return fmt.Errorf("%w: mq: %s: %s", idem.ErrInvalidOption, name, msg)
}

// WithActiveMQKey sets how an ActiveMQ message's idempotency key is chosen. Default
// [ActiveMQMessageID]. Must not be nil, and applies to [NewActiveMQ] only. An error from
// key, or an empty key, fails the message with batch.ReasonKey, and the batch.
func WithActiveMQKey(key func(events.ActiveMQMessage) (string, error)) Option {
	return func(c *config) error {
		if key == nil {
			return optErr("WithActiveMQKey", "must not be nil")
		}
		c.activeKey = key
		return nil
	}
}

// WithRabbitMQKey sets how a RabbitMQ message's idempotency key is chosen. Default
// [RabbitMQMessageID], which fails a message without a messageId ([ErrMissingMessageID]).
// Must not be nil, and applies to [NewRabbitMQ] only. An error from key, or an empty key,
// fails the message with batch.ReasonKey, and the batch.
func WithRabbitMQKey(key func(events.RabbitMQMessage) (string, error)) Option {
	return func(c *config) error {
		if key == nil {
			return optErr("WithRabbitMQKey", "must not be nil")
		}
		c.rabbitKey = key
		return nil
	}
}

// WithDeadlineMargin sets how much time must remain before the Lambda deadline
// (ctx.Deadline()) for a message to be started, as batch.WithDeadlineMargin says. Must not
// be negative. Default [DefaultDeadlineMargin], lowered to a quarter of the time left when
// the batch arrives if that is less. A message not started fails with [ReasonNotStarted],
// and the batch with it.
func WithDeadlineMargin(d time.Duration) Option {
	return func(c *config) error { return c.SetDeadlineMargin(d) }
}

// WithBatchClaims sets whether a batch's keys are claimed and its outcomes recorded
// together, as batch.WithBatchClaims says. Default true: on dynamo.Store, a batch of n new
// messages costs ⌈n/25⌉ claim calls and ⌈n/25⌉ completion calls, and a redelivered batch
// of finished messages replays in its claim calls. Off, each message claims and completes
// on its own.
func WithBatchClaims(on bool) Option {
	return func(c *config) error { return c.SetBatchClaims(on) }
}
