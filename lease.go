package idem

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/idemkit/idem/idemstore"
)

// lease is the owner's view of a claimed key. It is also the handler's context: the
// caller's context with the lease as a value, in one allocation.
type lease struct {
	context.Context // the caller's; set by withLease

	g     *Guard
	key   string
	token string

	mu         sync.Mutex
	end        time.Time // the lease end last confirmed: at the claim, then by each extension
	checkpoint string
	attached   []any
	closed     bool // the handler returned: later attachments would be lost

	// cpSeq is the number of the last checkpoint write sent (see
	// [idemstore.Record.CheckpointSeq]), from the claimed record's on.
	cpSeq int64

	// cpMu serializes the lease's checkpoint writes, so that they are sent in the order of
	// their numbers, one at a time; it is held across the store call, l.mu is not.
	cpMu sync.Mutex
}

type leaseCtxKey struct{}

// withLease returns the handler's context: ctx carrying l.
func withLease(ctx context.Context, l *lease) context.Context {
	l.Context = ctx
	return l
}

// Value returns the lease for its own key and defers every other key to the caller's
// context.
func (l *lease) Value(key any) any {
	if key == (leaseCtxKey{}) {
		return l
	}
	return l.Context.Value(key)
}

func leaseFrom(ctx context.Context) *lease {
	l, _ := ctx.Value(leaseCtxKey{}).(*lease)
	return l
}

// confirmedEnd returns the lease end last confirmed by the store.
func (l *lease) confirmedEnd() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end
}

func (l *lease) setConfirmedEnd(end time.Time) {
	l.mu.Lock()
	l.end = end
	l.mu.Unlock()
}

// lastCheckpoint returns the lease's last checkpoint and the number of its last checkpoint
// write sent.
func (l *lease) lastCheckpoint() (string, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checkpoint, l.cpSeq
}

func (l *lease) takeAttached() []any {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.attached
	l.attached, l.closed = nil, true
	return a
}

// MaxCheckpointLen is the longest checkpoint [Checkpoint] takes, in bytes: 1 KiB. A
// checkpoint is a progress marker ("payment_charged"), not state; it lives in the record
// for as long as the record does, every claim that takes the key over carries it, and on
// DynamoDB a replay's claim is billed one write unit per KB of the record it meets.
const MaxCheckpointLen = 1024

// errAttachLate is returned by [Attach] after the handler returned.
var errAttachLate = fmt.Errorf("%w: the handler already returned", ErrNoLease)

// Attach adds writes to the completion of the key whose handler ctx belongs to. They commit
// atomically with the completed record, conditional on the lease token, or not at all: a
// crash before completion, or a lost lease, means none of them lands. Attach is safe for
// concurrent use. Outside a guarded handler, or after the handler returned, it returns an
// error wrapping [ErrNoLease].
//
// The store defines the accepted values:
//
//   - The DynamoDB store takes its own write items: see its Attach helper, and package
//     dynamomem for an in-memory DynamoDB that takes them too.
//   - The in-memory store (package memstore) takes func() error.
//
// A store that says what it takes (idemstore.AttachChecker, as both do) has every value
// checked here, at once. A value it cannot commit is refused with an error wrapping
// [idemstore.ErrInvalidAttach] that names its type, and nothing of the call is attached.
//
// Attached writes land only when the handler completes. A new owner that takes over an
// ended lease starts with none: unlike a [Checkpoint], which is durable at once, they are
// not there after a crash. So an owner attaches every write its request needs, including
// those a previous owner attached. A checkpoint never marks an attached write as done (see
// [Checkpoint] and ExampleAttach_withCheckpoint).
func Attach(ctx context.Context, writes ...any) error {
	l := leaseFrom(ctx)
	if l == nil {
		return ErrNoLease
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errAttachLate
	}
	if c, ok := l.g.store.(idemstore.AttachChecker); ok && len(writes) > 0 {
		all := append(l.attached[:len(l.attached):len(l.attached)], writes...)
		if err := c.CheckAttached(all); err != nil {
			return fmt.Errorf("idem: Attach: %w: %w", idemstore.ErrInvalidAttach, err)
		}
		l.attached = all
		return nil
	}
	l.attached = append(l.attached, writes...)
	return nil
}

