package idem

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Use errors.Is to branch on them; where there is data to carry, a typed
// error stands behind the sentinel and errors.As reaches it.
var (
	// ErrMissingKey means the request carried no idempotency key.
	ErrMissingKey = errors.New("idem: missing idempotency key")
	// ErrInvalidKey means the key was empty, too long or otherwise malformed.
	ErrInvalidKey = errors.New("idem: invalid idempotency key")
	// ErrInProgress means another invocation holds the key's lease. An [*InProgressError]
	// carries when the lease ends.
	ErrInProgress = errors.New("idem: request with this key is in progress")
	// ErrPayloadMismatch means the key was used before with a different request fingerprint.
	ErrPayloadMismatch = errors.New("idem: idempotency key reused with a different request")
	// ErrLeaseLost means the lease ended and another owner took the key over before this
	// owner could complete, extend or release it. The other owner's record is intact. It is
	// retryable: a retry converges on the one stored result.
	ErrLeaseLost = errors.New("idem: lease lost to another owner")
	// ErrResultNotStored means the key completed but its result was not stored (too large
	// even compressed, or not encodable), so it cannot be replayed. The handler is not run
	// again.
	ErrResultNotStored = errors.New("idem: result completed but not stored")
	// ErrStore means the store failed. A [*StoreError] carries the operation and the
	// underlying error, which errors.As still reaches.
	ErrStore = errors.New("idem: store error")
	// ErrIncompatibleRecord means a stored record has an unknown schema version, status or
	// encoding, or data that does not decode. The handler is not run again.
	ErrIncompatibleRecord = errors.New("idem: incompatible record")
	// ErrFailed means the key's first run failed with an error that
	// [WithRememberFailures] called permanent. A [*FailedError] carries its message.
	ErrFailed = errors.New("idem: request failed before")
	// ErrConditionFailed means a write attached to the completion (see [Attach]) failed its
	// condition: neither it nor the completion committed, and the key was released.
	ErrConditionFailed = errors.New("idem: attached write condition failed")
	// ErrNotCommitted means a completion committed nothing, its attached writes included:
	// the store refused it as a whole (a cancelled transaction, an attached write over the
	// store's item size limit), or it failed and a read showed the record still in progress
	// under the owner's token. The key was released and a retry runs again. It comes
	// wrapped in a [*StoreError].
	ErrNotCommitted = errors.New("idem: completion not committed")
	// ErrDoNotStore, returned by a guarded handler (possibly wrapped), releases the key
	// without storing anything, whatever [WithRememberFailures] says, and [Do] returns the
	// handler's result and error as they are. HTTP wrappers use it for responses that must
	// not be replayed, such as a 503.
	ErrDoNotStore = errors.New("idem: do not store this outcome")
	// ErrSettled means [DoClaimed] was called for a request whose [Batch] was settled
	// before it started: its claim was released and the handler did not run.
	ErrSettled = errors.New("idem: batch settled before the request started")
	// ErrNoLease means [Attach] or [Checkpoint] was called outside a guarded handler.
	ErrNoLease = errors.New("idem: no lease in context: call from inside a guarded handler")
	// ErrTooLarge is returned by a [Store] when the record itself exceeds its item size
	// limit (an attached write over it is [ErrNotCommitted]). The guard then records
	// completion without the result.
	ErrTooLarge = errors.New("idem: record too large for the store")
)

// InProgressError reports a key held by another invocation. errors.Is(err, [ErrInProgress])
// holds for it.
type InProgressError struct {
	// LeaseExpires is when the holder's lease ends; after it the key can be taken over.
	LeaseExpires time.Time
	// RetryAfter is the time from the refusal until LeaseExpires, at least one second: the
	// value for an HTTP Retry-After header or a message visibility timeout.
	RetryAfter time.Duration
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("idem: request with this key is in progress (retry after %s)", e.RetryAfter)
}

// Is reports whether target is [ErrInProgress].
func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }

// StoreError reports a failed store operation. errors.Is(err, [ErrStore]) holds for it, and
// Unwrap returns the underlying error (an SDK error for the DynamoDB store).
type StoreError struct {
	// Op names the operation: "claim", "get", "complete", "release", "extend",
	// "checkpoint", or [OpCommit] for a completion with attached writes whose outcome is
	// unknown. With "claim" the handler did not run; with "complete" it ran and its effects
	// stand, but its outcome was not recorded; with [OpCommit] it ran and its attached
	// writes may or may not have committed.
	Op string
	// Err is the underlying error.
	Err error
}

func (e *StoreError) Error() string { return fmt.Sprintf("idem: store: %s: %v", e.Op, e.Err) }

// Is reports whether target is [ErrStore].
func (e *StoreError) Is(target error) bool { return target == ErrStore }

// Unwrap returns the underlying error.
func (e *StoreError) Unwrap() error { return e.Err }

// OpCommit is the [StoreError] operation of a completion with attached writes ([Attach])
// that failed, and whose record could not be read back: the writes and the record may or
// may not have committed together. A retry after the lease ends learns which: it replays
// the result if they did, and runs again if they did not.
const OpCommit = "commit"

// FailedError is a remembered failure replayed from the store. errors.Is(err, [ErrFailed])
// holds for it.
type FailedError struct {
	// Message is the text of the original error.
	Message string
}

func (e *FailedError) Error() string { return "idem: request failed before: " + e.Message }

// Is reports whether target is [ErrFailed].
func (e *FailedError) Is(target error) bool { return target == ErrFailed }

// storeErr wraps err as a [*StoreError] for op unless it already is an idem error that
// callers branch on.
func storeErr(op string, err error) error {
	if err == nil {
		return nil
	}
	for _, known := range []error{ErrStore, ErrLeaseLost, ErrTooLarge, ErrConditionFailed, ErrIncompatibleRecord} {
		if errors.Is(err, known) {
			return err
		}
	}
	return &StoreError{Op: op, Err: err}
}
