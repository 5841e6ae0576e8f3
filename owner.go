package idem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem/idemstore"
)

// The path of one request, from claim to settle, one step a line. guard.go holds steps 1
// to 3, this file the rest; batch.go the batch path.
//
//  1. claimOnce writes recordToClaim with one store Claim.
//  2. decideClaim reads the answer: owned, refused by a live record, or a takeover.
//  3. carryCheckpoint sets what a takeover claim carries; decideClaim claims again.
//  4. runOwned runs the owner's handler, then settles.
//  5. runHandler runs it and builds the settlement, with recordToComplete.
//  6. settle releases the key (releaseKey) or writes the record.
//  7. writeCompletion sends it, resends a store failure, and at last readBackCompletion;
//     a panicking send (an attached write's) is read back (completionPanicked), never resent.
//  8. settleWritten concludes and returns the caller's error (callerErr); a panic's outcome
//     is concluded as the handler's failure (concludePanicked).
//  9. concludeCompletion reports (reportCompletion); if nothing committed, releaseUncommitted.
//  10. releaseKey and releaseUncommitted report through reportRelease.
//
// A batch takes the same steps, with batch calls:
//   - Guard.Claim: steps 1 to 3 for every key, with one ClaimMany and decideClaim per key;
//     the record met per key (KeyMet) is shared by the key's requests, so none fails open
//     once one met it; decideClaim adds each record it meets to it before it claims again;
//   - doClaimed: step 5, then leaves the settlement pending for Batch.Settle;
//   - Batch.Settle: stamped dates each pending record's expiry from now, CompleteMany
//     sends them, then settleBatchWritten per key (steps 7 and 8); ReleaseMany and
//     reportRelease for the keys to release; at last it waits for the recordings an
//     overlapping Settle has under way.

// completionTimeout bounds the store calls that record a handler's outcome.
//
// They run on a context detached from the caller's cancellation. A handler that finished
// just as its context ended must still record its result, or the work would run again.
const completionTimeout = 10 * time.Second

// settlement is what running a handler under a lease produced, before it is recorded.
type settlement struct {
	l        *lease
	start    time.Time
	done     *idemstore.Record // the completion to write; nil to release the key
	attached []any             // writes to commit with done
	value    any               // the handler's result
	runErr   error             // the handler's error, returned to the caller as is
	run      *runHooks         // the run's OnRun context and OnRunEnd; nil if none
	refused  *refusedChoice    // the handler's OnRefused function, for Do; nil in a batch
}

// runOwned runs fn under the lease on rec, claimed at claimedAt, then settles the outcome.
// It returns fn's result (or the one fn chose with [OnRefused], if stored) and the
// caller's error. If left is not nil, *left is set to the record the outcome left (nil if
// none). inBatch says the call is a batch's: OnRefused is then ignored, and the key of
// attached writes refused for good is released, as in every batch path.
func (g *Guard) runOwned(ctx context.Context, rec *idemstore.Record, claimedAt time.Time, run func(context.Context) (any, error), left **idemstore.Record, inBatch bool) (any, error) {
	s := g.runHooked(ctx, rec, claimedAt, run)
	if f := s.l.takeRefused(); f != nil && !inBatch {
		s.refused = &refusedChoice{f: f}
	}
	recorded, err := g.settle(ctx, s)
	if s.refused != nil && s.refused.stored {
		s.value = s.refused.value
	}
	if left != nil {
		*left = recorded
	}
	return s.value, err
}

// runHandler runs fn under the lease on rec, claimed at claimedAt, and decides what to
// record. The lease watchdog runs meanwhile (see [Guard.watch]).
//
// The settlement holds the record to write ([Guard.recordToComplete]):
//   - fn succeeded: the result, completed, with the writes fn attached;
//   - fn failed with an error [WithRememberFailures] calls permanent: the failure;
//   - fn failed otherwise: none, and the key is to be released.
//
// A failed handler's attached writes never commit. If fn panics, the key is released and
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
		l.handlerDone = true
		g.releaseKey(ctx, l, start, errors.New("idem: handler panicked"))
	}()
	v, runErr := run(hctx)
	finished = true
	stopWatch()
	attached := l.takeAttached() // closes the lease to attachments, whatever the outcome
	// For the hooks; the watchdog has stopped.
	l.handlerRan, l.handlerDone = g.sinceStart(start), true

	s := settlement{l: l, start: start, value: v, runErr: runErr}
	if runErr != nil {
		if g.cfg.rememberFail != nil && !errors.Is(runErr, ErrDoNotStore) && g.cfg.rememberFail(runErr) {
			s.done = g.recordToComplete(rec, l, idemstore.StatusFailed, []byte(runErr.Error()), idemstore.EncodingError)
		}
		return s // attached writes of a failed handler never commit
	}
	data, enc, encErr := g.cfg.encodeResult(v)
	if encErr != nil {
		g.cfg.logger.ErrorContext(ctx, "idem: result not encodable; completing without it", "key", rec.Key, "error", encErr)
	}
	s.done = g.recordToComplete(rec, l, idemstore.StatusCompleted, data, enc)
	s.attached = attached
	return s
}

