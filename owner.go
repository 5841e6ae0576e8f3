package idem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem/idemstore"
)

// completionTimeout bounds the store calls that record a handler's outcome. They run on a
// context detached from the caller's cancellation: a handler that finished just as its
// context ended must still record its result, or the work would be repeated.
const completionTimeout = 10 * time.Second

// settlement is what running a handler under a lease produced, before it is recorded.
type settlement struct {
	l        *lease
	start    time.Time
	done     *idemstore.Record // the completion to write; nil to release the key
	attached []any             // writes to commit with done
	value    any               // the handler's result
	runErr   error             // the handler's error, returned to the caller as is
}

// runOwned runs fn while this caller owns the lease on rec, claimed at claimedAt, then
// records the outcome. It returns fn's result and the caller's error.
// If left is not nil, it is set to the record the outcome left when it was recorded.
func (g *Guard) runOwned(ctx context.Context, rec *idemstore.Record, claimedAt time.Time, run func(context.Context) (any, error), left **idemstore.Record) (any, error) {
	s := g.runHandler(ctx, rec, claimedAt, run)
	recorded, err := g.settleRecorded(ctx, s)
	if left != nil {
		*left = recorded
	}
	return s.value, err
}

// runHandler runs fn under the lease on rec, claimed at claimedAt, with the lease watchdog
// (see [Guard.watch]), and decides what to record. If fn panics, the key is released and
// the panic goes on.
func (g *Guard) runHandler(ctx context.Context, rec *idemstore.Record, claimedAt time.Time, run func(context.Context) (any, error)) settlement {
	start := g.hookStart()
	l := &lease{g: g, key: rec.Key, token: rec.LeaseToken, end: rec.LeaseExpires, checkpoint: rec.Checkpoint, cpSeq: rec.CheckpointSeq}
	hctx, stopWatch := g.watch(withLease(ctx, l), l, rec.Expires, claimedAt)

	finished := false
	defer func() {
		if finished {
			return
		}
		stopWatch()
		g.release(ctx, l, start, errors.New("idem: handler panicked"))
	}()
	v, runErr := run(hctx)
	finished = true
	stopWatch()
	attached := l.takeAttached() // closes the lease to attachments, whatever the outcome

	s := settlement{l: l, start: start, value: v, runErr: runErr}
	if runErr != nil {
		if g.cfg.rememberFail != nil && !errors.Is(runErr, ErrDoNotStore) && g.cfg.rememberFail(runErr) {
			s.done = g.completedRecord(rec, l, idemstore.StatusFailed, []byte(runErr.Error()), idemstore.EncodingError)
		}
		return s // attached writes of a failed handler never commit
	}
	data, enc, encErr := g.cfg.encodeResult(v)
	if encErr != nil {
		g.cfg.logger.ErrorContext(ctx, "idem: result not encodable; completing without it", "key", rec.Key, "error", encErr)
	}
	s.done = g.completedRecord(rec, l, idemstore.StatusCompleted, data, enc)
	s.attached = attached
	return s
}

// settleRecorded records s with single-item store calls. It returns the record the
// outcome left (s.done when it was recorded; nil when the key was released or recording
// it failed) and the caller's error.
func (g *Guard) settleRecorded(ctx context.Context, s settlement) (*idemstore.Record, error) {
	if s.done == nil {
		g.release(ctx, s.l, s.start, s.runErr)
		return nil, s.runErr
	}
	recorded, err := g.record(ctx, s, g.complete(ctx, s))
	if err != nil {
		return nil, callerErr(s, err)
	}
	return recorded, callerErr(s, nil)
}

// completed interprets the outcome err of writing s.done and returns the record stored
// (see [Guard.record]) and the caller's error.
func (g *Guard) completed(ctx context.Context, s settlement, err error) (*idemstore.Record, error) {
	recorded, err := g.record(ctx, s, err)
	return recorded, callerErr(s, err)
}

// callerErr returns the error the caller of a run whose outcome s was recorded with err
// (nil: recorded) gets: err, or for a remembered failure the handler's error with it.
func callerErr(s settlement, err error) error {
	if s.runErr != nil { // a remembered failure
		if err != nil {
			return errors.Join(s.runErr, err)
		}
		return s.runErr
	}
	return err
}

