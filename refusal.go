package idem

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idem/idemstore"
)

// IsRefused reports whether err, from [Do] or a hook's event, says the store refused a
// guarded handler's attached writes ([Attach]) for good: it wraps [ErrConditionFailed],
// not [idemstore.ErrNotCommitted], and the store's [idemstore.Refusal] in it, if any, is
// permanent (a condition on a business item failed, a constraint was violated). Nothing
// committed, and a retry that sends the same writes meets the same refusal unless the data
// changed. A retryable refusal (a conflict with another transaction, throttling, a broken
// connection) is not: it wraps idemstore.ErrNotCommitted, or its Refusal says it is not
// permanent.
func IsRefused(err error) bool {
	if !errors.Is(err, ErrConditionFailed) || errors.Is(err, idemstore.ErrNotCommitted) {
		return false
	}
	var r idemstore.Refusal
	return !errors.As(err, &r) || r.Permanent()
}

// refusalReason returns what refused attached writes, for a log line: the store's
// [idemstore.Refusal] reason if err carries one, else the sentinel it wraps. It never
// returns the error's text, which may hold the write's values.
func refusalReason(err error) string {
	var r idemstore.Refusal
	switch {
	case errors.As(err, &r):
		return r.Reason()
	case errors.Is(err, idemstore.ErrNotCommitted):
		return "not committed"
	}
	return "condition failed"
}

// OnRefused sets, from inside a guarded handler, the result its key completes with if the
// store refuses the handler's attached writes for good ([IsRefused]), instead of releasing
// the key, so that a retry replays it rather than meet the same refusal. f gets the
// store's error and returns the result, of the type the handler returns, and true; or
// false to release the key, as without OnRefused. A retryable refusal never calls f.
//
// The result is stored only once nothing of the handler's can commit:
//   - The guard first releases the key, conditional on its lease, which fences off any
//     attempt of the completion still in flight (an SDK resend's first attempt landing
//     late).
//   - If such an attempt landed before the release, the key is completed with the
//     handler's own result and writes: f is not called, and [Do] returns that result.
//   - Else f is called, and the guard claims the key under a new lease and completes it
//     with f's result (two more store calls). Do returns f's result and no error.
//   - If another request claimed the key in between, or that completion fails, Do returns
//     f's result with the refusal or the store's error; a retry runs the handler again.
//
// OnRefused applies to [Do]; a batch ([Guard.Claim]) releases such a key. The last call
// wins. It is safe for concurrent use. Outside a guarded handler, or after the handler
// returned, it returns an error wrapping [ErrNoLease].
func OnRefused(ctx context.Context, f func(ctx context.Context, err error) (any, bool)) error {
	l := leaseFrom(ctx)
	if l == nil {
		return ErrNoLease
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errAttachLate
	}
	l.refused = f
	return nil
}

// takeRefused returns the handler's OnRefused function, or nil.
func (l *lease) takeRefused() func(context.Context, error) (any, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refused
}

// logRefusal logs, once, attached writes the store refused when completing key: the
// reason and whether it is permanent, never the error's text.
func (g *Guard) logRefusal(ctx context.Context, key string, err error) {
	g.cfg.logger.WarnContext(ctx, "idem: attached writes refused, nothing committed; releasing the key",
		"key", key, "reason", refusalReason(err), "permanent", IsRefused(err))
}

// recordRefusal completes s's key with the result f chooses for cause, a permanent
// refusal of s's attached writes, after [Guard.settle] released the key. It claims the key
// again with a new token (the release fenced off every attempt of the old one) and
// completes it without attached writes. It returns the result, the record stored (nil if
// none) and the caller's error: nil when stored; else cause, or the error that kept the
// result from being stored.
func (g *Guard) recordRefusal(ctx context.Context, s settlement, f func(context.Context, error) (any, bool), cause error) (any, *idemstore.Record, error) {
	v, ok := f(ctx, cause)
	if !ok {
		return s.value, nil, cause
	}
	data, enc, err := g.cfg.encodeResult(v)
	if err != nil {
		g.cfg.logger.ErrorContext(ctx, "idem: the result chosen for refused writes is not encodable; the key stays released", "key", s.l.key, "error", err)
		return v, nil, cause
	}
	cctx, cancel := detached(ctx) // a short lease: the completion follows at once
	defer cancel()
	rec, owned, err := g.claimOnce(cctx, s.l.key, newToken(), s.done.Fingerprint, g.now(), nil)
	if err != nil || !owned {
		// Another request holds the key, and runs the handler again; or the claim failed
		// (and, if it landed, the key waits for its lease to end).
		return v, nil, cause
	}
	l := &lease{g: g, key: rec.Key, token: rec.LeaseToken, end: rec.LeaseExpires, checkpoint: rec.Checkpoint, cpSeq: rec.CheckpointSeq}
	st := settlement{l: l, start: s.start, value: v}
	st.done = g.recordToComplete(rec, l, idemstore.StatusCompleted, data, enc)
	recorded, err := g.settleWritten(ctx, st, g.writeCompletion(ctx, st))
	if err != nil {
		return v, nil, err
	}
	g.cfg.logger.InfoContext(ctx, "idem: refused writes answered with the result chosen for them; stored", "key", s.l.key)
	return v, recorded, nil
}

// causeError is an error whose text names cause and which errors.As reaches cause
// through, but not errors.Is: the store's and the driver's typed errors stay reachable
// while the sentinels cause wraps (say [idemstore.ErrNotCommitted]) no longer hold.
type causeError struct {
	msg   string
	cause error
}

func (e *causeError) Error() string { return e.msg }

// As reports whether cause has an error matching target, and sets target to it.
func (e *causeError) As(target any) bool { return errors.As(e.cause, target) }

// releaseFailed is the error of a completion that committed nothing (cause) whose
// release, which fences off an attempt still in flight, failed with rerr.
func releaseFailed(cause, rerr error) error {
	return fmt.Errorf("%w: %w", &causeError{msg: fmt.Sprintf("idem: the release after %v failed", cause), cause: cause}, rerr)
}