// recordToComplete returns the record that completes the claim rec under the lease l.
//
// It carries the lease's last checkpoint and its number. The store keeps them anyway, but
// the record must be what will be stored: a store may need its size.
func (g *Guard) recordToComplete(rec *idemstore.Record, l *lease, status idemstore.Status, data []byte, enc string) *idemstore.Record {
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

// settle records s with single-record store calls: it releases the key, or writes s.done
// ([Guard.writeCompletion]) and concludes ([Guard.settleWritten]).
// It returns the record the outcome left (nil when released or not recorded) and the
// caller's error.
//
// If a store call of the completion panics (in an attached write, a handler's bug), the
// outcome is unknown: writeCompletion recovers the panic and reads the record back, the
// key is released unless it is completed under our token ([Guard.concludePanicked]), and
// then settle panics again with the panic's value, as a handler's panic goes on
// ([Guard.runHandler]). The guard's logger has the first panic's stack.
func (g *Guard) settle(ctx context.Context, s settlement) (*idemstore.Record, error) {
	if s.done == nil {
		g.releaseKey(s.run.context(ctx), s.l, s.start, s.runErr)
		s.run.end(s.l.handlerRan, s.runErr)
		return nil, s.runErr
	}
	recorded, err := g.settleWritten(ctx, s, g.writeCompletion(ctx, s))
	if p := s.l.completionPanic; p != nil {
		panic(p.Value)
	}
	return recorded, err
}

// Resends of a completion that failed with a store error.
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

// writeCompletion writes s.done with its attached writes and returns the store's answer.
//
// A store failure is resent after a short backoff, while ctx's deadline leaves time
// ([Guard.mayResendCompletion]). A verdict is not (see [errKind.final]). A resend is safe:
// the completion is conditional on the lease token, and a store completes a record already
// completed under that token without committing anything twice. If every attempt fails,
// [Guard.readBackCompletion] reads what happened.
func (g *Guard) writeCompletion(ctx context.Context, s settlement) error {
	cctx, cancel := detached(ctx)
	defer cancel()
	wait := completeBackoff
	for attempt := 1; ; attempt++ {
		var err error
		// A call that calls runtime.Goexit never returns here, and the goroutine goes: the
		// completion is concluded as after a panic before it does.
		exited := func(p *AttachPanicError) { _, _ = g.settleWritten(ctx, s, g.completionPanicked(ctx, s, p)) }
		if p := recovered(func() { err = g.store.Complete(cctx, s.done, s.attached) }, exited); p != nil {
			return g.completionPanicked(ctx, s, p) // never resent: its writes may have run
		}
		if err == nil || !resendable(err) {
			return err
		}
		if !g.mayResendCompletion(ctx, attempt, wait) {
			return g.readBackCompletion(ctx, s, err)
		}
		select {
		case <-cctx.Done():
			return g.readBackCompletion(ctx, s, err)
		case <-g.cfg.clock.After(wait):
		}
		wait *= 2
	}
}

// completionPanic is the answer of a completion whose store call panicked (in an attached
// write, or in the store): the panic, and what reading the record back then found.
// [Guard.concludeCompletion] concludes it with [Guard.concludePanicked].
type completionPanic struct {
	p       *AttachPanicError
	readErr error // readBackCompletion's answer: nil if the record is completed
}

func (e *completionPanic) Error() string { return e.p.Error() }

func (e *completionPanic) Unwrap() error { return e.p }

// completionPanicked returns the answer of the completion of s whose store call panicked
// with p: it logs the panic, marks s's lease with it (for [Guard.settle], which panics
// again) and reads the record back ([Guard.readBackCompletion]). Whether the writes ran is
// unknown until then, so the completion is never sent again after a panic.
func (g *Guard) completionPanicked(ctx context.Context, s settlement, p *AttachPanicError) error {
	g.cfg.logger.ErrorContext(ctx, "idem: the completion with attached writes panicked; recovered",
		"key", s.l.key, "panic", p.Value, "stack", string(p.Stack))
	s.l.completionPanic = p
	return &completionPanic{p: p, readErr: g.readBackCompletion(ctx, s, p)}
}

// mayResendCompletion reports whether a completion that failed attempt times may be sent
// again after waiting wait.
//   - ctx has a deadline: up to completeMaxAttempts, while the deadline, read on the
//     guard's clock as the lease is, leaves completeDeadlineMargin after the wait;
//   - no deadline: up to completeAttempts.
func (g *Guard) mayResendCompletion(ctx context.Context, attempt int, wait time.Duration) bool {
	dl, ok := ctx.Deadline()
	if !ok {
		return attempt < completeAttempts
	}
	return attempt < completeMaxAttempts && g.now().Add(wait+completeDeadlineMargin).Before(dl)
}

// readBackCompletion reads the record once, strongly consistent, to learn what a
// completion left whose every attempt failed with err. It returns:
//   - nil: the record is completed under our token (an attempt landed, its answer lost);
//   - an error wrapping [idemstore.ErrNotCommitted]: the record is still ours and in
//     progress, and writes were attached, so nothing committed ([Guard.settleWritten]
//     then releases the key);
//   - a [*StoreError] with Op [OpCommit]: writes were attached, but the read failed or
//     found another owner, so whether they committed is unknown;
//   - otherwise err, and the key stays as it is.
func (g *Guard) readBackCompletion(ctx context.Context, s settlement, err error) error {
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

// detached returns a context for recording an outcome. It keeps ctx's values but not its
// cancellation, and ends after completionTimeout.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), completionTimeout)
}

// settleWritten concludes the write of s.done, whose answer was err.
// It returns the record stored (nil if none; see [Guard.concludeCompletion]) and the
// caller's error ([callerErr]).
// It ends the run ([Hooks.OnRunEnd]), whose context its hooks get.
func (g *Guard) settleWritten(ctx context.Context, s settlement, err error) (*idemstore.Record, error) {
	recorded, err := g.concludeCompletion(s.run.context(ctx), s, err)
	if err != nil {
		err = callerErr(s, err)
		s.run.end(s.l.handlerRan, err)
		return nil, err
	}
	s.run.end(s.l.handlerRan, callerErr(s, nil))
	return recorded, callerErr(s, nil)
}

// callerErr returns the error the caller gets for outcome s, recorded with error err
// (nil: recorded): err, joined after the handler's error for a remembered failure.
func callerErr(s settlement, err error) error {
	if s.runErr != nil { // a remembered failure
		if err != nil {
			return errors.Join(s.runErr, err)
		}
		return s.runErr
	}
	return err
}

// concludeCompletion reports err, the store's answer to writing s.done
// ([Guard.reportCompletion]), and acts on it. It returns the record stored and the error:
//   - stored: s.done and nil;
//   - [idemstore.ErrTooLarge]: a copy of s.done without the body, written again;
//   - nothing committed ([ErrConditionFailed], [idemstore.ErrNotCommitted]): the key is
//     released ([Guard.releaseUncommitted]), so a retry runs again. The error is nil if
//     the record turns out completed after all, and wraps [OpCommit] if the release fails;
//   - otherwise: s.done and err.
//
// It never changes s.done, which batch duplicates may be replaying (see [Batch.Settle]).
func (g *Guard) concludeCompletion(ctx context.Context, s settlement, err error) (*idemstore.Record, error) {
	if cp, ok := err.(*completionPanic); ok { //nolint:errorlint // never wrapped
		return g.concludePanicked(ctx, s, cp)
	}
	err = g.reportCompletion(ctx, s.l, s.done, s.attached, s.start, err)
	if errors.Is(err, idemstore.ErrTooLarge) && s.done.Encoding != idemstore.EncodingNone {
		// The store's item limit is lower than WithMaxResultSize allowed: keep the work
		// recorded as done, without the body, rather than repeating it.
		bare := *s.done
		bare.Data, bare.Encoding = nil, idemstore.EncodingNone
		s.done = &bare
		err = g.writeCompletion(ctx, s)
		if cp, ok := err.(*completionPanic); ok { //nolint:errorlint // never wrapped
			return g.concludePanicked(ctx, s, cp)
		}
		err = g.reportCompletion(ctx, s.l, s.done, s.attached, s.start, err)
	}
	if s.refused != nil && len(s.attached) > 0 && IsRefused(err) {
		if rec, ok, cerr := g.completeRefused(ctx, s, err); ok {
			return rec, cerr
		}
	}
	if errors.Is(err, ErrConditionFailed) || errors.Is(err, idemstore.ErrNotCommitted) {
		// Nothing committed, attached writes included: a retry may run again. Releasing
		// also fences off an attempt of ours still in flight at the store; if one landed
		// first, the release finds the record completed, and so did we.
		switch rerr := g.releaseUncommitted(ctx, s, err, false); {
		case rerr == nil:
			g.cfg.logger.InfoContext(ctx, "idem: nothing committed; key released", "key", s.l.key)
		case errors.Is(rerr, errCompletedAfterAll):
			err = nil
		case rerr != nil:
			// The release that fences off an attempt of ours still in flight failed: that
			// attempt may yet commit, so "nothing committed" is no longer known. The error
			// no longer wraps ErrNotCommitted or ErrConditionFailed, but errors.As still
			// reaches the store's and the driver's errors.
			err = &StoreError{Op: OpCommit, Err: releaseFailed(err, rerr)}
		}
	}
	return s.done, err
}

// concludePanicked concludes the completion of s whose store call panicked, by what
// reading the record back found (cp). The panic is the handler's failure, not the store's:
//   - completed under our token: as a completion ([Guard.reportCompletion]), and nil;
//   - still ours, in progress: nothing committed, so the key is released, [Hooks.OnReleased]
//     saying the handler failed, and the error is the panic (nil if the release finds the
//     record completed after all, wrapping [OpCommit] if the release fails);
//   - otherwise the read-back's error (the read failed, or another owner holds the key:
//     whether the writes committed is unknown), as a store failure.
func (g *Guard) concludePanicked(ctx context.Context, s settlement, cp *completionPanic) (*idemstore.Record, error) {
	if cp.readErr == nil || !errors.Is(cp.readErr, idemstore.ErrNotCommitted) {
		return s.done, g.reportCompletion(ctx, s.l, s.done, s.attached, s.start, cp.readErr)
	}
	switch rerr := g.releaseUncommitted(ctx, s, cp.p, true); {
	case rerr == nil:
		g.cfg.logger.InfoContext(ctx, "idem: the completion panicked, nothing committed; key released", "key", s.l.key)
		return s.done, cp.p
	case errors.Is(rerr, errCompletedAfterAll):
		return s.done, nil
	default:
		return s.done, &StoreError{Op: OpCommit, Err: releaseFailed(cp.p, rerr)}
	}
}

// reportCompletion acts on err, the store's answer to completing rec: hooks, logs, and
// the caller's error, wrapped by [storeErr] for a store failure.
func (g *Guard) reportCompletion(ctx context.Context, l *lease, rec *idemstore.Record, attached []any, start time.Time, err error) error {
	switch {
	case err == nil:
		g.cache.put(rec)
		g.fire(ctx, g.cfg.hooks.OnCompleted, start, Event{Key: l.key, HandlerDuration: l.handlerRan})
		return nil
	case errors.Is(err, ErrLeaseLost):
		g.leaseLost(ctx, l, start, Event{Err: err, HandlerDuration: l.handlerRan})
		if len(attached) == 0 {
			g.cfg.logger.ErrorContext(ctx, "idem: lease lost before completion; the handler's effects may have happened twice", "key", l.key)
		} else {
			g.cfg.logger.WarnContext(ctx, "idem: lease lost before completion; attached writes did not commit", "key", l.key)
		}
		return err
	case errors.Is(err, ErrConditionFailed) && !errors.Is(err, idemstore.ErrNotCommitted):
		g.logRefusal(ctx, l.key, err)
		return err
	case errors.Is(err, idemstore.ErrTooLarge):
		return err
	default:
		err = storeErr("complete", err)
		g.storeFailed(ctx, l.key, "complete", start, err)
		var r idemstore.Refusal
		switch {
		case errors.Is(err, idemstore.ErrNotCommitted) && errors.As(err, &r):
			g.logRefusal(ctx, l.key, err) // not the error's text: it may hold the write's values
		case errors.Is(err, idemstore.ErrNotCommitted):
			g.cfg.logger.WarnContext(ctx, "idem: completion not committed", "key", l.key, "error", err)
		default:
			g.cfg.logger.ErrorContext(ctx, "idem: completion failed; the key stays in progress until its lease ends", "key", l.key, "error", err)
		}
		return err
	}
}

// releaseUncommitted releases the key of a completion that committed nothing. The
// release also fences off an attempt of ours still in flight at the store. handlerFailed
// says the cause is the handler's (a panic in its attached write), for [Hooks.OnReleased].
// It returns:
//   - nil: the key was released, or is another owner's (then no attempt of ours can land);
//   - errCompletedAfterAll: the record is completed under our token (such an attempt
//     landed before the release);
//   - another error: the release failed, or answered lease lost and the record could not
//     be read or is still ours: an attempt in flight may commit, or may have.
func (g *Guard) releaseUncommitted(ctx context.Context, s settlement, cause error, handlerFailed bool) error {
	cctx, cancel := detached(ctx)
	defer cancel()
	err := g.store.Release(cctx, s.l.key, s.l.token, g.now())
	if errors.Is(err, ErrLeaseLost) {
		cur, gerr := g.store.Get(cctx, s.l.key)
		switch {
		case gerr == nil && cur != nil && cur.LeaseToken == s.done.LeaseToken && cur.Status == s.done.Status:
			g.cache.put(s.done)
			g.fire(ctx, g.cfg.hooks.OnCompleted, s.start, Event{Key: s.l.key, HandlerDuration: s.l.handlerRan})
			return errCompletedAfterAll
		case gerr != nil:
			g.reportRelease(ctx, s.l, s.start, cause, err, handlerFailed)
			return fmt.Errorf("idem: the release answered lease lost, and reading the record failed: %w", gerr)
		case cur == nil || cur.LeaseToken == s.done.LeaseToken:
			// Gone, or ours in another state: whether an attempt of ours committed is
			// not known.
			g.reportRelease(ctx, s.l, s.start, cause, err, handlerFailed)
			return errors.New("idem: the release answered lease lost, and the record does not show whether the completion committed")
		}
		// Released by an attempt of this release whose answer was lost, or another
		// owner's: every completion of ours is conditional on our token, none can land.
	}
	g.reportRelease(ctx, s.l, s.start, cause, err, handlerFailed)
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		return err
	}
	return nil
}