// record interprets the outcome err of writing s.done and returns the record stored and
// the error of recording it: s.done, or when the store refused it as too large a copy of
// it without the body, and nil when stored. It never changes s.done, which batch
// duplicates may be replaying meanwhile (see [Batch.Settle]).
func (g *Guard) record(ctx context.Context, s settlement, err error) (*idemstore.Record, error) {
	err = g.completeResult(ctx, s.l, s.done, s.attached, s.start, err)
	if errors.Is(err, idemstore.ErrTooLarge) && s.done.Encoding != idemstore.EncodingNone {
		// The store's item limit is lower than WithMaxResultSize allowed: keep the work
		// recorded as done, without the body, rather than repeating it.
		bare := *s.done
		bare.Data, bare.Encoding = nil, idemstore.EncodingNone
		s.done = &bare
		err = g.completeResult(ctx, s.l, s.done, s.attached, s.start, g.complete(ctx, s))
	}
	if errors.Is(err, ErrConditionFailed) || errors.Is(err, idemstore.ErrNotCommitted) {
		// Nothing committed, attached writes included: a retry may run again. Releasing
		// also fences off an attempt of ours still in flight at the store; if one landed
		// first, the release finds the record completed, and so did we.
		switch rerr := g.releaseUncommitted(ctx, s); {
		case rerr == errCompletedAfterAll:
			err = nil
		case rerr != nil:
			// The release that fences off an attempt of ours still in flight failed: that
			// attempt may yet commit, so "nothing committed" is no longer known.
			err = &StoreError{Op: OpCommit, Err: fmt.Errorf("idem: the release after %v failed: %w", err, rerr)} // %v: no longer ErrNotCommitted
		}
	}
	return s.done, err
}

// Retries of a completion that failed with a store error.
const (
	// completeAttempts is how many times a completion is sent when ctx has no deadline.
	completeAttempts = 3
	// completeMaxAttempts bounds the attempts when ctx has a deadline.
	completeMaxAttempts = 6
	// completeBackoff is the wait before the second attempt; each later wait doubles.
	completeBackoff = 50 * time.Millisecond
	// completeDeadlineMargin is the time a retry leaves before ctx's deadline, for the
	// attempt itself and for answering the caller.
	completeDeadlineMargin = 500 * time.Millisecond
)

// complete writes s.done and its attached writes and returns the store's answer. A store
// failure (not a verdict such as a lost lease, a failed condition, a record too large or a
// transaction that committed nothing) is sent again after a short backoff, while ctx's
// deadline leaves time for it (completeAttempts in all without a deadline): the completion
// is conditional on the lease token, and a store completes a record already completed under
// that token without committing anything twice, so a resend is safe. If every attempt
// fails, [Guard.resolveComplete] reads what happened.
func (g *Guard) complete(ctx context.Context, s settlement) error {
	cctx, cancel := detached(ctx)
	defer cancel()
	wait := completeBackoff
	for attempt := 1; ; attempt++ {
		err := g.store.Complete(cctx, s.done, s.attached)
		if err == nil || !resendable(err) {
			return err
		}
		if !g.mayRetryComplete(ctx, attempt, wait) {
			return g.resolveComplete(ctx, s, err)
		}
		select {
		case <-cctx.Done():
			return g.resolveComplete(ctx, s, err)
		case <-g.cfg.clock.After(wait):
		}
		wait *= 2
	}
}

// mayRetryComplete reports whether a completion that failed attempt times may be sent again
// after waiting wait: while ctx's deadline, read on the guard's clock as the lease is,
// leaves completeDeadlineMargin after the wait; without a deadline, up to completeAttempts.
func (g *Guard) mayRetryComplete(ctx context.Context, attempt int, wait time.Duration) bool {
	dl, ok := ctx.Deadline()
	if !ok {
		return attempt < completeAttempts
	}
	return attempt < completeMaxAttempts && g.now().Add(wait+completeDeadlineMargin).Before(dl)
}

