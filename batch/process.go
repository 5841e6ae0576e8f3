package batch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/guardlink"
)

// process decides the outcome of item i of unit, in named steps: a key error fails it; an
// earlier duplicate in the unit answers it; too little time left holds it back; else it
// runs through the guard.
func (b *batch) process(ctx context.Context, unit []int, i int) {
	o, st := &b.out[i], &b.state[i]
	if err := b.items[i].Err; err != nil {
		b.fail(o, ReasonKey, fmt.Errorf("batch: key: %w", err))
		return
	}
	if j := b.earlierDuplicate(unit, i); j >= 0 {
		st.tried, st.dupOf = true, j
		if d := b.out[j]; d.Failed() {
			b.fail(o, ReasonDuplicateFailed, duplicateFailed(d))
		} else {
			o.Status = StatusDuplicate
		}
		return
	}
	if err := b.mayStart(ctx); err != nil {
		b.fail(o, ReasonNotStarted, err)
		return
	}
	start := b.e.clock.Now()
	replayed, ran, handlerErr, err := b.guarded(ctx, i)
	if b.e.cfg.waitFlight {
		replayed, ran, handlerErr, err = b.waitInFlight(ctx, i, replayed, ran, handlerErr, err)
	}
	o.Duration = b.e.clock.Now().Sub(start)
	st.tried = true
	switch {
	case err == nil && replayed, errors.Is(err, idem.ErrResultNotStored):
		// A completed key whose result was not stored is still done work: acknowledge it.
		o.Status = StatusReplayed
	case err == nil:
		o.Status = StatusRan
	case !ran && errors.Is(err, idem.ErrLeaseLost):
		// The batch's claims were settled, near the deadline, before this item started.
		st.tried = false
		b.fail(o, ReasonNotStarted, fmt.Errorf("%w: %w", ErrNotStarted, err))
	case !ran && ctx.Err() != nil && !errors.Is(err, idem.ErrInProgress):
		// The context ended between the deadline check and the claim. An item whose claim
		// met its key in flight elsewhere (and that waited for it, with WithWaitInFlight,
		// until ctx ended) failed for that key, as at its cut-off: ReasonInProgress.
		b.fail(o, ReasonNotStarted, fmt.Errorf("%w: %w", ErrNotStarted, err))
	default:
		b.fail(o, classify(err, handlerErr), err)
	}
}

// earlierDuplicate returns the index of an earlier item of unit whose outcome item i
// shares, or -1: same key, equal fingerprint (both nil counts as equal: validation is off),
// and an outcome that came from the guard rather than from being held back.
func (b *batch) earlierDuplicate(unit []int, i int) int {
	for _, j := range unit {
		if j >= i {
			break
		}
		ij, ii := &b.items[j], &b.items[i]
		if b.state[j].tried && ij.Key == ii.Key && bytes.Equal(ij.Fingerprint, ii.Fingerprint) {
			return j
		}
	}
	return -1
}

// mayStart returns a wrapped [ErrNotStarted] if ctx has ended or less than the margin is
// left before its deadline.
func (b *batch) mayStart(ctx context.Context) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrNotStarted, context.Cause(ctx))
	}
	if !b.hasDeadline {
		return nil
	}
	if left := b.deadline.Sub(b.e.clock.Now()); left <= 0 || left < b.margin {
		return fmt.Errorf("%w: %s left, margin %s", ErrNotStarted, left.Round(time.Millisecond), b.margin)
	}
	return nil
}

