package idem

import (
	"bytes"
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
// The guard completes the key with f's result under the same lease, without the attached
// writes: one more completion, conditional as every completion is on the lease token and
// the record being in progress, then one read of the record. The key is never released in
// between, so no other request runs the handler meanwhile, and an attempt of the refused
// completion still in flight (an SDK resend's first attempt) cannot land after it.
//   - Stored: [Do] returns f's result and no error, and retries replay it.
//   - Such an attempt landed first: the record holds the handler's own result and writes,
//     and Do returns that result and no error (f was called, its result is not used).
//   - The lease was lost first: Do returns an error wrapping [ErrLeaseLost].
//   - Otherwise (the completion failed, or its record cannot be read back): whether the
//     handler's writes committed is not known, and Do returns a [*StoreError] with Op
//     [OpCommit]; the key stays in progress until its lease ends.
//
// None of these errors says IsRefused, which means nothing committed and the key released.
//
// OnRefused applies to [Do] and [DoMet] (whatever its [KeyMet] holds). In a batch
// ([Guard.Claim], [DoClaimed], and package batch's engine on every path) it is ignored and
// such a key is released, whatever the batch's size or path: DoClaimed returns the
// handler's result before [Batch.Settle] learns of the refusal. The last call wins. It is
// safe for concurrent use. Outside a guarded handler, or after the handler returned, it
// returns an error wrapping [ErrNoLease].
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
// reason and whether it is permanent, never the error's text. What follows (the key
// released, or the result chosen with [OnRefused] stored) is logged where it happens.
func (g *Guard) logRefusal(ctx context.Context, key string, err error) {
	g.cfg.logger.WarnContext(ctx, "idem: attached writes refused, nothing committed",
		"key", key, "reason", refusalReason(err), "permanent", IsRefused(err))
}

// refusedChoice is the handler's [OnRefused] function for one Do, and the result it chose
// once that result is the key's.
type refusedChoice struct {
	f      func(context.Context, error) (any, bool)
	value  any  // f's result
	stored bool // value is the key's result: the caller gets it
}

// completeRefused completes s's key with the result s.refused.f chooses for cause, a
// permanent refusal of s's attached writes, under the same lease and without attached
// writes. Like any completion it is conditional on the lease token and, in every store,
// on the record being in progress: an attempt of the refused completion still in flight
// (an SDK resend's first attempt) that lands first leaves it nothing to complete, and one
// that lands later finds the record completed. No other caller gets in between: the lease
// is held until the completion.
//
// ok is false when f declines, or its result cannot be encoded: the caller then releases
// the key. Otherwise it returns the record stored and the caller's error:
//   - the chosen result stored: the chosen record, nil, and s.refused holds the result;
//   - the record found completed under our token with the handler's result (such an
//     attempt landed first): s.done, nil; the handler's result stands;
//   - the lease lost: an error wrapping [ErrLeaseLost]; nothing of ours committed;
//   - otherwise (the completion failed, or the record cannot be read back or holds
//     neither result): a [*StoreError] with Op [OpCommit], as whether the handler's writes
//     committed is unknown.
//
// The errors keep cause reachable with errors.As, but not its sentinels: none says
// [IsRefused].
func (g *Guard) completeRefused(ctx context.Context, s settlement, cause error) (*idemstore.Record, bool, error) {
	v, ok := s.refused.f(ctx, cause)
	if !ok {
		return nil, false, nil
	}
	data, enc, err := g.cfg.encodeResult(v)
	if err != nil {
		g.cfg.logger.ErrorContext(ctx, "idem: the result chosen for refused writes is not encodable; releasing the key", "key", s.l.key, "error", err)
		return nil, false, nil
	}
	chosen := g.recordToComplete(s.done, s.l, idemstore.StatusCompleted, data, enc)
	st := s
	st.done, st.attached = chosen, nil
	werr := g.writeCompletion(ctx, st)
	after := &causeError{msg: fmt.Sprintf("idem: completing with the result chosen after %v", cause), cause: cause}
	if werr != nil {
		werr = g.reportCompletion(ctx, s.l, chosen, nil, s.start, werr)
		if errors.Is(werr, ErrLeaseLost) {
			return nil, true, fmt.Errorf("%w: %w", after, werr)
		}
		return nil, true, &StoreError{Op: OpCommit, Err: fmt.Errorf("%w: %w", after, werr)}
	}
	// The store answers nil for a record already completed under our token, whatever its
	// result: read which completion it holds.
	cctx, cancel := detached(ctx)
	cur, gerr := g.store.Get(cctx, s.l.key)
	cancel()
	switch {
	case gerr == nil && cur != nil && cur.LeaseToken == chosen.LeaseToken && cur.Status == chosen.Status &&
		cur.Encoding == chosen.Encoding && bytes.Equal(cur.Data, chosen.Data):
		s.refused.value, s.refused.stored = v, true
		g.cache.put(chosen)
		g.fire(ctx, g.cfg.hooks.OnCompleted, s.start, Event{Key: s.l.key, HandlerDuration: s.l.handlerRan})
		g.cfg.logger.InfoContext(ctx, "idem: refused writes answered with the result chosen for them; stored", "key", s.l.key)
		return chosen, true, nil
	case gerr == nil && cur != nil && cur.LeaseToken == s.done.LeaseToken && cur.Status == s.done.Status &&
		cur.Encoding == s.done.Encoding && bytes.Equal(cur.Data, s.done.Data):
		g.cache.put(s.done)
		g.fire(ctx, g.cfg.hooks.OnCompleted, s.start, Event{Key: s.l.key, HandlerDuration: s.l.handlerRan})
		return s.done, true, nil
	case gerr == nil:
		gerr = errors.New("the record holds neither the handler's result nor the one chosen")
	}
	err = fmt.Errorf("%w: reading the record back: %w", after, gerr)
	g.storeFailed(ctx, s.l.key, "complete", s.start, storeErr("complete", err))
	return nil, true, &StoreError{Op: OpCommit, Err: err}
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
