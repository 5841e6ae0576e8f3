package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/idemkit/idem/idemstore"
)

// Guard runs handlers at most once per idempotency key within the key's expiry window.
// It replays the first run's result to every retry and duplicate. It is safe for
// concurrent use: create one per function (container) and share it.
type Guard struct {
	store idemstore.Store
	cfg   config
	cache *lru
	timed bool // some hook is set: measure durations
}

// New returns a Guard for one operation over store. Options are applied in order.
// Invalid settings return an error wrapping [ErrInvalidOption] that names the option.
//
// The operation names what the guarded handlers do ("create-order", "credit-account").
// It is part of every stored key, beside the scope (see [WithScope]). So two operations of
// one function never share a record, whatever keys their callers send. The operation:
//   - is non-empty, at most [MaxOperationLength] bytes of printable ASCII;
//   - holds no space, '#' or '.' (the scope may hold dots: the operation is what follows
//     the key's last one);
//   - should stay stable across deploys: a record is found again only under the same
//     scope and operation.
//
// Without [WithScope], the scope is the Lambda function's name. New reads it from the
// environment variable AWS_LAMBDA_FUNCTION_NAME, the one environment read of package
// idem. Outside Lambda, where it is unset, the scope is [DefaultScope].
func New(store idemstore.Store, operation string, opts ...Option) (*Guard, error) {
	if store == nil {
		return nil, errNilStore
	}
	if err := checkOperation(operation); err != nil {
		return nil, err
	}
	cfg := config{
		expiry:        DefaultExpiry,
		lease:         DefaultLease,
		leaseMargin:   DefaultLeaseMargin,
		maxLease:      DefaultMaxLease,
		codec:         JSONCodec{},
		compressAbove: DefaultCompressionThreshold,
		maxResult:     DefaultMaxResultSize,
		clock:         systemClock{},
		gzipWriters:   new(sync.Pool),
		gzipReaders:   new(sync.Pool),
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.checkHeartbeat(); err != nil {
		return nil, err
	}
	if cfg.scope == "" { // no WithScope
		scope, err := defaultScope()
		if err != nil {
			return nil, err
		}
		cfg.scope = scope
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler) // formats nothing
	}
	cfg.scope += "." + operation
	g := &Guard{store: store, cfg: cfg, timed: cfg.hooks.timed()}
	if cfg.cacheSize > 0 {
		g.cache = newLRU(cfg.cacheSize)
	}
	return g, nil
}

// Scope returns the prefix of the guard's stored keys: "<scope>.<operation>", the scope of
// [WithScope] (or its default) and the operation given to [New].
func (g *Guard) Scope() string { return g.cfg.scope }

// Clock returns the guard's clock ([WithClock]), for wrappers such as packages sqs and
// lambdawrap, which take their time from the guard they wrap.
func (g *Guard) Clock() Clock { return g.cfg.clock }

// Logger returns the guard's logger ([WithLogger]; one that discards everything by
// default), for wrappers that log through the guard they wrap.
func (g *Guard) Logger() *slog.Logger { return g.cfg.logger }

// Hooks returns the guard's hooks ([WithHooks]), for wrappers that report their own
// events (an unguarded run, a batch) through the guard's hooks.
func (g *Guard) Hooks() Hooks { return g.cfg.hooks }