// guarded runs the handler for item i under its key. ran reports whether the handler ran,
// and handlerErr is what it returned, so that its error is told apart from the guard's. A
// panic in the handler is recovered as a [*PanicError]: the guard has released the key by
// then, and the rest of the batch goes on.
//
// Every call for the key shares the item's met ([idem.KeyMet]), which the batch's claim
// of the key shares too: once any of them met a record holding the key, none fails open.
// Every call is a batch's: the handler's [idem.OnRefused] is ignored on every path, and
// a key whose attached writes the store refused for good is released (see
// [guardlink.DoInBatch]).
func (b *batch) guarded(ctx context.Context, i int) (replayed, ran bool, handlerErr, err error) {
	defer func() {
		if v := recover(); v != nil {
			ran, err = true, &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	it := &b.items[i]
	req := idem.Request{Key: it.Key, Fingerprint: it.Fingerprint}
	run := func(ctx context.Context) error {
		ran = true
		handlerErr = b.run1(ctx, i)
		return handlerErr
	}
	if b.claims != nil && b.state[i].claim >= 0 {
		replayed, err = b.doClaimed(ctx, i, func(ctx context.Context) (struct{}, error) { return struct{}{}, run(ctx) })
		return replayed, ran, handlerErr, err
	}
	// A batch's call, which ignores idem.OnRefused as DoClaimed does: otherwise DoMet.
	replayed, err = guardlink.DoInBatch(ctx, b.e.guard, req, b.state[i].met, run)
	return replayed, ran, handlerErr, err
}

// waitInFlight waits, as [WithWaitInFlight] says, for item i's key while the guard's
// answer err says another run holds it: it polls the key through the guard (a claim
// attempt, which replays a completed run or takes over a key whose lease ended) until
// the answer is no longer in progress, or until the item's cut-off (the deadline less
// the margin) or ctx's end, when it returns the last in-progress answer. It returns the
// guard's answer as guarded does.
func (b *batch) waitInFlight(ctx context.Context, i int, replayed, ran bool, handlerErr, err error) (bool, bool, error, error) {
	if !b.hasDeadline {
		return replayed, ran, handlerErr, err
	}
	cutoff := b.deadline.Add(-b.margin)
	poll := WaitInFlightPoll
	for {
		var ip *idem.InProgressError
		if ran || !errors.As(err, &ip) {
			return replayed, ran, handlerErr, err
		}
		now := b.e.clock.Now()
		left := cutoff.Sub(now)
		if left <= 0 {
			return replayed, ran, handlerErr, err
		}
		pause := min(poll, left)
		if end := ip.LeaseExpires.Sub(now); end > 0 {
			pause = min(pause, end) // the first poll after the lease it met has ended
		}
		select {
		case <-ctx.Done():
			return replayed, ran, handlerErr, err
		case <-b.e.clock.After(pause):
		}
		poll = min(2*poll, WaitInFlightMaxPoll)
		if b.mayStart(ctx) != nil {
			return replayed, ran, handlerErr, err
		}
		// The batch's claim of the key (if any) met the other run and holds nothing:
		// the item claims, runs and records on its own from here, as idem.Do does, but
		// never fails open over the record its earlier calls met (guarded: a batch's DoMet).
		b.state[i].claim = -1
		var again error
		replayed, ran, handlerErr, again = b.guarded(ctx, i)
		if !ran && !errors.Is(again, idem.ErrInProgress) && ctx.Err() != nil {
			return replayed, ran, handlerErr, err // the context ended during the poll
		}
		err = again
	}
}

// classify names the reason for a failure of the guarded call.
func classify(err, handlerErr error) Reason {
	var pe *PanicError
	// The handler's own error, returned as it is, is compared by identity: it is no
	// sentinel.
	own := handlerErr != nil && err == handlerErr //nolint:errorlint // by identity
	switch {
	case errors.As(err, &pe):
		return ReasonPanic
	case own:
		return ReasonHandler
	case errors.Is(err, idem.ErrInProgress):
		return ReasonInProgress
	case errors.Is(err, idem.ErrPayloadMismatch):
		return ReasonPayloadMismatch
	case errors.Is(err, idem.ErrMissingKey), errors.Is(err, idem.ErrInvalidKey):
		return ReasonKey
	case errors.Is(err, idem.ErrLeaseLost):
		return ReasonLeaseLost
	case errors.Is(err, idem.ErrStore), errors.Is(err, idem.ErrIncompatibleRecord):
		return ReasonStore
	default: // idem.ErrFailed, idem.ErrConditionFailed: the handler's failure, told by the guard
		return ReasonHandler
	}
}

// groupStopped is the error of an item of an ordered group held back after failed, the
// first failure of its group.
func groupStopped(failed Outcome) error {
	return fmt.Errorf("%w: item %s: %w", ErrGroupStopped, failed.ID, failed.Err)
}

// duplicateFailed is the error of an item that shares the failure of d, an earlier item of
// the batch with its key and fingerprint.
func duplicateFailed(d Outcome) error {
	return fmt.Errorf("%w: item %s: %w", ErrDuplicateFailed, d.ID, d.Err)
}
