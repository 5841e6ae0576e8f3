package idem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// errLeaseRanOut is the cause of a handler context cancelled because no lease extension
// succeeded in time.
var errLeaseRanOut = fmt.Errorf("%w: no lease extension succeeded before the lease end less the margin", ErrLeaseLost)

// heartbeat extends the lease every interval until the returned stop is called, and returns
// the handler's context. It cancels that context with a cause wrapping [ErrLeaseLost] when
// an extension finds the lease taken over, and when no extension has succeeded by the lease
// end last confirmed (at the claim, or by an extension) less the lease margin: from then on
// a caller whose clock runs ahead by the margin may take the key over, so the handler must
// have been told to stop. stop waits for the heartbeat's goroutines to end.
func (g *Guard) heartbeat(ctx context.Context, l *lease, expires time.Time) (context.Context, func()) {
	if g.cfg.heartbeat <= 0 {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	// The beats run on their own context, which stop ends first, so a hung extension never
	// holds up the completion.
	beatCtx, stopBeats := context.WithCancel(ctx)
	b := &beats{g: g, l: l, expires: expires, ctx: ctx, beatCtx: beatCtx, cancel: cancel, results: make(chan extension, 1)}
	b.wg.Add(1)
	go b.run(g.now().Add(g.cfg.heartbeat)) // the first beat counts from now, not from the goroutine's start
	var once sync.Once
	return ctx, func() {
		once.Do(func() { stopBeats(); b.wg.Wait(); cancel(nil) })
	}
}

// beats is one handler's heartbeat.
type beats struct {
	g       *Guard
	l       *lease
	expires time.Time // the record's expiry: no lease may end after it
	ctx     context.Context
	beatCtx context.Context
	cancel  context.CancelCauseFunc
	results chan extension // at most one extension is in flight
	wg      sync.WaitGroup
}

// extension is the outcome of one extension attempt.
type extension struct {
	start time.Time
	end   time.Time
	err   error
}

// run beats, the first at next, until stopped or the lease is lost. Each extension runs on
// a goroutine of its own, so that a slow or hung store call cannot keep the loop from
// cancelling the handler at the point of loss; a beat due while one is still in flight is
// skipped.
func (b *beats) run(next time.Time) {
	defer b.wg.Done()
	g := b.g
	inFlight := false
	for {
		now := g.now()
		lossAt := b.l.confirmedEnd().Add(-g.cfg.leaseMargin)
		if !now.Before(lossAt) {
			if inFlight {
				select {
				case r := <-b.results: // it may have just confirmed a later end
					inFlight = false
					if !b.apply(r) {
						return
					}
					continue
				default:
				}
			}
			b.ranOut()
			return
		}
		if !now.Before(next) {
			next = now.Add(g.cfg.heartbeat)
			if !inFlight { // else this beat is skipped
				inFlight = true
				b.wg.Add(1)
				go b.extend(now)
			}
		}
		// One timer per wait, at the next beat or the point of loss, whichever comes first.
		wake := next
		if lossAt.Before(wake) {
			wake = lossAt
		}
		select {
		case <-b.beatCtx.Done():
			return
		case <-g.cfg.clock.After(wake.Sub(now)):
		case r := <-b.results:
			inFlight = false
			if !b.apply(r) {
				return
			}
		}
	}
}

// extend makes one extension, begun at now.
func (b *beats) extend(now time.Time) {
	defer b.wg.Done()
	g := b.g
	// Never shorten the lease (the deadline may lie further out than the default lease),
	// and never extend it past the record's expiry, after which the record would count as
	// absent.
	end := g.leaseEnd(b.ctx, now)
	if alt := now.Add(min(g.cfg.lease, g.cfg.maxLease)); alt.After(end) {
		end = alt
	}
	if end.After(b.expires) {
		end = b.expires
	}
	err := g.store.Extend(b.beatCtx, b.l.key, b.l.token, end)
	b.results <- extension{start: now, end: end, err: err}
}

// apply takes in the outcome of an extension and reports whether to go on beating.
func (b *beats) apply(r extension) bool {
	g, l := b.g, b.l
	switch {
	case r.err == nil:
		if r.end.After(l.confirmedEnd()) {
			l.setConfirmedEnd(r.end)
		}
		return true
	case b.beatCtx.Err() != nil:
		return false // stopped: the outcome is being recorded
	case errors.Is(r.err, ErrLeaseLost):
		g.fire(b.ctx, g.cfg.hooks.OnLeaseLost, time.Time{}, Event{Key: l.key, Err: r.err})
		b.cancel(ErrLeaseLost)
		return false
	default:
		g.storeFailed(b.ctx, l.key, "extend", r.start, storeErr("extend", r.err))
		return true
	}
}

// ranOut cancels the handler's context: no extension succeeded in time.
func (b *beats) ranOut() {
	g, l := b.g, b.l
	g.fire(b.ctx, g.cfg.hooks.OnLeaseLost, time.Time{}, Event{Key: l.key, Err: errLeaseRanOut})
	g.cfg.logger.WarnContext(b.ctx, "idem: no lease extension succeeded in time; cancelling the handler's context", "key", l.key)
	b.cancel(errLeaseRanOut)
}