// Do runs fn at most once per idempotency key of req within the expiry window. It
// reports whether the result was replayed rather than computed. By the key's record:
//   - none, or expired: fn runs under a lease and its result is stored (two round trips);
//   - completed: Do returns the stored result, replayed (one round trip, none on a
//     [WithCache] hit);
//   - in flight elsewhere: [*InProgressError], or with [WithWait] the owner's result;
//   - lease ended after a [Checkpoint]: Do takes the key over and fn resumes from it.
//
// If fn fails or panics, Do releases the key and returns fn's result and error as they
// are. [WithRememberFailures] stores a permanent failure instead. A released key keeps
// fn's checkpoint for the retry. A write fn attached ([Attach]) that panics as the store
// completes, the first time or when sent again, is fn's panic: Do recovers it (logged
// with its stack), reads the record back, releases the key unless the completion
// committed ([Hooks.OnReleased] with HandlerFailed), and panics again with its value.
//
// Errors, by what the caller can do (see the package doc, section Errors):
//   - fix the request: [ErrMissingKey], [ErrInvalidKey], [ErrPayloadMismatch];
//   - retry later: [ErrInProgress], [ErrLeaseLost], [ErrStore];
//   - give up: [ErrFailed], [ErrResultNotStored], [ErrIncompatibleRecord];
//   - an attached write's condition failed: [ErrConditionFailed].
//
// With a [*StoreError], [StoreError.Op] says whether fn ran; Do returns fn's result with
// it when fn did.
//
// fn's context carries the lease, for [Checkpoint], [LastCheckpoint] and [Attach]. ctx's
// deadline sets the lease, and fn's context ends before the lease does, with a cause
// wrapping [ErrLeaseLost] (see the package doc, section Leases).
func Do[T any](ctx context.Context, g *Guard, req Request, fn func(context.Context) (T, error)) (result T, replayed bool, err error) {
	return doLeaving(ctx, g, req, fn, nil, nil, false)
}

// DoMet is [Do] for one of several calls of req's key that share met, the record any of
// them met holding the key. Once one of them met such a record (a claim or poll of the
// key, a batch claim's: see [Batch.Met]), none fails open ([WithFailOpen]): the key may
// be completed or in progress elsewhere. A caller that calls again for a key an earlier
// call met in progress (polling it until its owner finishes, say) passes the same met to
// every call, so that a store failure of a later call returns the store error rather than
// running fn over the live run. The call adds the records it meets to met. A nil met is
// Do itself. In all else DoMet is Do: it is no batch's call, and fn's [OnRefused] choice
// is honoured as Do honours it, whatever met holds.
//
// Share a KeyMet only between calls of one key and guard: a record of another key forbids
// failing open where Do would not.
func DoMet[T any](ctx context.Context, g *Guard, req Request, met *KeyMet, fn func(context.Context) (T, error)) (result T, replayed bool, err error) {
	return doLeaving(ctx, g, req, fn, nil, met, false)
}

// doLeaving is [Do] with three more parameters.
//   - left, if not nil, is set to the record the call leaves for the key: the one
//     replayed, or the one fn's outcome was recorded as. It is nil when the call left
//     none: fn failed and the key was released, or an error came before or after fn.
//   - known, if not nil, is shared by the calls of one key: the record any of them met
//     holding the key. The call never fails open once it is set, and sets it to the
//     records it meets (see [Guard.do]).
//   - inBatch says the call is a batch's (DoClaimed's, or the batch engine's through
//     package internal/guardlink): [OnRefused] is then ignored (see [Guard.runOwned]).
func doLeaving[T any](ctx context.Context, g *Guard, req Request, fn func(context.Context) (T, error), left **idemstore.Record, known *KeyMet, inBatch bool) (result T, replayed bool, err error) {
	// The closure captures only fn, so it stays on the stack; fn's result comes back boxed.
	rec, v, err := g.do(ctx, req, func(ctx context.Context) (any, error) { return fn(ctx) }, left, known, inBatch)
	if rec == nil {
		result, _ = v.(T) // nil for an interface T whose handler returned nil
		return result, false, err
	}
	if left != nil {
		*left = rec
	}
	if err := g.replay(rec, &result); err != nil {
		var zero T
		return zero, false, err
	}
	return result, true, nil
}

