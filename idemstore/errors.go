package idemstore

import "errors"

// The errors a [Store] returns for the outcomes the guard acts on. Package idem re-exports
// those a caller of idem.Do also meets (ErrLeaseLost, ErrConditionFailed,
// ErrIncompatibleRecord) as the same values, so errors.Is matches either name.
//
// A store returns any other failure as it is, wrapped with %w as it likes. The guard
// wraps it in an idem.StoreError naming the operation, and errors.As still reaches the
// cause.
var (
	// ErrLeaseLost means a write conditional on a lease token found another token (or no
	// in-progress record): another owner took the key over, or it completed.
	ErrLeaseLost = errors.New("idem: lease lost to another owner")
	// ErrTooLarge means the record itself exceeds the store's item size limit. The guard
	// then records the completion without the result. (An attached write over the limit
	// is [ErrNotCommitted].)
	ErrTooLarge = errors.New("idem: record too large for the store")
	// ErrConditionFailed means a write attached to a completion failed its own condition:
	// neither it nor the completion committed.
	ErrConditionFailed = errors.New("idem: attached write condition failed")
	// ErrNotCommitted means a completion committed nothing, its attached writes included.
	// The store refused it as a whole: a cancelled transaction, say, or an attached write
	// over the store's size limit. The guard releases the key, so a retry runs again.
	ErrNotCommitted = errors.New("idem: completion not committed")
	// ErrIncompatibleRecord means a stored item cannot be read as a [Record]: an unknown
	// schema version, status or encoding, or attributes of the wrong type.
	ErrIncompatibleRecord = errors.New("idem: incompatible record")
	// ErrInvalidAttach means idem.Attach was given a value the guard's store cannot commit
	// with a completion: of a type it does not take, malformed, or beyond its limits (see
	// [AttachChecker]). idem.Attach returns it at once, and attaches nothing of the call.
	ErrInvalidAttach = errors.New("idem: invalid attached write")
)

// Refusal is implemented by a store's error for an attached write it refused, such as
// pgstore's and dynamo's AttachedWriteError. The store returns it wrapped with
// [ErrConditionFailed] or [ErrNotCommitted]; nothing committed either way. The guard finds
// it with errors.As to log the refusal and to tell a permanent refusal from a retryable
// one, whatever the store. An error wrapping ErrConditionFailed without a Refusal counts
// as permanent.
type Refusal interface {
	error
	// Permanent reports whether the write was refused for good: sent again with the same
	// data, it meets the same refusal (a condition on a business item failed, a
	// constraint was violated). False for a refusal that says nothing of the business
	// condition and may not recur: a conflict with another transaction, throttling, a
	// broken connection, a cancelled context.
	Permanent() bool
	// Reason says what refused the write, for an operator's log: the store's reason code
	// or SQLSTATE and the write's position, table or constraint. It never holds a value
	// of the write or of a key.
	Reason() string
}
