package idem

import (
	"context"
	"errors"
	"sync"
	"time"
)

// completionTimeout bounds the store calls that record a handler's outcome. They run on a
// context detached from the caller's cancellation: a handler that finished just as its
// context ended must still record its result, or the work would be repeated.
const completionTimeout = 10 * time.Second

// runOwned runs fn while this caller owns the lease on rec, then records the outcome.
func (g *Guard) runOwned(ctx context.Context, key, fp string, rec *Record, run func(context.Context) (any, error)) (err error) {
	start := g.now()
	l := &lease{g: g, key: key, token: rec.LeaseToken, checkpoint: rec.Checkpoint}
	hctx, stopHeartbeat := g.heartbeat(withLease(ctx, l), l)

	finished := false
	defer func() {
		if finished {
			return
		}
		// fn panicked: release the key so a retry can run, then let the panic go on.
		stopHeartbeat()
		g.release(ctx, l, start, errors.New("idem: handler panicked"))
	}()
	v, runErr := run(hctx)
	finished = true
	stopHeartbeat()

	if runErr != nil {
		if g.cfg.rememberFail != nil && g.cfg.rememberFail(runErr) {
			failed := g.completedRecord(rec, StatusFailed, []byte(runErr.Error()), EncodingError)
			if err := g.complete(ctx, l, failed, nil, start); err != nil {
				return errors.Join(runErr, err)
			}
			return runErr
		}
		g.release(ctx, l, start, runErr)
		return runErr
	}

	data, enc, encErr := g.cfg.encodeResult(v)
	if encErr != nil {
		g.cfg.logger.ErrorContext(ctx, "idem: result not encodable; completing without it", "key", key, "error", encErr)
	}
	done := g.completedRecord(rec, StatusCompleted, data, enc)
	attached := l.takeAttached()
	err = g.complete(ctx, l, done, attached, start)
	if errors.Is(err, ErrTooLarge) && done.Encoding != EncodingNone {
		// The store's item limit is lower than WithMaxResultSize allowed: keep the work
		// recorded as done, without the body, rather than repeating it.
		done.Data, done.Encoding = nil, EncodingNone
		err = g.complete(ctx, l, done, attached, start)
	}
	if errors.Is(err, ErrConditionFailed) {
		g.release(ctx, l, start, err)
	}
	return err
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

// complete stores the outcome, conditional on the lease token.
func (g *Guard) complete(ctx context.Context, l *lease, rec *Record, attached []any, start time.Time) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), completionTimeout)
	defer cancel()
	err := g.store.Complete(cctx, rec, attached)
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
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), completionTimeout)
	defer cancel()
	err := g.store.Release(cctx, l.key, l.token)
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

// heartbeat extends the lease every interval until the returned stop is called, and
// returns the handler's context, which it cancels with cause [ErrLeaseLost] if an extension
// finds the lease taken over. stop waits for the heartbeat goroutine to end.
func (g *Guard) heartbeat(ctx context.Context, l *lease) (context.Context, func()) {
	if g.cfg.heartbeat <= 0 {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(g.cfg.heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := g.now()
			end := now.Add(min(g.cfg.lease, g.cfg.maxLease))
			err := g.store.Extend(ctx, l.key, l.token, end)
			switch {
			case err == nil:
			case errors.Is(err, ErrLeaseLost):
				g.fire(ctx, g.cfg.hooks.OnLeaseLost, time.Time{}, Event{Key: l.key, Err: err})
				cancel(ErrLeaseLost)
				return
			default:
				g.storeFailed(ctx, l.key, "extend", now, storeErr("extend", err))
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() { close(done); wg.Wait(); cancel(nil) })
	}
}