// do drives the state machine. It returns the record to replay, or nil and what fn
// returned after running it. Then, if left is not nil, *left is the record fn's outcome
// was recorded as (nil if none).
//
// known, if not nil, holds the record the other calls of the key met holding it (a batch
// claim's, or another call's). Like every record a claim or poll of this call meets, it
// forbids failing open; this call adds the records it meets to it. inBatch says the call
// is a batch's: see [Guard.runOwned].
func (g *Guard) do(ctx context.Context, req Request, run func(context.Context) (any, error), left **idemstore.Record, known *KeyMet, inBatch bool) (*idemstore.Record, any, error) {
	key, token, err := g.keyAndToken(req)
	if err != nil {
		return nil, nil, err
	}
	fp := fingerprintHash(req.Fingerprint)
	start := g.now()

	if rec := g.cache.get(key, start); rec != nil {
		known.set(rec)
		rec, err := g.replayCached(ctx, rec, fp, start)
		return rec, nil, err
	}

	var waitUntil time.Time
	var met *idemstore.Record // the last record this call learned holds the key
	for now := start; ; now = g.now() {
		rec, owned, err := g.claimOnce(ctx, key, token, fp, now, known)
		if rec != nil {
			met = rec
			known.set(rec)
		}
		if err != nil {
			if met == nil {
				met = known.get() // another call of the batch met one: never fail open
			}
			if g.failsOpen(ctx, met, err) {
				v, err := g.runUnguarded(ctx, key, err, run)
				return nil, v, err
			}
			return nil, nil, err
		}
		if owned {
			v, err := g.runOwned(ctx, rec, now, run, left, inBatch)
			return nil, v, err
		}
		replay, err := g.conflict(ctx, rec, fp, now)
		if !errors.Is(err, ErrInProgress) || g.cfg.waitMax <= 0 {
			return replay, nil, err
		}
		if waitUntil.IsZero() {
			waitUntil = now.Add(g.cfg.waitMax)
		}
		done, polled, err := g.waitFor(ctx, rec, fp, waitUntil)
		if err != nil || done != nil {
			return done, nil, err
		}
		if polled != nil {
			met = polled
			known.set(polled)
		}
		// The record went away or its lease ended: claim again, with a token of its own.
		token = newToken()
	}
}

// conflict decides what a caller whose claim found the live record rec gets: the record
// to replay, or an error ([ErrPayloadMismatch], [*InProgressError], [ErrIncompatibleRecord]).
//
// A tombstone without a checkpoint ([idemstore.Record.Released]) is live only at a clock
// behind the releaser's. It holds the key for no request. So whatever the payload, the
// caller is told the key is in progress until the tombstone's lease end. A tombstone with
// a checkpoint keeps the released request's effects, and so the key for its payload.
func (g *Guard) conflict(ctx context.Context, rec *idemstore.Record, fp string, now time.Time) (*idemstore.Record, error) {
	if rec.Released() && rec.Checkpoint == "" && rec.Status == idemstore.StatusInProgress {
		return nil, g.inProgress(ctx, rec, now)
	}
	if err := g.checkFingerprint(ctx, rec, fp); err != nil {
		return nil, err
	}
	switch rec.Status {
	case idemstore.StatusCompleted, idemstore.StatusFailed:
		g.cache.put(rec)
		g.fire(ctx, g.cfg.hooks.OnReplayed, now, Event{Key: rec.Key})
		return rec, nil
	case idemstore.StatusInProgress:
		return nil, g.inProgress(ctx, rec, now)
	default:
		return nil, fmt.Errorf("%w: status %q", ErrIncompatibleRecord, rec.Status)
	}
}

// claimOnce makes one claim step at now: it writes [Guard.recordToClaim] and returns
// what [Guard.decideClaim] makes of the answer (the record, whether we own it, an error).
// known, if not nil, is the key's shared record met in a batch: see decideClaim.
func (g *Guard) claimOnce(ctx context.Context, key, token, fp string, now time.Time, known *KeyMet) (*idemstore.Record, bool, error) {
	rec := g.recordToClaim(ctx, key, token, fp, now)
	prev, wrote, err := g.store.Claim(ctx, rec, now)
	return g.decideClaim(ctx, rec, now, prev, wrote, err, known)
}

// recordToClaim returns the in-progress record a claim at now writes.
//
// Its expiry window starts when the lease ends. So an in-progress record never counts as
// absent (nor is deleted by TTL) while its lease runs, however short WithExpiry is.
func (g *Guard) recordToClaim(ctx context.Context, key, token, fp string, now time.Time) *idemstore.Record {
	lease := g.leaseEnd(ctx, now)
	return &idemstore.Record{
		Key:          key,
		Status:       idemstore.StatusInProgress,
		Expires:      lease.Add(g.cfg.expiry),
		LeaseExpires: lease,
		Fingerprint:  fp,
		LeaseToken:   token,
		Version:      idemstore.SchemaVersion,
	}
}

