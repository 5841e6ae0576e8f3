package kafka

import (
	"errors"

	"github.com/idemkit/idem/batch"
)

// Errors of this package. The errors in an [Outcome] also wrap the idem sentinels
// (idem.ErrInProgress, idem.ErrStore, …) and the handler's own error, so errors.Is and
// errors.As reach the cause.
var (
	// ErrInvalidEvent means the event itself is unusable: a record without a topic.
	// [Handler.Handle] returns it (wrapped) and Lambda retries the whole batch.
	ErrInvalidEvent = errors.New("kafka: invalid event")
	// ErrBatchFailed means a record of the batch failed and the event source mapping takes
	// no partial response (see [WithReportBatchItemFailures]): [Handler.Handle] returns it,
	// wrapped with the first failure, after recording every record that finished, so
	// Lambda retries the whole batch and the finished records replay.
	ErrBatchFailed = errors.New("kafka: batch failed")
	// ErrNotStarted means a record was not started because the Lambda deadline was nearer
	// than the margin (see [WithDeadlineMargin]) or the context had ended.
	ErrNotStarted = batch.ErrNotStarted
	// ErrGroupStopped means a record was not started because an earlier record of its key
	// in its partition failed in the same batch. The error also wraps that failure.
	ErrGroupStopped = batch.ErrGroupStopped
)

// PanicError reports a record handler that panicked: the batch engine's error. The record
// fails, the key is released, and the rest of the batch goes on.
type PanicError = batch.PanicError
