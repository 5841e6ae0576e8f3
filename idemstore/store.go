package idemstore

import (
	"context"
	"time"
)

// Store persists idempotency records. Implementations must be safe for concurrent use and
// make every operation atomic per key; the guard (package idem) relies on that for its guarantees. Every
// method must return once its context ends, as the AWS SDK does: the guard stops a lease
// extension still in flight by cancelling its context, and waits for it before it records
// the handler's outcome.
//
// Errors: a store returns [ErrLeaseLost] (possibly wrapped) when a condition on the lease
// token fails, [ErrTooLarge] when a record exceeds its size limit, [ErrConditionFailed] when
// an attached write's condition fails, [ErrNotCommitted] when a completion was refused as a
// whole, [ErrIncompatibleRecord] for an item it cannot decode, and any other failure as it
// is (see the package's error variables).
type Store interface {
	// Claim writes rec (status [StatusInProgress]) if the record for rec.Key at now lets it:
	// there is none, it is past its Expires, or it is in progress past its LeaseExpires, its
	// LeaseToken is not [ReleasedToken](rec.LeaseToken), and either it has no Checkpoint
	// and rec carries none, or rec carries its Checkpoint with its CheckpointSeq (an absent
	// number counts as 0) and its Fingerprint (both empty count as equal; see
	// [Record.ClaimableBy]). A store that keeps an empty checkpoint counts it as none. The
	// number refuses a late claim that carries an equal value recorded earlier (A, B, A:
	// the takeover claims of one owner share a token but carry different checkpoints, and
	// an earlier one may land after the record moved on). The fingerprint keeps a
	// checkpoint, which records effects of its own request, on that request's record: the
	// guard checks the fingerprint of the record its claim read, which may have been
	// replaced by another request's before the claim that carries the checkpoint applies.
	// A claim carrying no checkpoint takes over a lease-ended record without one whatever
	// its fingerprint. The token rule refuses a
	// claim whose owner has released the key since, which a network can deliver late (the
	// AWS SDK resends a request whose connection broke, and its first attempt may still
	// land after the resend's owner ran, failed and released): it must not hold the key
	// again for a lease nobody owns. A record with a checkpoint is thus taken over only by
	// a claim that carries the checkpoint into the new record, never lost with a claim's
	// answer: the guard claims again with the checkpoint of the lease-ended record a claim
	// returns. On success claimed is true and prev is the record replaced, if any and if
	// the store can return it in the same round trip (the guard does not rely on it;
	// pgstore returns nil). Otherwise claimed is false and prev is the record that refused
	// the claim: a live one (absent, expired or lease-ended records are not live), one
	// whose lease ended with another checkpoint than rec's (or another number of it, or
	// for another fingerprint), or the tombstone of the release of rec's own token. A
	// refused claim may return a record of rec's own token (an earlier attempt of it, or
	// of another claim of the same token, took effect): the guard then owns the key, and
	// resumes from the checkpoint that record holds.
	//
	// A Claim that learned a record holds the key but could not read all of it (a result
	// kept apart, in a second read that failed) or any of it (a read after a refused
	// write that failed) returns that record, without what it could not read (at least
	// its Key), as prev together with the error: the key is held, so the guard never runs
	// the handler unguarded (idem.WithFailOpen) and returns the error instead. With any
	// other error prev is nil.
	Claim(ctx context.Context, rec *Record, now time.Time) (prev *Record, claimed bool, err error)

	// Get reads the record for key with strong consistency. It returns nil and no error
	// when there is none. It does not interpret expiry: the caller does.
	Get(ctx context.Context, key string) (*Record, error)

	// Complete replaces the in-progress record rec.Key with rec (status [StatusCompleted]
	// or [StatusFailed]) if its lease token still equals rec.LeaseToken, else returns
	// [ErrLeaseLost]. The stored checkpoint is kept, whatever rec.Checkpoint says. Attached
	// writes (see idem.Attach) commit atomically with it or not at all; a store returns an
	// error for attachments of a type it does not support. Complete must be safe to send
	// again after a failure whose outcome is unknown: if the record is already completed
	// under rec.LeaseToken, it returns nil and commits no attached write a second time.
	Complete(ctx context.Context, rec *Record, attached []any) error

	// Release gives up the lease of token on the in-progress record for key at now (the
	// caller's clock, as Claim's now), so that a retry runs again. The record is kept,
	// never deleted, as a tombstone: its lease ended at now (its LeaseExpires set to now),
	// its lease token replaced by [ReleasedToken](token), everything else as it was (its
	// checkpoint, its Expires). A claim made from then on takes it over at once, and
	// resumes from the checkpoint if it has one. No late write of the releasing owner (a
	// completion still in flight) can land on it. A claim sent before the release and
	// delivered late (the AWS SDK resends a request whose connection broke, and its first
	// attempt may land after the resend's owner ran, failed and released) is refused rather
	// than hold the key again for a lease nobody owns: one of the releasing owner's own by
	// its token (see Claim), and any other, of an owner that took the key over and
	// released it in between, by its time: at its now the tombstone's lease has not ended,
	// provided its sender's clock does not run ahead of the releaser's. A late claim from a
	// clock ahead (within the lease margin) sent a now past the release's, and takes the
	// tombstone over: it holds the key, for nobody, until its own lease ends (a lease from
	// its now, on its clock); nothing runs twice, and the key is free after that.
	// A caller whose clock runs behind the releaser's may be refused for as long as the
	// skew, and is told the key is in progress until then, whatever its payload (the
	// guard recognises the tombstone, [Record.Released]; but one with a checkpoint keeps
	// the key for the released request's payload, as any record with a checkpoint does). A tombstone stays until its
	// Expires, as any record does. If token does not own an in-progress record for key
	// (another owner took it over, or it completed), Release changes nothing and returns
	// [ErrLeaseLost].
	Release(ctx context.Context, key, token string, now time.Time) error

	// Extend moves the lease end of the in-progress record for key to leaseExpires if its
	// lease token equals token, else returns [ErrLeaseLost]. It never lowers the stored
	// end: an extension to an end before the stored one (the first attempt of an earlier
	// extension, resent by a client and landing after a later one) changes nothing and
	// returns nil, since the lease is the caller's and ends later still. A store whose
	// write is conditional on the stored end treats a refused condition on the caller's
	// own in-progress record with a later end as success. The owner's watchdog counts on
	// the latest end it was told of, so a lowered end would let another caller take the
	// key over while the handler still runs.
	Extend(ctx context.Context, key, token string, leaseExpires time.Time) error

	// SetCheckpoint records checkpoint as checkpoint number seq ([Record.CheckpointSeq])
	// on the in-progress record for key, if its lease token equals token and its stored
	// number is below seq (an absent number counts as 0). A record that holds checkpoint
	// at seq already is left as it is and SetCheckpoint returns nil: that is a resend of
	// a write that landed. Anything else returns [ErrLeaseLost] and writes nothing:
	// another token, no in-progress record, or a higher stored number, which a write of
	// this token meets only when it arrives late, after a later checkpoint of the same
	// owner (the guard numbers an owner's checkpoints in order and sends one at a time,
	// so nobody waits for that answer). A checkpoint write thus never replaces one the
	// guard recorded after it, even when a client's resend applies first and its first
	// attempt lands afterwards; a condition on the stored value would not do, since
	// values repeat (A, B, A: a late B would land on the second A).
	SetCheckpoint(ctx context.Context, key, token, checkpoint string, seq int64) error
}

