package idemstore

import (
	"context"
	"time"
)

// Store persists idempotency records. Implementations must be safe for concurrent use and
// make every operation atomic per key: the guard (package idem) relies on that.
//
// Every method must return once its context ends, as the AWS SDK does. The guard stops a
// lease extension still in flight by cancelling its context, and waits for it before it
// records the handler's outcome.
//
// Errors (see the package's error variables), possibly wrapped:
//   - [ErrLeaseLost]: a condition on the lease token failed;
//   - [ErrTooLarge]: a record exceeds the store's size limit;
//   - [ErrConditionFailed]: an attached write's condition failed;
//   - [ErrNotCommitted]: a completion was refused as a whole;
//   - [ErrIncompatibleRecord]: an item the store cannot decode;
//   - any other failure as it is.
type Store interface {
	// Claim writes rec, an in-progress record ([StatusInProgress]), if the record for
	// rec.Key at now lets it. That record lets the claim through if it is:
	//   - absent, or past its Expires;
	//   - in progress past its LeaseExpires, with a LeaseToken other than
	//     [ReleasedToken](rec.LeaseToken), and either no Checkpoint while rec carries
	//     none, or a Checkpoint rec carries with its CheckpointSeq and its Fingerprint.
	//
	// An absent CheckpointSeq counts as 0, and two empty fingerprints as equal. A store
	// that keeps an empty checkpoint counts it as none. [Record.ClaimableBy] is this
	// condition in Go. The package doc says why each rule is there.
	//
	// Results:
	//   - written: claimed is true. prev is the record replaced, if any and if the store
	//     can return it in the same round trip, else nil. The guard does not rely on it.
	//   - refused: claimed is false, and prev is the record that refused the claim. That
	//     is a live record (absent, expired and lease-ended ones are not live), a
	//     lease-ended one whose checkpoint, number or fingerprint rec does not carry, or
	//     the tombstone of the release of rec's own token.
	//   - refused by a record of rec's own token: an earlier attempt of a claim with that
	//     token took effect. The guard then owns the key, and resumes from the
	//     checkpoint that record holds.
	//   - an error, having learned that a record holds the key: prev is that record,
	//     without what could not be read, but with at least its Key. This happens when a
	//     second read (of a result kept apart) or the read after a refused write fails.
	//     The key is held, so the guard returns the error and never runs the handler
	//     unguarded (idem.WithFailOpen).
	//   - any other error: prev is nil.
	Claim(ctx context.Context, rec *Record, now time.Time) (prev *Record, claimed bool, err error)

	// Get reads the record for key with strong consistency. It returns nil and no error
	// when there is none. It does not interpret expiry: the caller does.
	Get(ctx context.Context, key string) (*Record, error)

	// Complete replaces the in-progress record rec.Key with rec ([StatusCompleted] or
	// [StatusFailed]) if its lease token still equals rec.LeaseToken. Else it returns
	// [ErrLeaseLost]. The stored checkpoint is kept, whatever rec.Checkpoint says.
	//
	// Attached writes (see idem.Attach) commit atomically with rec or not at all. A store
	// returns an error for attachments of a type it does not support.
	//
	// Complete must be safe to send again after a failure whose outcome is unknown. If
	// the record is already completed under rec.LeaseToken, it returns nil and commits
	// no attached write a second time.
	Complete(ctx context.Context, rec *Record, attached []any) error

	// Release gives up the lease of token on the in-progress record for key at now, so
	// that a retry runs again. now is the caller's clock, as Claim's now is.
	//
	// The record is kept as a tombstone, never deleted:
	//   - its LeaseExpires is set to now: its lease ended;
	//   - its lease token is replaced by [ReleasedToken](token);
	//   - everything else stays as it was, its checkpoint and its Expires included.
	//
	// A claim made from then on takes the tombstone over at once, and resumes from its
	// checkpoint if it has one. No late write of the releasing owner can land on it. A
	// late claim sent before the release is refused, so that it never holds the key
	// again for a lease nobody owns:
	//   - one of the releasing owner's own, by its token (see Claim);
	//   - any other (of an owner that took the key over and released it in between), by
	//     its time: at its now the tombstone's lease has not ended, provided its sender's
	//     clock does not run ahead of the releaser's.
	//
	// The package doc covers clocks ahead of or behind the releaser's. A tombstone stays
	// until its Expires, as any record does.
	//
	// If token does not own an in-progress record for key (another owner took it over,
	// or it completed), Release changes nothing and returns [ErrLeaseLost].
	Release(ctx context.Context, key, token string, now time.Time) error

	// Extend moves the lease end of the in-progress record for key to leaseExpires if its
	// lease token equals token. Else it returns [ErrLeaseLost].
	//
	// It never lowers the stored end. An extension to an end before the stored one
	// changes nothing and returns nil: it is the first attempt of an earlier extension,
	// resent by a client and landing after a later one, and the lease ends later still.
	// A store whose write is conditional on the stored end treats a refused condition on
	// the caller's own in-progress record with a later end as success. The package doc
	// says why.
	Extend(ctx context.Context, key, token string, leaseExpires time.Time) error

	// SetCheckpoint records checkpoint as checkpoint number seq ([Record.CheckpointSeq])
	// on the in-progress record for key. It does so if the record's lease token equals
	// token and its stored number is below seq (an absent number counts as 0).
	//   - The record holds checkpoint at seq already: it is left as it is, and
	//     SetCheckpoint returns nil. That is a resend of a write that landed.
	//   - Anything else returns [ErrLeaseLost] and writes nothing: another token, no
	//     in-progress record, or a higher stored number.
	//
	// A higher number means this write arrived late, after a later checkpoint of the same
	// owner. So a checkpoint write never replaces one the guard recorded after it. The
	// package doc says why the number, not the value, decides.
	SetCheckpoint(ctx context.Context, key, token, checkpoint string, seq int64) error
}

