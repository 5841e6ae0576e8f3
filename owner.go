package idem

import (
	"context"
	"errors"
	"time"
)

// completionTimeout bounds the store calls that record a handler's outcome. They run on a
// context detached from the caller's cancellation: a handler that finished just as its
// context ended must still record its result, or the work would be repeated.
const completionTimeout = 10 * time.Second

// settlement is what running a handler under a lease produced, before it is recorded.
type settlement struct {
	l        *lease
	start    time.Time
	done     *Record // the completion to write; nil to release the key
	attached []any   // writes to commit with done
	value    any     // the handler's result
	runErr   error   // the handler's error, returned to the caller as is
}

// runOwned runs fn while this caller owns the lease on rec, then records the outcome. It
// returns fn's result and the caller's error.
func (g *Guard) runOwned(ctx context.Context, rec *Record, run func(context.Context) (any, error)) (any, error) {
	s := g.runHandler(ctx, rec, run)
	return s.value, g.settle(ctx, s)
}

// runHandler runs fn under the lease on rec and decides what to record. If fn panics, the
// key is released and the panic goes on.
func (g *Guard) runHandler(ctx context.Context, rec *Record, run func(context.Context) (any, error)) settlement {
	start := g.hookStart()
	l := &lease{g: g, key: rec.Key, token: rec.LeaseToken, end: rec.LeaseExpires, checkpoint: rec.Checkpoint}
	hctx, stopHeartbeat := g.heartbeat(withLease(ctx, l), l, rec.Expires)

	finished := false
	defer func() {
		if finished {
			return
		}
		stopHeartbeat()
		g.release(ctx, l, start, errors.New("idem: handler panicked"))
	}()
	v, runErr := run(hctx)
	finished = true
	stopHeartbeat()
	attached := l.takeAttached() // closes the lease to attachments, whatever the outcome

	s := settlement{l: l, start: start, value: v, runErr: runErr}
	if runErr != nil {
		if g.cfg.rememberFail != nil && !errors.Is(runErr, ErrDoNotStore) && g.cfg.rememberFail(runErr) {
			s.done = g.completedRecord(rec, StatusFailed, []byte(runErr.Error()), EncodingError)
		}
		return s // attached writes of a failed handler never commit
	}
	data, enc, encErr := g.cfg.encodeResult(v)
	if encErr != nil {
		g.cfg.logger.ErrorContext(ctx, "idem: result not encodable; completing without it", "key", rec.Key, "error", encErr)
	}
	s.done = g.completedRecord(rec, StatusCompleted, data, enc)
	s.attached = attached
	return s
}

// settle records s with single-item store calls and returns the caller's error.
func (g *Guard) settle(ctx context.Context, s settlement) error {
	if s.done == nil {
		g.release(ctx, s.l, s.start, s.runErr)
		return s.runErr
	}
	cctx, cancel := detached(ctx)
	err := g.store.Complete(cctx, s.done, s.attached)
	cancel()
	return g.completed(ctx, s, err)
}

// completed interprets the outcome err of writing s.done and returns the caller's error.
func (g *Guard) completed(ctx context.Context, s settlement, err error) error {
	err = g.completeResult(ctx, s.l, s.done, s.attached, s.start, err)
	if errors.Is(err, ErrTooLarge) && s.done.Encoding != EncodingNone {
		// The store's item limit is lower than WithMaxResultSize allowed: keep the work
		// recorded as done, without the body, rather than repeating it.
		s.done.Data, s.done.Encoding = nil, EncodingNone
		cctx, cancel := detached(ctx)
		err = g.completeResult(ctx, s.l, s.done, s.attached, s.start, g.store.Complete(cctx, s.done, s.attached))
		cancel()
	}
	if errors.Is(err, ErrConditionFailed) || errors.Is(err, ErrNotCommitted) {
		// Nothing committed, attached writes included: a retry may run again.
		g.release(ctx, s.l, s.start, err)
	}
	if s.runErr != nil { // a remembered failure
		if err != nil {
			return errors.Join(s.runErr, err)
		}
		return s.runErr
	}
	return err
}

// detached returns a context for recording an outcome: it keeps ctx's values but not its
// cancellation, bounded by completionTimeout.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), completionTimeout)
}

func (g *Guard) completedRecord(rec *Record, status Status, data []byte, enc string) *Record {
	return &Record{
		Key:         rec.Key,
		Status:      status,
		Expires:     g.now().Add(g.cfg.expiry),
		Fingerprint: rec.Fingerprint,
		Data:        data,
		Encoding:    enc,
		LeaseToken:  rec.LeaseToken,
		Version:     SchemaVersion,
	}
}

// completeResult interprets the store's answer err to completing rec: hooks, logs, and
// the error for the caller.
func (g *Guard) completeResult(ctx context.Context, l *lease, rec *Record, attached []any, start time.Time, err error) error {
	switch {
	case err == nil:
		g.cache.put(rec)
		g.fire(ctx, g.cfg.hooks.OnCompleted, start, Event{Key: l.key})
		return nil
	case errors.Is(err, ErrLeaseLost):
		g.fire(ctx, g.cfg.hooks.OnLeaseLost, start, Event{Key: l.key, Err: err})
		if len(attached) == 0 {
			g.cfg.logger.ErrorContext(ctx, "idem: lease lost before completion; the handler's effects may have happened twice", "key", l.key)
		} else {
			g.cfg.logger.WarnContext(ctx, "idem: lease lost before completion; attached writes did not commit", "key", l.key)
		}
		return err
	case errors.Is(err, ErrConditionFailed), errors.Is(err, ErrTooLarge):
		return err
	default:
		err = storeErr("complete", err)
		g.storeFailed(ctx, l.key, "complete", start, err)
		g.cfg.logger.ErrorContext(ctx, "idem: completion failed; the key stays in progress until its lease ends", "key", l.key, "error", err)
		return err
	}
}

// release deletes the record so a retry runs again. Failing to release is logged, not
// returned: the caller's error is the handler's, and the lease ends on its own.
func (g *Guard) release(ctx context.Context, l *lease, start time.Time, cause error) {
	cctx, cancel := detached(ctx)
	defer cancel()
	g.released(ctx, l, start, cause, g.store.Release(cctx, l.key, l.token))
}

// released interprets the store's answer err to releasing l's key.
func (g *Guard) released(ctx context.Context, l *lease, start time.Time, cause, err error) {
	switch {
	case err == nil:
		g.fire(ctx, g.cfg.hooks.OnReleased, start, Event{Key: l.key, Err: cause})
	case errors.Is(err, ErrLeaseLost):
		g.fire(ctx, g.cfg.hooks.OnLeaseLost, start, Event{Key: l.key, Err: err})
	default:
		err = storeErr("release", err)
		g.storeFailed(ctx, l.key, "release", start, err)
		g.cfg.logger.WarnContext(ctx, "idem: release failed; the key stays in progress until its lease ends", "key", l.key, "error", err)
	}
}
