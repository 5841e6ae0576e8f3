package idem

import (
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem/idemstore"
)

// The errors a caller of [Do] branches on with errors.Is, by what it can do about them.
// Where there is data to carry, a typed error stands behind the sentinel for errors.As.
//   - Fix the request: [ErrMissingKey], [ErrInvalidKey], [ErrPayloadMismatch].
//   - Retry later: [ErrInProgress] ([*InProgressError] carries when), [ErrLeaseLost],
//     [ErrStore] ([*StoreError] carries the operation and the cause). The handler did
//     not run, or a retry converges on the one stored result.
//   - Give up, since a retry gets the same answer: [ErrFailed] ([*FailedError] carries
//     the message), [ErrResultNotStored], [ErrIncompatibleRecord].
//   - From the handler's side: [ErrConditionFailed] (an attached write's condition
//     failed), [ErrNoLease] ([Attach] or a checkpoint outside a guarded run),
//     [ErrInvalidCheckpoint], and [ErrDoNotStore], which a handler returns. From
//     [Batch.Settle], an [*AttachPanicError]: an attached write panicked.
//   - From constructors: [ErrInvalidOption].
var (
	// ErrMissingKey means the request carried no idempotency key.
	ErrMissingKey = errors.New("idem: missing idempotency key")
	// ErrInvalidKey means the key was empty, too long or otherwise malformed.
	ErrInvalidKey = errors.New("idem: invalid idempotency key")
	// ErrPayloadMismatch means the key was used before with a different request fingerprint.
	ErrPayloadMismatch = errors.New("idem: idempotency key reused with a different request")

	// ErrInProgress means another invocation holds the key's lease. An [*InProgressError]
	// carries when the lease ends.
	ErrInProgress = errors.New("idem: request with this key is in progress")
	// ErrLeaseLost means this run no longer holds the key. Either its lease ended and
	// another owner took the key over before this one could complete, extend or release
	// it, or its [Batch] was settled before it started. The other owner's record is
	// intact. It is retryable: a retry converges on the one stored result.
	ErrLeaseLost = idemstore.ErrLeaseLost
	// ErrStore means the store failed. A [*StoreError] carries the operation and the
	// underlying error, which errors.As still reaches.
	ErrStore = errors.New("idem: store error")

	// ErrFailed means the key's first run failed with an error that
	// [WithRememberFailures] called permanent. A [*FailedError] carries its message.
	ErrFailed = errors.New("idem: request failed before")
	// ErrResultNotStored means the key completed but its result was not stored, so it
	// cannot be replayed. The result was too large even compressed, or not encodable. The
	// handler is not run again.
	ErrResultNotStored = errors.New("idem: result completed but not stored")
	// ErrIncompatibleRecord means a stored record has an unknown schema version, status or
	// encoding, or data that does not decode. The handler is not run again. From
	// [LastCheckpointValue], it means the checkpoint's value does not decode into the type
	// asked for with the guard's codec.
	ErrIncompatibleRecord = idemstore.ErrIncompatibleRecord

	// ErrConditionFailed means a write attached to the completion (see [Attach]) failed its
	// condition: neither it nor the completion committed, and the key was released.
	ErrConditionFailed = idemstore.ErrConditionFailed
	// ErrNoLease means [Attach], [Checkpoint] or [CheckpointValue] was called outside a
	// guarded handler.
	ErrNoLease = errors.New("idem: no lease in context: call from inside a guarded handler")
	// ErrInvalidCheckpoint means [Checkpoint] or [CheckpointValue] was given a checkpoint
	// that not every store keeps exactly: empty, not valid UTF-8, holding a NUL byte,
	// longer than [MaxCheckpointLen] bytes (a value's step and stored form together), or
	// in the stored form of a value. Or [CheckpointValue]'s codec could not encode the
	// value. Nothing was written. The error says which rule it broke.
	ErrInvalidCheckpoint = errors.New("idem: invalid checkpoint")
	// ErrDoNotStore, returned by a guarded handler (possibly wrapped), releases the key
	// without storing anything, whatever [WithRememberFailures] says. [Do] returns the
	// handler's result and error as they are. HTTP wrappers use it for responses that must
	// not be replayed, such as a 503.
	ErrDoNotStore = errors.New("idem: do not store this outcome")

	// ErrInvalidOption means a constructor refused a setting: a bad option value, a nil
	// store, an invalid operation name. The error names the option.
	ErrInvalidOption = errors.New("idem: invalid option")
)

// InProgressError reports a key held by another invocation.
// errors.Is(err, [ErrInProgress]) holds for it.
type InProgressError struct {
	// LeaseExpires is when the holder's lease ends; after it the key can be taken over.
	LeaseExpires time.Time
	// RetryAfter is the time from the refusal until LeaseExpires, at least one second. It
	// is the value for an HTTP Retry-After header or a message visibility timeout.
	RetryAfter time.Duration
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("idem: request with this key is in progress (retry after %s)", e.RetryAfter)
}

// Is reports whether target is [ErrInProgress].
func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }

// StoreError reports a failed store operation. errors.Is(err, [ErrStore]) holds for it.
// Unwrap returns the underlying error (an SDK error for the DynamoDB store).
type StoreError struct {
	// Op names the operation: "claim", "get", "complete", "release", "extend",
	// "checkpoint", or [OpCommit]. What it says of the handler:
	//   - "claim": it did not run.
	//   - "complete": it ran, and its effects stand, but its outcome was not recorded.
	//     With idemstore.ErrNotCommitted, nothing committed, attached writes included,
	//     and the key was released, so a retry runs again.
	//   - [OpCommit]: it ran, and its attached writes may or may not have committed.
	Op string
	// Err is the underlying error.
	Err error
}