// resolveComplete decides, with one strongly consistent read, what a completion whose
// every attempt failed with err left behind. If the read fails too and writes were
// attached, the error is a [*StoreError] with Op [OpCommit]: they may or may not have
// committed. The record completed under our token: an
// attempt landed and its answer was lost, so the completion succeeded. The record still in
// progress under our token, with writes attached: nothing committed, so the caller gets an
// error wrapping [idemstore.ErrNotCommitted] and [Guard.completed] releases the key. Otherwise (no
// attachments, a failed read, another owner): err, and the key stays as it is.
func (g *Guard) resolveComplete(ctx context.Context, s settlement, err error) error {
	cctx, cancel := detached(ctx)
	cur, gerr := g.store.Get(cctx, s.done.Key)
	cancel()
	if gerr != nil || cur == nil || cur.LeaseToken != s.done.LeaseToken {
		if len(s.attached) > 0 {
			// Whether the transaction committed is unknown: neither "it ran" nor "nothing
			// happened" may be told.
			var se *StoreError
			if errors.As(err, &se) {
				err = se.Err
			}
			return &StoreError{Op: OpCommit, Err: err}
		}
		return err
	}
	switch {
	case cur.Status == s.done.Status:
		return nil
	case cur.Status == idemstore.StatusInProgress && len(s.attached) > 0:
		var se *StoreError
		if errors.As(err, &se) && se.Op == "complete" {
			err = se.Err // one StoreError around the cause is enough
		}
		return &StoreError{Op: "complete", Err: fmt.Errorf("%w: %w", idemstore.ErrNotCommitted, err)}
	}
	return err
}

// detached returns a context for recording an outcome: it keeps ctx's values but not its
// cancellation, bounded by completionTimeout.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), completionTimeout)
}

// completedRecord returns the record that completes the claim rec under the lease l. It
// carries the lease's last checkpoint and the number of its last checkpoint write, which
// the store keeps anyway, so that the record is what will be stored (a store may need its
// size).
func (g *Guard) completedRecord(rec *idemstore.Record, l *lease, status idemstore.Status, data []byte, enc string) *idemstore.Record {
	checkpoint, seq := l.lastCheckpoint()
	return &idemstore.Record{
		Key:           rec.Key,
		Status:        status,
		Expires:       g.now().Add(g.cfg.expiry),
		Fingerprint:   rec.Fingerprint,
		Data:          data,
		Encoding:      enc,
		LeaseToken:    rec.LeaseToken,
		Checkpoint:    checkpoint,
		CheckpointSeq: seq,
		Version:       idemstore.SchemaVersion,
	}
}

// completeResult interprets the store's answer err to completing rec: hooks, logs, and
// the error for the caller.
func (g *Guard) completeResult(ctx context.Context, l *lease, rec *idemstore.Record, attached []any, start time.Time, err error) error {
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
	case errors.Is(err, ErrConditionFailed), errors.Is(err, idemstore.ErrTooLarge):
		return err
	default:
		err = storeErr("complete", err)
		g.storeFailed(ctx, l.key, "complete", start, err)
		if errors.Is(err, idemstore.ErrNotCommitted) {
			g.cfg.logger.WarnContext(ctx, "idem: completion not committed; releasing the key", "key", l.key, "error", err)
		} else {
			g.cfg.logger.ErrorContext(ctx, "idem: completion failed; the key stays in progress until its lease ends", "key", l.key, "error", err)
		}
		return err
	}
}

// releaseUncommitted releases the key of a completion that committed nothing. It returns
// nil when the key was released (fencing off any attempt of ours still in flight at the
// store), errCompletedAfterAll when the record turned out completed under our token (such
// an attempt landed before the release), and the release's error when it failed, which
// leaves an attempt in flight free to commit.
func (g *Guard) releaseUncommitted(ctx context.Context, s settlement) error {
	cctx, cancel := detached(ctx)
	defer cancel()
	err := g.store.Release(cctx, s.l.key, s.l.token, g.now())
	if errors.Is(err, ErrLeaseLost) {
		cur, gerr := g.store.Get(cctx, s.l.key)
		if gerr == nil && cur != nil && cur.LeaseToken == s.done.LeaseToken && cur.Status == s.done.Status {
			g.cache.put(s.done)
			g.fire(ctx, g.cfg.hooks.OnCompleted, s.start, Event{Key: s.l.key})
			return errCompletedAfterAll
		}
	}
	g.released(ctx, s.l, s.start, idemstore.ErrNotCommitted, err)
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		return err
	}
	return nil
}

// errCompletedAfterAll is releaseUncommitted's answer for a completion that committed after
// all.
var errCompletedAfterAll = errors.New("idem: completed after all")

// release gives up the key so a retry runs again (the store keeps the record as a
// tombstone: see [idemstore.Store]). Failing to release is logged, not
// returned: the caller's error is the handler's, and the lease ends on its own.
func (g *Guard) release(ctx context.Context, l *lease, start time.Time, cause error) {
	cctx, cancel := detached(ctx)
	defer cancel()
	g.released(ctx, l, start, cause, g.store.Release(cctx, l.key, l.token, g.now()))
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