// takeoverAttempts bounds the claims one claim step makes while a lease-ended record with
// a checkpoint refuses them: its owner, still running past its lease, may move the
// checkpoint between our attempts. After the last, the caller is told the key is in
// progress.
const takeoverAttempts = 3

// decideClaim reads the store's answer to claiming rec: the record written (wrote), the
// record that refused it (prev), or an error. It returns the record and whether we own it:
//   - written, or refused by a record of our own token (a resend met our first attempt):
//     our record, owned;
//   - refused by a live record, or still refused after takeoverAttempts claims: that
//     record, not owned;
//   - refused by a lease-ended record: it claims again, carrying the record's checkpoint
//     if it has one ([Guard.carryCheckpoint]). If that answers [ErrPayloadMismatch], the
//     record and the error;
//   - an error, or refused without a record: a store error, with the record the claims
//     met, if any, so [Guard.failsOpen] refuses.
//
// A lease-ended record refuses a claim that does not carry its checkpoint (see
// [idemstore.Store]). The takeover carries it so the new owner resumes from it, and the
// checkpoint lives in the record, where a resent claim or a later takeover finds it. A
// record met with an error is one the store returned with it (learned, not fully read), or
// one an earlier claim of this step returned: either way the key's state is known.
//
// known, if not nil, is the record the calls of the key in a batch met ([KeyMet]). Each
// record a claim of this step meets is added to it at once, before the step claims again:
// a takeover claim may take long, and meanwhile another request of the key whose claim
// fails must not fail open.
func (g *Guard) decideClaim(ctx context.Context, rec *idemstore.Record, now time.Time, prev *idemstore.Record, wrote bool, err error, known *KeyMet) (*idemstore.Record, bool, error) {
	key, fp := rec.Key, rec.Fingerprint
	var met *idemstore.Record // the record an earlier attempt of this step met
	for attempt := 1; ; attempt++ {
		if prev != nil {
			met = prev
			known.set(prev)
		}
		if err != nil {
			err = storeErr("claim", err)
			g.storeFailed(ctx, key, "claim", now, err)
			return met, false, err
		}
		if wrote {
			g.fire(ctx, g.cfg.hooks.OnClaimed, now, Event{Key: key, LeaseExpires: rec.LeaseExpires})
			return rec, true, nil
		}
		if prev == nil {
			return nil, false, storeErr("claim", errConflictWithoutRecord)
		}
		if prev.Status == idemstore.StatusInProgress && prev.LeaseToken == rec.LeaseToken {
			// Our own claim: it took effect, its response was lost, and a retry (the SDK's
			// retryer resends a request whose connection broke) met the record it wrote. The
			// token is fresh for every claim, so no one else holds it: we own the lease. All
			// our attempts share the token but not the checkpoint they carry: the one that
			// took effect may be an earlier attempt landing late, so the record, not rec,
			// says which checkpoint (and number) the new owner resumes from.
			rec.Checkpoint, rec.CheckpointSeq, rec.Fingerprint = prev.Checkpoint, prev.CheckpointSeq, prev.Fingerprint
			g.fire(ctx, g.cfg.hooks.OnClaimed, now, Event{Key: key, LeaseExpires: rec.LeaseExpires})
			return rec, true, nil
		}
		if prev.Live(now) || attempt == takeoverAttempts {
			return prev, false, nil
		}
		if err := g.carryCheckpoint(ctx, rec, prev, fp, now); err != nil {
			// The record holds the key for another payload: return it with the error, so
			// that a later claim of the same call (or batch) never fails open over it.
			return prev, false, err
		}
		prev, wrote, err = g.store.Claim(ctx, rec, now)
	}
}

