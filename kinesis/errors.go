package kinesis

import (
	"errors"

	"github.com/idemkit/idem/batch"
)

// Errors of this package. The errors in an [Outcome] also wrap the idem sentinels
// (idem.ErrInProgress, idem.ErrStore, …) and the handler's own error, so errors.Is and
// errors.As reach the cause.
var (
	// ErrInvalidEvent means the event itself is unusable, so no partial batch response can
	// be built for it: a record without a sequence number. [Handler.Handle] returns it
	// (wrapped) and Lambda retries the whole batch; it is the only error Handle returns.
	ErrInvalidEvent = errors.New("kinesis: invalid event")
	// ErrNotStarted means a record was not started because the Lambda deadline was nearer
	// than the margin (see [WithDeadlineMargin]) or the context had ended.
	ErrNotStarted = batch.ErrNotStarted
	// ErrGroupStopped means a record was not started because an earlier record of its
	// partition key failed in the same batch. The error also wraps that failure.
	ErrGroupStopped = batch.ErrGroupStopped
)

// PanicError reports a record handler that panicked: the batch engine's error. The record
// fails, the key is released, and the rest of the batch goes on.
type PanicError = batch.PanicError
