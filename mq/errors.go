package mq

import (
	"errors"

	"github.com/idemkit/idem/batch"
)

// Errors of this package. The errors in an [Outcome] also wrap the idem sentinels
// (idem.ErrInProgress, idem.ErrStore, …) and the handler's own error, so errors.Is and
// errors.As reach the cause.
var (
	// ErrBatchFailed means a message of the batch failed: Handle returns it, wrapped with
	// the first failure, after recording every message that finished, so the broker
	// delivers the whole batch again and the finished messages replay.
	ErrBatchFailed = errors.New("mq: batch failed")
	// ErrMissingMessageID means a message has no message ID (RabbitMQ's messageId is
	// optional) and no key function was set: the message fails with batch.ReasonKey
	// without running. Set [WithRabbitMQKey] or [WithActiveMQKey] for such publishers.
	ErrMissingMessageID = errors.New("mq: message has no message ID: set a key function")
	// ErrNotStarted means a message was not started because the Lambda deadline was
	// nearer than the margin (see [WithDeadlineMargin]) or the context had ended.
	ErrNotStarted = batch.ErrNotStarted
	// ErrGroupStopped means a message was not started because an earlier message of its
	// queue failed in the same batch. The error also wraps that failure.
	ErrGroupStopped = batch.ErrGroupStopped
)

// PanicError reports a message handler that panicked: the batch engine's error. The
// message fails, its key is released, and the batch fails.
type PanicError = batch.PanicError
