package batch

import (
	"errors"
	"fmt"
)

// Errors of this package. The errors in an [Outcome] also wrap the idem sentinels
// (idem.ErrInProgress, idem.ErrStore, …) and the handler's own error, so errors.Is and
// errors.As reach the cause.
var (
	// ErrNotStarted means an item was not started because the Lambda deadline was nearer
	// than the margin (see [WithDeadlineMargin]) or the context had ended.
	ErrNotStarted = errors.New("batch: not started: the deadline is near or the context ended")
	// ErrGroupStopped means an item of an ordered batch was not started because an earlier
	// item of its group failed in the same batch. The error also wraps that failure.
	ErrGroupStopped = errors.New("batch: not started: an earlier item of its group failed")
	// ErrDuplicateFailed means an item was not run because an earlier item of the same
	// batch with the same key and fingerprint failed; it shares that failure, which the
	// error also wraps.
	ErrDuplicateFailed = errors.New("batch: not run: an earlier duplicate in the batch failed")
)

// PanicError reports a handler that panicked, or a write it attached (idem.Attach) that
// panicked as its completion ran. The panic is recovered so the rest of the batch is still
// processed and reported, the key is released (by idem) so a redelivery runs again, and
// the item fails.
type PanicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the panicking goroutine's stack trace.
	Stack []byte
}

// Error describes the panic.
func (e *PanicError) Error() string { return fmt.Sprintf("batch: handler panicked: %v", e.Value) }

// Unwrap returns the panic value if it is an error, so errors.Is reaches it.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