// Checkpoint records a progress marker (for example "payment_charged") on the key whose
// handler ctx belongs to, conditional on the lease token: one store round trip. If the
// handler crashes, the next owner reads the marker with [LastCheckpoint] after taking over
// the expired lease and can resume. If the handler returns an error or panics after a
// checkpoint, the key is released with the checkpoint kept (the record stays, its lease
// ended), so the retry runs at once and resumes from it too. A checkpoint lasts until the
// key completes or expires, through any number of takeovers: each new owner's claim carries
// it into its own record (one more claim round trip), and a request with another
// fingerprint gets [ErrPayloadMismatch] rather than take the key over.
//
// A checkpoint is durable at once; writes attached with [Attach] land only when the
// handler completes, and a crash or a lost lease loses them. So a checkpoint marks effects
// outside the completion (a card charged at a payment provider, an email sent), never an
// attached write: after a crash, the next owner would find such a checkpoint but not the
// write, and skip the write for good. Every owner attaches every write its request needs,
// whatever the checkpoint says (see ExampleAttach_withCheckpoint).
//
// A checkpoint is kept byte for byte on every store. It must be valid UTF-8 without NUL
// bytes, not empty, and at most [MaxCheckpointLen] bytes long; Checkpoint refuses any
// other with an error wrapping [ErrInvalidCheckpoint], and writes nothing.
//
// The checkpoints of one lease are numbered and sent one at a time (concurrent calls wait
// for each other), and a store never lets a checkpoint write replace one numbered after
// it: a write whose first attempt reaches the store late, after a client's resend
// succeeded and a later checkpoint was recorded, changes nothing, so the next owner
// resumes from the last checkpoint recorded, never an earlier one. Checkpoint returns
// [ErrLeaseLost] if the lease was taken over, an error wrapping [ErrStore] if the store
// failed, and an error outside a guarded handler.
func Checkpoint(ctx context.Context, checkpoint string) error {
	l := leaseFrom(ctx)
	if l == nil {
		return ErrNoLease
	}
	if err := checkCheckpoint(checkpoint); err != nil {
		return err
	}
	// Each write gets the next number, whether or not an earlier one failed: a write whose
	// outcome is unknown may still land, and must not land on a later one.
	l.cpMu.Lock()
	defer l.cpMu.Unlock()
	l.mu.Lock()
	l.cpSeq++
	seq := l.cpSeq
	l.mu.Unlock()
	start := l.g.now()
	err := l.g.store.SetCheckpoint(ctx, l.key, l.token, checkpoint, seq)
	if err != nil {
		err = storeErr("checkpoint", err)
		l.g.storeFailed(ctx, l.key, "checkpoint", start, err)
		return err
	}
	l.mu.Lock()
	l.checkpoint = checkpoint
	l.mu.Unlock()
	return nil
}

// checkCheckpoint refuses a checkpoint that some store would not keep exactly: DynamoDB
// and PostgreSQL take only valid UTF-8 (the SDK turns an invalid byte into U+FFFD, so the
// next owner would resume from a checkpoint nobody wrote; PostgreSQL fails every run), and
// PostgreSQL's text no NUL. An empty checkpoint is no checkpoint to some stores and an
// empty value to others. The length bound is the same on every store.
func checkCheckpoint(checkpoint string) error {
	switch {
	case checkpoint == "":
		return fmt.Errorf("%w: empty", ErrInvalidCheckpoint)
	case len(checkpoint) > MaxCheckpointLen:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidCheckpoint, len(checkpoint), MaxCheckpointLen)
	case !utf8.ValidString(checkpoint):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidCheckpoint)
	case strings.IndexByte(checkpoint, 0) >= 0:
		return fmt.Errorf("%w: holds a NUL byte", ErrInvalidCheckpoint)
	}
	return nil
}

// LastCheckpoint returns the last checkpoint recorded for the key whose handler ctx belongs
// to: this owner's latest, or, right after taking over a lease that ended (a crash, or a
// handler that failed after a checkpoint), the previous owner's. It returns "" when there
// is none or outside a guarded handler.
func LastCheckpoint(ctx context.Context) string {
	l := leaseFrom(ctx)
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checkpoint
}

// StoredKey returns the stored key of the request whose guarded handler ctx belongs to: the
// key its record is stored under, as [Guard.StoredKey] computes it
// ("<scope>.<operation>#<sha256 hex>", at most len(scope)+len(operation)+66 bytes). It is
// the request's identity inside the handler, the thing to derive downstream identifiers
// from: a payment provider's idempotency key, a row id, a deduplication id. It is the same
// in every run of the request: its retries, a new owner's after a crash, a batch's, a
// fail-open run's ([WithFailOpen]), and for every form of the key a wrapper accepts
// (packages lambdawrap and idemhttp unquote an RFC 8941 string and ignore its parameters,
// so "k-1", "k-1";v=1 and k-1 are one request); it
// differs between tenants, operations and scopes, and never reveals the caller's key. It
// returns "" outside a guarded handler, and in a run without a key (a wrapper's unguarded
// run).
func StoredKey(ctx context.Context) string {
	if l := leaseFrom(ctx); l != nil {
		return l.key
	}
	k, _ := ctx.Value(storedKeyCtxKey{}).(string)
	return k
}

type storedKeyCtxKey struct{}

// withStoredKey returns the context of a handler that runs without a lease (fail-open):
// its stored key for [StoredKey], and no lease, even inside another guarded handler, so
// that [Attach] and [Checkpoint] answer [ErrNoLease] rather than reach the enclosing
// run's record.
func withStoredKey(ctx context.Context, key string) context.Context {
	return &unleased{Context: ctx, key: key}
}

// unleased is the context of a run without a lease; see withStoredKey.
type unleased struct {
	context.Context
	key string
}

// Value hides any enclosing lease and answers the run's stored key.
func (u *unleased) Value(k any) any {
	switch k {
	case leaseCtxKey{}:
		return nil
	case storedKeyCtxKey{}:
		return u.key
	}
	return u.Context.Value(k)
}
