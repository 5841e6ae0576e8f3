package rabbitconsumer

import "errors"

// Errors of this package.
var (
	// ErrMissingKey means a message has no message ID and no key header (see
	// [WithKeyHeader]): it is dead-lettered without running, never run unguarded.
	ErrMissingKey = errors.New("rabbitconsumer: message has no message ID and no key header")
	// ErrChannelClosed means the channel [Consumer.Consume] consumed on was closed (the
	// connection was lost, or the broker closed it): the deliveries not acknowledged are
	// delivered again, and those whose outcome was recorded replay.
	ErrChannelClosed = errors.New("rabbitconsumer: channel closed")
	// ErrKeyPanic means the key function of [WithKey] panicked on a message: the message is
	// dead-lettered without running, as when the key function returns an error.
	ErrKeyPanic = errors.New("rabbitconsumer: the key function panicked")
)

// ErrConsumerCancelled means the broker cancelled the subscription of
// [Consumer.Consume], as it does when the queue is deleted.
var ErrConsumerCancelled = errors.New("rabbitconsumer: the broker cancelled the consumer")