// AttachChecker is an optional extension of [Store] for stores that take writes attached
// to a completion (idem.Attach). idem.Attach calls CheckAttached with every write attached
// to the completion so far, the new ones last, and attaches nothing of the call if it
// returns an error: a value the store could not commit is refused at once, in the handler,
// rather than failing the completion after the handler's work is done. The error should
// name the offending value's type (and its position); idem.Attach wraps it with
// [ErrInvalidAttach]. CheckAttached is called with the lease's lock held: it must not block
// or do I/O, and must not keep attached. A store without it takes any value at Attach and
// judges it in [Store.Complete].
type AttachChecker interface {
	CheckAttached(attached []any) error
}

// ReleasedToken is the lease token a store writes into the record [Store.Release] keeps:
// not token, so that every write conditional on the releasing owner's token fails from
// then on, and a claim of token is refused by it ([Record.ClaimableBy]); recognisable in
// the table by its "released:" prefix.
func ReleasedToken(token string) string { return "released:" + token }

// BatchStore is an optional extension of [Store] for stores that can claim, complete and
// release many records in one round trip. The guard's batch claims
// (idem.Guard.Claim) use it when the store has it.
// Each method must have exactly the per-record semantics of its single-record counterpart;
// result i belongs to input i. A store may split large inputs into several round trips.
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
// one per record. The guard's batches ([BatchStore]) use it when the store has it: an
// outcome with attached writes then waits for idem.Batch.Settle, as one without does,
// instead of being completed at once in a transaction of its own.
type BatchAttachStore interface {
	BatchStore
	// CompleteManyAttached makes [Store.Complete] for each record recs[i] with its attached
	// writes attached[i] (empty for none); result i belongs to record i. Each record's
	// completion and its attached writes commit together or not at all, exactly as
	// Complete's; the writes of several records may commit in one transaction. One
	// record's failure (its lease lost, a condition of its own attached write, a record too
	// large) must not fail another: the store then commits the others without it. A failed
	// call (a store error, not a verdict) may have committed any of them, so the guard
	// sends each record alone again, with Complete, which must be safe as it says. recs
	// hold distinct keys.
	CompleteManyAttached(ctx context.Context, recs []*Record, attached [][]any) []error
}

// ClaimResult is the outcome of one claim of [BatchStore.ClaimMany], with the meaning of
// [Store.Claim]'s results: Prev and Err are both set for a claim that learned the refusing
// record but could not read all of it.
type ClaimResult struct {
	Prev    *Record
	Claimed bool
	Err     error
}
