package idem

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// errLeaseRanOut is the cause of a handler context ended by the lease watchdog: the lease
// last confirmed came within the margin of its end.
var errLeaseRanOut = fmt.Errorf("%w: the lease came within the margin of its end", ErrLeaseLost)

// watch returns the handler's context for the lease l, claimed at claimedAt, and a stop
// function that the owner calls when the handler returns. stop waits for the watchdog's
// goroutines. The handler's context never outlives its lease. It is cancelled, with a
// cause wrapping [ErrLeaseLost]:
//
//   - once the lease end last confirmed (at the claim, or by an extension) less the lease
//     margin has come: the earliest moment a caller whose clock runs ahead of the owner's
//     by the margin may take the key over. If that moment has passed already when the
//     handler starts (a slow claim, a batch request started late), its context has ended
//     before it starts.
//   - with [WithHeartbeat], when an extension finds the lease taken over. Beats extend the
//     lease every interval, counted from the claim.
//
// Only when neither is needed does watch start nothing: no heartbeat, and a context
// deadline that the lease outlasts by the margin (the context ends first, as in Lambda
// without [WithMaxLease] below the timeout).
func (g *Guard) watch(ctx context.Context, l *lease, expires, claimedAt time.Time) (context.Context, func()) {
	lossAt := l.confirmedEnd().Add(-g.cfg.leaseMargin)
	if dl, ok := ctx.Deadline(); ok && g.cfg.heartbeat <= 0 && !lossAt.Before(dl) {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	if !g.now().Before(lossAt) {
		g.leaseRanOut(ctx, l, cancel)
		return ctx, func() { cancel(nil) }
	}
	// The watchdog runs on its own context, which stop ends first, so a hung extension never
	// holds up the completion.
	watchCtx, stopWatch := context.WithCancel(ctx)
	w := &watchdog{g: g, l: l, expires: expires, ctx: ctx, watchCtx: watchCtx, cancel: cancel}
	var next time.Time // the first beat, counted from the claim; none without a heartbeat
	if g.cfg.heartbeat > 0 {
		next = claimedAt.Add(g.cfg.heartbeat)
		w.results = make(chan extension, 1)
	}
	w.wg.Add(1)
	go w.run(next)
	return ctx, func() { stopWatch(); w.wg.Wait(); cancel(nil) } // each step may repeat
}

// watchdog is one handler's lease watchdog, with its heartbeat if any.
type watchdog struct {
	g        *Guard
	l        *lease
	expires  time.Time // the record's expiry: no lease may end after it
	ctx      context.Context
	watchCtx context.Context
	cancel   context.CancelCauseFunc
	results  chan extension // at most one extension is in flight; nil without a heartbeat
	wg       sync.WaitGroup
}

// extension is the outcome of one extension attempt.
type extension struct {
	start time.Time
	end   time.Time
	err   error
}

// run watches the lease until stopped or lost, beating at next and every interval after it
// (never, for a zero next). Each extension runs on a goroutine of its own, so that a slow or
// hung store call cannot keep the loop from cancelling the handler at the point of loss; a
// beat due while one is still in flight is skipped.
func (w *watchdog) run(next time.Time) {
	defer w.wg.Done()
	g := w.g
	beats := !next.IsZero()
	inFlight := false
	for {
		now := g.now()
		lossAt := w.l.confirmedEnd().Add(-g.cfg.leaseMargin)
		if !now.Before(lossAt) {
			if inFlight {
				select {
				case r := <-w.results: // it may have just confirmed a later end
					inFlight = false
					if !w.apply(r) {
						return
					}
					continue
				default:
				}
			}
			w.safely(func() { g.leaseRanOut(w.ctx, w.l, w.cancel) })
			return
		}
		wake := lossAt // one timer per wait, at the next beat or the point of loss
		if beats {
			if !now.Before(next) { // due, or overdue: a request that started late beats at once
				next = now.Add(g.cfg.heartbeat)
				if !inFlight { // else this beat is skipped
					inFlight = true
					w.wg.Add(1)
					go w.extend(now)
				}
			}
			if next.Before(wake) {
				wake = next
			}
		}
		select {
		case <-w.watchCtx.Done():
			return
		case <-g.cfg.clock.After(wake.Sub(now)):
		case r := <-w.results:
			inFlight = false
			if !w.apply(r) {
				return
			}
		}
	}
}

// extend makes one extension, begun at now.
func (w *watchdog) extend(now time.Time) {
	defer w.wg.Done()
	g := w.g
	// The lease a claim at now would get, and never less than the one a claim without a
	// deadline gets (the deadline may lie closer than WithLease); never shortened, since a
	// deadline further out only moves it later; and never past the record's expiry, after
	// which the record would count as absent.
	end := g.leaseEnd(w.ctx, now)
	if least := g.ownerLeaseEnd(now); least.After(end) {
		end = least
	}
	// Never below the end already confirmed: the handler's context may carry another
	// deadline than the claim's (DoClaimed's, say), and an extension that wrote an earlier
	// end would shorten the stored lease below the one the watchdog counts on.
	if confirmed := w.l.confirmedEnd(); confirmed.After(end) {
		end = confirmed
	}
	if end.After(w.expires) {
		end = w.expires
	}
	err := g.store.Extend(w.watchCtx, w.l.key, w.l.token, end)
	w.results <- extension{start: now, end: end, err: err}
}

// apply takes in the outcome of an extension and reports whether to go on watching.
func (w *watchdog) apply(r extension) bool {
	g, l := w.g, w.l
	switch {
	case r.err == nil:
		if r.end.After(l.confirmedEnd()) {
			l.setConfirmedEnd(r.end)
		}
		return true
	case w.watchCtx.Err() != nil:
		return false // stopped: the outcome is being recorded
	case errors.Is(r.err, ErrLeaseLost):
		defer w.cancel(ErrLeaseLost) // even if the hook panics
		w.safely(func() { g.leaseLost(w.ctx, l, time.Time{}, Event{Err: r.err}) })
		return false
	default:
		w.safely(func() { g.storeFailed(w.ctx, l.key, "extend", r.start, storeErr("extend", r.err)) })
		return true
	}
}

// safely calls f, which fires hooks (user code) from the watchdog's goroutine, and recovers
// a panic in it: no caller could recover it there, and the process would die. The panic is
// logged at ERROR with its stack, and the watchdog goes on watching the lease.
func (w *watchdog) safely(f func()) {
	defer func() {
		if v := recover(); v != nil {
			w.g.cfg.logger.ErrorContext(w.ctx, "idem: a hook panicked in the lease watchdog; recovered",
				"key", w.l.key, "panic", v, "stack", string(debug.Stack()))
		}
	}()
	f()
}

// leaseRanOut cancels the handler's context of l: its lease came within the margin of its
// end.
func (g *Guard) leaseRanOut(ctx context.Context, l *lease, cancel context.CancelCauseFunc) {
	defer cancel(errLeaseRanOut) // even if the hook panics
	g.leaseLost(ctx, l, time.Time{}, Event{Err: errLeaseRanOut})
	g.cfg.logger.WarnContext(ctx, "idem: the lease came within the margin of its end; cancelling the handler's context", "key", l.key)
}