// AttachChecker is an optional extension of [Store] for stores that take writes attached
// to a completion (idem.Attach).
//
// idem.Attach calls CheckAttached with every write attached to the completion so far, the
// new ones last. If it returns an error, nothing of the call is attached: a value the
// store could not commit is refused at once, in the handler, rather than failing the
// completion after the work is done. The error should name the offending value's type
// and its position. idem.Attach wraps it with [ErrInvalidAttach].
//
// CheckAttached is called with the lease's lock held. It must not block or do I/O, and
// must not keep attached. A store without it takes any value at Attach and judges it in
// [Store.Complete].
type AttachChecker interface {
	CheckAttached(attached []any) error
}

// ReleasedToken is the lease token a store writes into the record [Store.Release] keeps.
// It is not token, so every write conditional on the releasing owner's token fails from
// then on, and a claim of token is refused by it ([Record.ClaimableBy]). Its "released:"
// prefix makes it recognisable in the table.
func ReleasedToken(token string) string { return "released:" + token }

// BatchStore is an optional extension of [Store] for stores that can claim, complete and
// release many records in one round trip. The guard's batch claims (idem.Guard.Claim) use
// it when the store has it.
//
// Each method must have exactly the per-record semantics of its single-record
// counterpart. Result i belongs to input i. A store may split large inputs into several
// round trips.
type BatchStore interface {
	Store
	// ClaimMany makes [Store.Claim] for each record. recs hold distinct keys.
	ClaimMany(ctx context.Context, recs []*Record, now time.Time) []ClaimResult
	// CompleteMany makes [Store.Complete], without attached writes, for each record.
	CompleteMany(ctx context.Context, recs []*Record) []error
	// ReleaseMany makes [Store.Release] for each key and its token at now.
	ReleaseMany(ctx context.Context, keys, tokens []string, now time.Time) []error
}

// BatchAttachStore is an optional extension of [BatchStore] for stores that can complete
// many records, each with its own attached writes (idem.Attach), in fewer round trips than
// one per record. The guard's batches use it when the store has it. An outcome with
// attached writes then waits for idem.Batch.Settle, as one without does, instead of
// completing at once in a transaction of its own.
type BatchAttachStore interface {
	BatchStore
	// CompleteManyAttached makes [Store.Complete] for each record recs[i] with its
	// attached writes attached[i] (empty for none). Result i belongs to record i. recs
	// hold distinct keys.
	//   - Each record's completion and its attached writes commit together or not at
	//     all, exactly as Complete's. The writes of several records may commit in one
	//     transaction.
	//   - One record's failure (its lease lost, a condition of its own attached write, a
	//     record too large) must not fail another: the store commits the others without it.
	//   - A failed call (a store error, not a verdict) may have committed any of them. The
	//     guard then sends each record alone again, with Complete, which must be safe as
	//     it says.
	CompleteManyAttached(ctx context.Context, recs []*Record, attached [][]any) []error
}

// ClaimResult is the outcome of one claim of [BatchStore.ClaimMany], with the meaning of
// [Store.Claim]'s results. Prev and Err are both set for a claim that learned the refusing
// record but could not read all of it.
type ClaimResult struct {
	Prev    *Record
	Claimed bool
	Err     error
}
