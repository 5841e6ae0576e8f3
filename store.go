package idem

import (
	"context"
	"time"
)

// Store persists idempotency records. Implementations must be safe for concurrent use and
// make every operation atomic per key; [Guard] relies on that for its guarantees.
//
// Errors: a store returns [ErrLeaseLost] (possibly wrapped) when a condition on the lease
// token fails, [ErrTooLarge] when a record exceeds its size limit, [ErrConditionFailed] when
// an attached write's condition fails, and wraps any other failure so that
// errors.Is(err, [ErrStore]) holds and the underlying error stays reachable.
type Store interface {
	// Claim writes rec (status [StatusInProgress]) unless a live record holds rec.Key at now.
	// A record is live unless it is absent, past its Expires, or in progress past its
	// LeaseExpires. On success claimed is true and prev is the record replaced, if any (an
	// expired lease's record carries the checkpoint to resume from). Otherwise claimed is
	// false and prev is the live record that holds the key.
	Claim(ctx context.Context, rec *Record, now time.Time) (prev *Record, claimed bool, err error)

	// Get reads the record for key with strong consistency. It returns nil and no error
	// when there is none. It does not interpret expiry: the caller does.
	Get(ctx context.Context, key string) (*Record, error)

	// Complete replaces the in-progress record rec.Key with rec (status [StatusCompleted]
	// or [StatusFailed]) if its lease token still equals rec.LeaseToken, else returns
	// [ErrLeaseLost]. Attached writes (see [Attach]) commit atomically with it or not at
	// all; a store returns an error for attachments of a type it does not support.
	Complete(ctx context.Context, rec *Record, attached []any) error

	// Release deletes the record for key if its lease token equals token, else returns
	// [ErrLeaseLost].
	Release(ctx context.Context, key, token string) error

	// Extend moves the lease end of the in-progress record for key to leaseExpires if its
	// lease token equals token, else returns [ErrLeaseLost].
	Extend(ctx context.Context, key, token string, leaseExpires time.Time) error

	// SetCheckpoint records checkpoint on the in-progress record for key if its lease token
	// equals token, else returns [ErrLeaseLost].
	SetCheckpoint(ctx context.Context, key, token, checkpoint string) error
}