// carryCheckpoint sets the checkpoint rec must carry to take over prev. prev refused the
// claim although it no longer holds its key: its lease ended, and it has a checkpoint.
//   - prev is past its expiry, or has no checkpoint: rec carries none.
//   - fp and prev's fingerprint are both set and differ: [ErrPayloadMismatch]. The
//     checkpoint records effects of prev's request, so the key stays with that request
//     until it completes or the record expires.
//   - otherwise: rec carries prev's checkpoint, its number and prev's fingerprint.
//
// The check is on the record the claim read. The store checks the record it replaces,
// which may have changed since (see [idemstore.Store]): it takes it over only if it holds
// the same checkpoint, with the same number, for a request of the same fingerprint. prev's
// fingerprint differs from fp only where one of them is empty: a caller that gave none, or
// a record written without. The record stays that of prev's request, whose effects its
// checkpoint records.
func (g *Guard) carryCheckpoint(ctx context.Context, rec, prev *idemstore.Record, fp string, now time.Time) error {
	rec.Checkpoint, rec.CheckpointSeq, rec.Fingerprint = "", 0, fp
	if prev.Expired(now) || prev.Checkpoint == "" {
		return nil
	}
	if err := g.checkFingerprint(ctx, prev, fp); err != nil {
		return err
	}
	// With its number: the new owner's checkpoints number on from it.
	rec.Checkpoint, rec.CheckpointSeq, rec.Fingerprint = prev.Checkpoint, prev.CheckpointSeq, prev.Fingerprint
	return nil
}

// leaseEnd computes when a lease taken at now ends. A lease lasts at least minLease.
//   - With a deadline: the deadline, capped by the maximum, plus the margin. The margin
//     comes after the cap, so that even a 15-minute function keeps it.
//   - Without: the lease an owner's clock measures ([Guard.ownerLeaseEnd]).
//
// The margin is the clock skew the lease tolerates. The handler's context ends by the
// lease end less the margin (see [Guard.watch]). With a deadline that is the deadline
// itself. Without one, the lease watchdog ends it.
func (g *Guard) leaseEnd(ctx context.Context, now time.Time) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return now.Add(max(min(dl.Sub(now), g.cfg.maxLease)+g.cfg.leaseMargin, minLease))
	}
	return g.ownerLeaseEnd(now)
}

// ownerLeaseEnd is the end of a lease measured on the owner's clock alone, taken at now:
// WithLease capped by WithMaxLease, plus the margin. It is the lease of a claim without a
// deadline, and the least an extension grants.
func (g *Guard) ownerLeaseEnd(now time.Time) time.Time {
	return now.Add(max(min(g.cfg.lease, g.cfg.maxLease)+g.cfg.leaseMargin, minLease))
}

// minLease is the shortest lease: even a context at its deadline holds its key long enough
// for its outcome to be fenced, rather than handing it to a concurrent claimer at once.
const minLease = time.Second

func (g *Guard) checkFingerprint(ctx context.Context, rec *idemstore.Record, fp string) error {
	if fp != "" && rec.Fingerprint != "" && fp != rec.Fingerprint {
		g.fire(ctx, g.cfg.hooks.OnMismatch, time.Time{}, Event{Key: rec.Key, Err: ErrPayloadMismatch})
		return ErrPayloadMismatch
	}
	return nil
}

func (g *Guard) inProgress(ctx context.Context, rec *idemstore.Record, now time.Time) error {
	retry := max(rec.LeaseExpires.Sub(now), 0)
	retry = max((retry+time.Second-1)/time.Second*time.Second, time.Second)
	err := &InProgressError{LeaseExpires: rec.LeaseExpires, RetryAfter: retry}
	g.fire(ctx, g.cfg.hooks.OnInProgress, time.Time{}, Event{Key: rec.Key, Err: err})
	return err
}