func (e *StoreError) Error() string { return fmt.Sprintf("idem: store: %s: %v", e.Op, e.Err) }

// Is reports whether target is [ErrStore].
func (e *StoreError) Is(target error) bool { return target == ErrStore }

// Unwrap returns the underlying error.
func (e *StoreError) Unwrap() error { return e.Err }

// OpCommit is the [StoreError] operation of a failed completion with attached writes
// ([Attach]) whose record could not be read back. The writes and the record may or may
// not have committed together. A retry after the lease ends learns which. It replays the
// result if they did, and runs again if they did not.
const OpCommit = "commit"

// FailedError is a remembered failure replayed from the store.
// errors.Is(err, [ErrFailed]) holds for it.
type FailedError struct {
	// Message is the text of the original error.
	Message string
}

func (e *FailedError) Error() string { return "idem: request failed before: " + e.Message }

// Is reports whether target is [ErrFailed].
func (e *FailedError) Is(target error) bool { return target == ErrFailed }

// AttachPanicError reports a panic in the store's completion of a record with attached
// writes ([Attach]), recovered by [Batch.Settle] in any of its store calls (the batched
// one, a resend alone, the resend without the result after [idemstore.ErrTooLarge]): in
// one of the writes (a handler's bug: a nil map, an index out of range), or in the store.
// Settle read the record back: it was not completed, and the key was released, so the
// request failed as if its handler had panicked. [Do] and [DoClaimed], which complete on
// the caller's goroutine, release the key the same way and panic again with its value, as
// a handler's panic goes on.
type AttachPanicError struct {
	// Value is the value passed to panic (nil: panic(nil) under GODEBUG=panicnil=1), or an
	// error saying the call ended with runtime.Goexit.
	Value any
	// Stack is the panicking goroutine's stack trace.
	Stack []byte
}

// Error describes the panic.
func (e *AttachPanicError) Error() string {
	return fmt.Sprintf("idem: the completion with attached writes panicked: %v", e.Value)
}

// Unwrap returns the panic value if it is an error, so errors.Is reaches it.
func (e *AttachPanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// errKind is what the guard does with a store's answer that matches a sentinel.
type errKind uint8

const (
	// kindNotFromStore: the guard's own answer, or the handler's. A store that returns it
	// anyway is treated as failing: wrapped in a [*StoreError], and a completion is resent.
	kindNotFromStore errKind = iota
	// kindStoreFailure: an error already wrapped in a [*StoreError]. It is kept as it is,
	// and a completion that failed with it is resent.
	kindStoreFailure
	// kindVerdict: the store decided about the write. The caller branches on the error as
	// it is, and resending the completion would get the same answer.
	kindVerdict
	// kindNothingCommitted: the store refused a completion as a whole. It is not resent:
	// the guard releases the key. The caller gets it inside a [*StoreError].
	kindNothingCommitted
)

// keptAsIs reports whether [storeErr] passes an error of kind k on unwrapped.
func (k errKind) keptAsIs() bool { return k == kindStoreFailure || k == kindVerdict }

// final reports whether a completion that failed with an error of kind k is not resent.
func (k errKind) final() bool { return k == kindVerdict || k == kindNothingCommitted }

// errorKinds gives the kind of every exported sentinel of packages idem and idemstore.
// An alias (idem.ErrLeaseLost is idemstore.ErrLeaseLost) has one row. A test fails when
// a sentinel has none. The table is never written.
var errorKinds = [...]struct {
	err  error
	kind errKind
}{
	{ErrStore, kindStoreFailure},

	{ErrLeaseLost, kindVerdict},
	{ErrConditionFailed, kindVerdict},
	{idemstore.ErrTooLarge, kindVerdict},
	{ErrIncompatibleRecord, kindVerdict},

	{idemstore.ErrNotCommitted, kindNothingCommitted},

	{ErrMissingKey, kindNotFromStore},
	{ErrInvalidKey, kindNotFromStore},
	{ErrPayloadMismatch, kindNotFromStore},
	{ErrInProgress, kindNotFromStore},
	{ErrFailed, kindNotFromStore},
	{ErrResultNotStored, kindNotFromStore},
	{ErrNoLease, kindNotFromStore},
	{ErrInvalidCheckpoint, kindNotFromStore},
	{ErrDoNotStore, kindNotFromStore},
	{ErrInvalidOption, kindNotFromStore},
	{idemstore.ErrInvalidAttach, kindNotFromStore},
}

// matchesKind reports whether err matches a sentinel whose kind satisfies want.
func matchesKind(err error, want func(errKind) bool) bool {
	for _, row := range errorKinds {
		if want(row.kind) && errors.Is(err, row.err) {
			return true
		}
	}
	return false
}

// storeErr wraps a store's error in a [*StoreError] for op. It keeps err as it is when a
// caller branches on it already (see [errKind.keptAsIs]).
func storeErr(op string, err error) error {
	if err == nil || matchesKind(err, errKind.keptAsIs) {
		return err
	}
	return &StoreError{Op: op, Err: err}
}

// resendable reports whether a completion that failed with err may succeed if sent again:
// a store failure, not a verdict (see [errKind.final]).
func resendable(err error) bool { return !matchesKind(err, errKind.final) }