// errCompletedAfterAll is releaseUncommitted's answer for a completion that committed
// after all.
var errCompletedAfterAll = errors.New("idem: completed after all")

// releaseKey gives up the key so a retry runs again. The store keeps the record as a
// tombstone (see [idemstore.Store]). A failed release is logged, not returned: the
// caller's error is the handler's, and the lease ends on its own.
func (g *Guard) releaseKey(ctx context.Context, l *lease, start time.Time, cause error) {
	cctx, cancel := detached(ctx)
	defer cancel()
	g.reportRelease(ctx, l, start, cause, g.store.Release(cctx, l.key, l.token, g.now()), l.handlerDone)
}

// reportRelease acts on err, the store's answer to releasing l's key: hooks and logs.
// handlerFailed says the release follows the handler's failure, not a completion that
// committed nothing (whose cause is the store's error since refusals keep their cause).
func (g *Guard) reportRelease(ctx context.Context, l *lease, start time.Time, cause, err error, handlerFailed bool) {
	switch {
	case err == nil:
		// An attached write's panic is the handler's whatever its value wraps (Unwrap
		// reaches the value, maybe another store's ErrNotCommitted).
		var ap *AttachPanicError
		failed := handlerFailed && (errors.As(cause, &ap) || !errors.Is(cause, idemstore.ErrNotCommitted))
		g.fire(ctx, g.cfg.hooks.OnReleased, start, Event{Key: l.key, Err: cause, HandlerDuration: l.handlerRan, HandlerFailed: failed})
	case errors.Is(err, ErrLeaseLost):
		g.leaseLost(ctx, l, start, Event{Err: err, HandlerDuration: l.handlerRan})
	default:
		err = storeErr("release", err)
		g.storeFailed(ctx, l.key, "release", start, err)
		g.cfg.logger.WarnContext(ctx, "idem: release failed; the key stays in progress until its lease ends", "key", l.key, "error", err)
	}
}
