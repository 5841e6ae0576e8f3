package idem

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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

	// refused is the handler's choice of result for refused attached writes (OnRefused).
	refused func(context.Context, error) (any, bool)

	// cpSeq is the number of the last checkpoint write sent (see
	// [idemstore.Record.CheckpointSeq]), from the claimed record's on.
	cpSeq int64

	// handlerRan is how long the handler ran, for the hooks: set when it returns.
	handlerRan time.Duration
	// handlerDone is set when the handler returned or panicked, for the hooks: a release
	// of a lease whose handler never ran is no handler failure.
	handlerDone bool
	// completionPanic is the panic a store call completing the lease's record recovered
	// ([Guard.completionPanicked]): [Guard.settle] panics again with it.
	completionPanic *AttachPanicError

	// lostReported is set once [Hooks.OnLeaseLost] ran for the lease (see
	// [Guard.leaseLost]).
	lostReported atomic.Bool

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
