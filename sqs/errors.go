package sqs

import (
	"errors"

	"github.com/idemkit/idem/batch"
)

// Errors of this package. The errors in an [Outcome] also wrap the idem sentinels
// (idem.ErrInProgress, idem.ErrStore, …) and the handler's own error, so errors.Is and
// errors.As reach the cause.
var (
	// ErrInvalidEvent means the event itself is unusable, so no partial batch response can be
	// built for it: a record without a message ID. [Handler.Handle] returns it (wrapped) and
	// Lambda retries the whole batch; it is the only error Handle returns.
	ErrInvalidEvent = errors.New("sqs: invalid event")
	// ErrNotStarted means a message was not started because the Lambda deadline was nearer
	// than the margin (see [WithDeadlineMargin]) or the context had ended. It is the batch
	// engine's error.
	ErrNotStarted = batch.ErrNotStarted
	// ErrGroupStopped means a FIFO message was not started because an earlier message of its
	// group failed in the same batch. The error also wraps that failure. It is the batch
	// engine's error.
	ErrGroupStopped = batch.ErrGroupStopped
	// ErrDuplicateFailed means a message was not run because an earlier message of the same
	// batch with the same key and fingerprint failed; it shares that failure, which the error
	// also wraps. It is the batch engine's error.
	ErrDuplicateFailed = batch.ErrDuplicateFailed
)

// PanicError reports a message handler that panicked: the batch engine's error. The panic
// is recovered so the rest of the batch is still processed and reported, the key is
// released (by idem) so a redelivery runs again, and the message is a batch item failure.
type PanicError = batch.PanicError