// waitFor polls an in-flight key until it completes, goes away or its lease ends, or until
// the wait budget or ctx ends. It returns the completed record, or nil to claim again.
// With nil it also returns the last record its polls read (nil if the record went away).
//
// The wait also ends, with the in-progress error, at ctx's deadline less the lease margin.
// In Lambda the deadline is the function timeout. A waiter that ran into it would be
// billed for the whole timeout and answer nothing: through the HTTP wrappers, a 5xx from
// API Gateway instead of a 409 with Retry-After.
func (g *Guard) waitFor(ctx context.Context, rec *idemstore.Record, fp string, until time.Time) (done, polled *idemstore.Record, err error) {
	if dl, ok := ctx.Deadline(); ok {
		if end := dl.Add(-g.cfg.leaseMargin); end.Before(until) {
			until = end
		}
	}
	poll := g.cfg.waitPoll
	for {
		now := g.now()
		if !now.Before(until) {
			return nil, nil, g.inProgress(ctx, rec, now)
		}
		select {
		case <-ctx.Done():
			return nil, nil, context.Cause(ctx)
		case <-g.cfg.clock.After(min(poll, until.Sub(now))): // the last poll comes at the end
		}
		start := g.now()
		cur, err := g.store.Get(ctx, rec.Key)
		if err != nil && ctx.Err() != nil {
			return nil, nil, context.Cause(ctx) // the caller gave up during the poll
		}
		if err != nil {
			err = storeErr("get", err)
			g.storeFailed(ctx, rec.Key, "get", start, err)
			return nil, nil, err
		}
		if !cur.Live(g.now()) {
			return nil, cur, nil
		}
		// The record polled may be another owner's, for another request: judge it afresh.
		replay, err := g.conflict(ctx, cur, fp, start)
		if !errors.Is(err, ErrInProgress) {
			return replay, nil, err
		}
		rec = cur
		poll = min(2*poll, time.Second)
	}
}

// replay turns a stored record into the result or error it stands for.
func (g *Guard) replay(rec *idemstore.Record, out any) error {
	if rec.Status == idemstore.StatusFailed {
		return &FailedError{Message: string(rec.Data)}
	}
	return g.cfg.decodeResult(rec, out)
}

func (g *Guard) now() time.Time { return g.cfg.clock.Now() }

// failsOpen reports whether the claim error err lets the handler run unguarded. It does
// only for a store failure with [WithFailOpen] set, and only when the call could not
// learn the key's state. It never does:
//   - when the call met a record holding the key (met): one the store returned with the
//     error, although it could not read all of it, or one an earlier claim, read or poll
//     of the same call returned, or, in a batch, one that the batch claim or an earlier
//     call of another request of the key met;
//   - when the store refused the claim without the record: it said the key is taken;
//   - once the caller's context has ended, whatever the store answered (its request may
//     have failed on its own after the deadline passed). Nobody would get the result,
//     and the handler would start on an ended context.
func (g *Guard) failsOpen(ctx context.Context, met *idemstore.Record, err error) bool {
	return g.cfg.failOpen && met == nil && errors.Is(err, ErrStore) && !errors.Is(err, errConflictWithoutRecord) && ctx.Err() == nil &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// KeyMet is the record the calls of one key met holding the key: a batch claim's, or one
// that a claim or poll of a [DoMet] or a request's [DoClaimed] met. Once it is set, none
// of the calls that share it fails open ([WithFailOpen]). Its zero value has met nothing,
// as has a nil *KeyMet. It is safe for concurrent use.
type KeyMet struct {
	mu  sync.Mutex
	rec *idemstore.Record
}

// get returns the record met, or nil.
func (m *KeyMet) get() *idemstore.Record {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rec
}

// set keeps rec as the record met, unless m or rec is nil.
func (m *KeyMet) set(rec *idemstore.Record) {
	if m == nil || rec == nil {
		return
	}
	m.mu.Lock()
	m.rec = rec
	m.mu.Unlock()
}

// runUnguarded runs run for key without a claim, the claim having failed with err and
// [Guard.failsOpen] let it through: it logs at WARN and fires [Hooks.OnUnguarded] first,
// for [Do] and [DoClaimed] alike.
func (g *Guard) runUnguarded(ctx context.Context, key string, err error, run func(context.Context) (any, error)) (any, error) {
	g.cfg.logger.WarnContext(ctx, "idem: store failed, running unguarded (fail-open)", "key", key, "error", err)
	g.fire(ctx, g.cfg.hooks.OnUnguarded, time.Time{}, Event{Key: key, Op: "claim", Err: err})
	return run(withStoredKey(ctx, key))
}

// errConflictWithoutRecord is the cause of the store error for a claim the store refused
// without returning the record holding the key, against the [idemstore.Store] contract.
var errConflictWithoutRecord = errors.New("store reported a conflict without the record")

func (g *Guard) storeFailed(ctx context.Context, key, op string, start time.Time, err error) {
	g.fire(ctx, g.cfg.hooks.OnStoreError, start, Event{Key: key, Op: op, Err: err})
}
