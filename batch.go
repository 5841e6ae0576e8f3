package idem

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/idemkit/idem/idemstore"
)

// errSettled is DoClaimed's answer for a request whose batch was settled before it started:
// its claim was released, so this run no longer holds the key.
var errSettled = fmt.Errorf("idem: batch settled before the request started: %w", ErrLeaseLost)

// Batch is a set of requests claimed together, for batch consumers such as SQS. On an
// [idemstore.BatchStore], claiming all of them costs one round trip per store batch.
// Recording all their outcomes ([Batch.Settle]) costs one or two more, not two per request.
//
// Use:
//  1. [Guard.Claim] the requests.
//  2. Call [DoClaimed] for each one to run, concurrently if you like, at most once per
//     index.
//  3. Call [Batch.Settle] once all have returned, before the deadline of the contexts
//     given to DoClaimed.
//
// DoClaimed leaves an outcome for Settle only while the deadline is ahead and its lease,
// as last confirmed (heartbeat extensions included), lasts until it. That must hold even
// for a caller whose clock runs ahead by [WithLeaseMargin]. Until Settle, other callers
// see its key in progress. Otherwise DoClaimed records the outcome itself, with
// single-record store calls, before it returns, as [Do] does:
//   - the context has no deadline (nothing bounds when Settle runs), or it has passed;
//   - [WithMaxLease] caps the lease below the deadline: it could lapse, and another
//     caller run the key again, before Settle;
//   - the handler attached writes ([Attach]) and the store cannot complete them with
//     others (it is no [idemstore.BatchAttachStore]): they complete at once, in their own
//     transaction;
//   - the batch has been settled.
//
// On a BatchAttachStore an outcome with attached writes waits for Settle under the same
// rules. Nothing of it commits before, neither the record nor its writes. An invocation
// killed before Settle leaves its keys in progress until their leases end. A redelivery
// then runs them again.
//
// Settle may run early and more than once, for example when the Lambda deadline nears
// while handlers still run. It records the outcomes finished by then. It releases the
// requests claimed but not started: a later DoClaimed for them returns an error wrapping
// [ErrLeaseLost] without running. Every outcome after it is recorded as soon as its
// handler returns. So an invocation killed at its deadline loses no outcome that finished.
//
// On a store without batch support a Batch claims lazily. DoClaimed behaves as [Do] (but
// see [Guard.Claim] on [WithFailOpen]), and Settle has nothing to do.
type Batch struct {
	g *Guard
	// mu guards settled and the items' ran, pending, released and settleErr, and left
	// while pending.
	mu      sync.Mutex
	items   []batchItem
	settled bool // Settle has run: outcomes from now on are recorded at once
}

type batchItem struct {
	req     Request
	key, fp string
	now     time.Time
	// dupOf is the first request of the batch with this key, or -1 for that one (or one
	// without a key).
	dupOf int
	// group, with dupOf set and another fingerprint than that request's, is the first
	// request of the batch with this key and fingerprint (maybe this one).
	group int
	err   error // key or claim error
	// rec is ours when claimed; else the live record found (with err: the record the
	// failed claim met, if any).
	rec     *idemstore.Record
	claimed bool
	// met, on the key's first request, is the record the batch met holding the key: the
	// batch claim's (rec), or one the Do of a request of the key met. Once it is set, no
	// request of the key fails open.
	met       KeyMet
	lazy      bool        // no batch claim was made: DoClaimed runs Do
	pending   *settlement // outcome waiting for Settle
	ran       bool        // DoClaimed was called for this request
	started   bool        // a request of the key (this one or a duplicate) started running it
	released  bool        // settled before it started: its claim was released
	settleErr error       // error of recording its outcome
	// recording, once a Settle took the outcome pending, is closed when settleErr holds the
	// recording's error: another Settle waits for it before answering.
	recording chan struct{}

	// With duplicates in the batch, on the key's first request (or on the first request of
	// a group of another fingerprint): run is closed once the key's run (the group's) is
	// over, and left, runErr and value are then its outcome for the duplicates.
	run chan struct{}
	// left is the record the run left or replayed: the duplicates replay it. It is read
	// under mu: Settle replaces a pending one with the record it stored.
	left   *idemstore.Record
	runErr error // the run's error when it left no record
	// value is the run's result. An unguarded run's (WithFailOpen) is shared as it is.
	value  any
	runner int // the request whose DoClaimed ran the key
}

// Claim claims the keys of reqs, as [Do] would before running a handler. Claim reports
// nothing itself: [DoClaimed] returns each request's error.
//
// Requests with the same stored key and the same fingerprint (duplicates) are claimed
// once and run once, whatever the store. The first of them whose DoClaimed is called runs
// the key (or replays it, or meets it in flight elsewhere, as Do would). Every other one
// takes that outcome, without running:
//   - a result left is replayed: a completed result (even one still waiting for
//     [Batch.Settle]), or a remembered failure as [*FailedError];
//   - an unguarded run's result ([WithFailOpen]) is shared as it is, by reference: maps,
//     slices and pointers it holds are the same for every duplicate, so do not change
//     them;
//   - no result left (the handler failed and the key was released, or an error such as
//     [ErrInProgress] or [ErrStore] came instead): an error wrapping that outcome's.
//
// A DoClaimed of a duplicate called while the key's run is under way waits for it, or
// for its own context to end. Called once the run is over, it takes the outcome even if
// its context has ended.
//
// A request whose key an earlier request of the batch carries with another fingerprint
// is not a duplicate of it, and shares no run with it. Its DoClaimed waits for the key's
// run in the batch to end, if one started. It then answers as Do answers that request
// alone:
//   - the run left a record: its result (even one still waiting for Settle) when the
//     fingerprints are compatible, else [ErrPayloadMismatch];
//   - else Do itself answers: it replays the stored record, answers ErrInProgress or
//     ErrPayloadMismatch as the record holding the key says, or runs the request when
//     the key is free (after a release, say).
//
// Until Settle releases it, the batch's claim of the key holds it. That Do meets the
// claim record, and answers without running, as that record says (ErrPayloadMismatch for
// a live claim of another payload, else ErrInProgress). This happens when it is called
// while no run of the key has started, or after a run whose handler failed and whose
// release waits for Settle (a deadline ahead, see [Batch]). A retry after Settle runs it.
// That Do never fails open ([WithFailOpen]) when the batch met a record holding the key.
//
// Requests with this other fingerprint are duplicates of each other. The first of them
// whose DoClaimed is called answers so, and the others take its answer, as duplicates of
// the key's first request take that run's outcome. [Batch.Settle] reports the run's
// recording error for every request that replayed it.
//
// When the batch holds a single key to claim (after duplicates and keys the guard's
// replay cache answers), Claim claims nothing. That request's DoClaimed behaves as [Do].
// It costs no more round trips than a batch claim, and fewer when the key is recorded or
// in flight.
//
// With [WithFailOpen], no request of the batch fails open for a key once the batch met a
// record holding it: the batch claim met it, or the Do of any request of the key did
// (a claim without a batch claim, on a store without batch support, say).
func (g *Guard) Claim(ctx context.Context, reqs []Request) *Batch {
	b := &Batch{g: g, items: make([]batchItem, len(reqs))}
	bs, batched := g.store.(idemstore.BatchStore)
	now := g.now()
	var recs []*idemstore.Record
	var idx []int
	seen := make(map[string]int, len(reqs))
	var groups map[[2]string]int // the first request of each key and other fingerprint
	for i, r := range reqs {
		it := &b.items[i]
		it.req, it.now, it.dupOf = r, now, -1
		var token string
		it.key, token, it.err = g.keyAndToken(r)
		if it.err != nil {
			continue
		}
		it.fp = fingerprintHash(r.Fingerprint)
		if first, dup := seen[it.key]; dup {
			// Run once, from the first's claim, whatever the store: see above.
			it.dupOf = first
			if b.items[first].run == nil {
				b.items[first].run = make(chan struct{})
			}
			if it.fp != b.items[first].fp {
				// Another fingerprint: its duplicates share one answer.
				if groups == nil {
					groups = make(map[[2]string]int)
				}
				lead, ok := groups[[2]string{it.key, it.fp}]
				if !ok {
					lead, groups[[2]string{it.key, it.fp}] = i, i
				} else if b.items[lead].run == nil {
					b.items[lead].run = make(chan struct{})
				}
				it.group = lead
			}
			continue
		}
		seen[it.key] = i
		if !batched {
			it.lazy = true
			continue
		}
		if rec := g.cache.get(it.key, now); rec != nil {
			it.rec, it.met.rec = rec, rec // a completed key replays
			continue
		}
		recs = append(recs, g.recordToClaim(ctx, it.key, token, it.fp, now))
		idx = append(idx, i)
	}
	if len(recs) == 1 {
		// One key to claim: a single claim costs what a batch claim costs for a new key,
		// and less for a key that is recorded or in flight (the refusing record comes back
		// with the failed claim, where a batch claim reads it in a second round trip; see
		// dynamo.Store.ClaimMany). From two keys on, a batch claim never costs more.
		b.items[idx[0]].lazy = true
		return b
	}
	if len(recs) == 0 {
		return b
	}
	results := bs.ClaimMany(ctx, recs, now)
	if len(results) != len(recs) {
		results = make([]idemstore.ClaimResult, len(recs))
		for j := range results {
			results[j].Err = errCount
		}
	}
	for j, res := range results {
		it := &b.items[idx[j]]
		it.rec, it.claimed, it.err = g.decideClaim(ctx, recs[j], now, res.Prev, res.Claimed, res.Err, &it.met)
		it.met.set(it.rec)
	}
	return b
}

// Len returns the number of requests in the batch.
func (b *Batch) Len() int { return len(b.items) }

// Met returns the [KeyMet] the requests of b that carry request i's key share: the record
// the batch claim met holding the key, or one a request's [DoClaimed] met. A caller that
// calls [DoMet] for the key after its DoClaimed (polling a key DoClaimed found in flight
// elsewhere, say) passes it, so that the call never fails open ([WithFailOpen]) over the
// record the batch met. It returns nil for a request without a usable key, or i out of
// range.
func (b *Batch) Met(i int) *KeyMet {
	if i < 0 || i >= len(b.items) || b.items[i].key == "" {
		return nil
	}
	if it := &b.items[i]; it.dupOf >= 0 {
		return &b.items[it.dupOf].met
	}
	return &b.items[i].met
}

// DoClaimed runs or replays request i of b, with the results and errors of [Do]. It is
// safe for concurrent use with distinct i, and must be called at most once per i.
//   - A claimed request: fn runs under ctx, its outcome is left for [Batch.Settle], and
//     the error returned is fn's own. In the cases [Batch] lists, the outcome is recorded
//     before DoClaimed returns instead, and the error is the one Do would return.
//   - A claimed request whose lease, taken at [Guard.Claim], is within [WithLeaseMargin]
//     of its end when DoClaimed reaches it: it does not run, and returns [ErrLeaseLost].
//     A caller whose clock runs ahead by less than the margin may own the key.
//   - A request whose key another request of the batch carries: it takes the key's one
//     run's outcome, or with another fingerprint answers as Do once that run is over, as
//     [Guard.Claim] says. It may wait for that run, so it must not be called from inside
//     the handler of a request with the same key.
//
// As Do, it never runs fn unguarded for a caller whose own context ended, [WithFailOpen]
// or not.
func DoClaimed[T any](ctx context.Context, b *Batch, i int, fn func(context.Context) (T, error)) (result T, replayed bool, err error) {
	return doClaimedAt(ctx, b, i, fn, false)
}

// DoClaimedNow is [DoClaimed], except that a claimed request's outcome, with its attached
// writes, is recorded before it returns, never left for [Batch.Settle]: as the cases
// [Batch] lists record it, with the error [Do] would return (a failed recording included).
// An ordered consumer uses it for a request whose successor must see its effects, or learn
// of its failure, before it starts; the other requests of the batch still wait for Settle.
func DoClaimedNow[T any](ctx context.Context, b *Batch, i int, fn func(context.Context) (T, error)) (result T, replayed bool, err error) {
	return doClaimedAt(ctx, b, i, fn, true)
}

// doClaimedAt is DoClaimed; now records a claimed request's outcome at once.
func doClaimedAt[T any](ctx context.Context, b *Batch, i int, fn func(context.Context) (T, error), now bool) (result T, replayed bool, err error) {
	it := &b.items[i]
	k := it // the item that holds the key's claim
	r := it // the item that holds the run this request takes part in: the key's, or its group's
	other := false
	if it.dupOf >= 0 {
		k, r = &b.items[it.dupOf], &b.items[it.dupOf]
		if other = it.fp != k.fp; other {
			r = &b.items[it.group] // another request of the key: it shares no run with the key's
		}
	}
	b.mu.Lock()
	twice, released, share, keyRun := it.ran, k.released, r.started, k.started
	it.ran = true
	if !twice && (other || !released) && !share {
		r.started, r.runner = true, i
	}
	b.mu.Unlock()
	switch {
	case twice:
		return result, false, errRunTwice
	case share:
		return sharedOutcome[T](ctx, b, r, it)
	case !other && released:
		return result, false, errSettled
	}
	left := new(*idemstore.Record) // the record the run leaves, for the requests that share it
	if r.run != nil {
		left = &r.left
		r.runErr = errRunPanicked // until the run returns
		defer close(r.run)        // after r.left and r.runErr are set, even if fn panics
	}
	if other {
		result, replayed, err = otherOutcome(ctx, b, k, it, keyRun, fn, left)
	} else {
		result, replayed, err = doClaimed(ctx, b, k, it.req, fn, left, now)
	}
	if r.run != nil {
		r.runErr, r.value = err, result
	}
	return result, replayed, err
}

var errRunPanicked = errors.New("idem: the handler panicked")

// sharedOutcome answers it, a request of the batch whose key (or, with another fingerprint
// than the key's first request, whose key and fingerprint) r's run made, from that run's
// outcome: see [Guard.Claim].
func sharedOutcome[T any](ctx context.Context, b *Batch, r, it *batchItem) (result T, replayed bool, err error) {
	g := b.g
	left, err := b.ranLeft(ctx, r)
	switch {
	case err != nil:
		return result, false, err
	case left != nil:
		return replayLeft[T](ctx, g, left, r, it)
	case r.runErr != nil:
		return result, false, fmt.Errorf("idem: not run: request %d of the batch has this key and left no result: %w", r.runner, r.runErr)
	}
	// A run without a lease (WithFailOpen) left no record, but its result is in hand: the
	// key runs once in the batch, guarded or not.
	result, ok := r.value.(T)
	if !ok && r.value != nil {
		return result, false, fmt.Errorf("idem: request %d of the batch has this key and its result is a %T, not a %T", r.runner, r.value, result)
	}
	g.fire(ctx, g.cfg.hooks.OnReplayed, it.now, Event{Key: r.key})
	return result, true, nil
}

// ranLeft waits for r's run to finish (or ctx to end) and returns the record it left, if
// any: Settle replaces it under b.mu with the record it stored. A run already over
// answers even on an ended ctx: a select between both, ready, would draw at random.
func (b *Batch) ranLeft(ctx context.Context, r *batchItem) (*idemstore.Record, error) {
	select {
	case <-r.run:
	default:
		select {
		case <-r.run:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return r.left, nil
}

// replayLeft answers it from left, the record r's run left: a payload mismatch if their
// fingerprints differ, else left's result, replayed.
func replayLeft[T any](ctx context.Context, g *Guard, left *idemstore.Record, r, it *batchItem) (result T, replayed bool, err error) {
	if err := g.checkFingerprint(ctx, left, it.fp); err != nil {
		return result, false, err
	}
	g.fire(ctx, g.cfg.hooks.OnReplayed, it.now, Event{Key: r.key})
	if err := g.replay(left, &result); err != nil {
		var zero T
		return zero, false, err
	}
	return result, true, nil
}

// otherOutcome answers it, a request whose key k, the batch item that holds its claim,
// carries another fingerprint, as [Do] answers it alone once the key's run in the batch
// (if keyRun, it started) is over: see [Guard.Claim]. It sets *left to the record the
// answer left, for the requests of its fingerprint that share it.
func otherOutcome[T any](ctx context.Context, b *Batch, k, it *batchItem, keyRun bool, fn func(context.Context) (T, error), left **idemstore.Record) (result T, replayed bool, err error) {
	g := b.g
	if keyRun {
		rec, err := b.ranLeft(ctx, k)
		if err != nil {
			return result, false, err
		}
		if rec != nil {
			result, replayed, err = replayLeft[T](ctx, g, rec, k, it)
			if err == nil {
				*left = rec
			}
			return result, replayed, err
		}
	}
	// The record the batch met (ours, or another caller's) holds the key, or did: Do must
	// not fail open over it.
	return doLeaving(ctx, g, it.req, fn, left, &k.met, true)
}

// doClaimed runs or replays the key of k, the batch item that holds its claim, for req
// (k's own request or a duplicate of it), and sets *left to the record the outcome left:
// the one replayed, the completion recorded or waiting for Settle, or nil. now records the
// outcome at once ([DoClaimedNow]).
func doClaimed[T any](ctx context.Context, b *Batch, k *batchItem, req Request, fn func(context.Context) (T, error), left **idemstore.Record, now bool) (result T, replayed bool, err error) {
	g := b.g
	if k.lazy {
		// Another request of the key may have met its record through a Do of its own.
		return doLeaving(ctx, g, req, fn, left, &k.met, true)
	}
	if k.err != nil {
		if g.failsOpen(ctx, k.met.get(), k.err) {
			v, err := g.runUnguarded(ctx, k.key, k.err, func(ctx context.Context) (any, error) { return fn(ctx) })
			result, _ = v.(T) // nil for an interface T whose handler returned nil
			return result, false, err
		}
		return result, false, k.err
	}
	if !k.claimed {
		rec, err := g.conflict(ctx, k.rec, k.fp, k.now)
		if errors.Is(err, ErrInProgress) && g.cfg.waitMax > 0 {
			// WithWait: wait for the owner as Do does, never failing open.
			return doLeaving(ctx, g, req, fn, left, &k.met, true)
		}
		if err != nil {
			return result, false, err
		}
		if err := g.replay(rec, &result); err != nil {
			var zero T
			return zero, false, err
		}
		*left = rec
		return result, true, nil
	}
	if !g.now().Before(k.rec.LeaseExpires.Add(-g.cfg.leaseMargin)) {
		// The lease taken at Claim ran out, or is within the margin of its end, before this
		// request started (a long batch without a deadline): a caller whose clock runs ahead
		// by less than the margin may own the key now, so it must not run.
		return result, false, ErrLeaseLost
	}
	s := g.runHooked(ctx, k.rec, k.now, func(ctx context.Context) (any, error) { return fn(ctx) })
	result, _ = s.value.(T)
	_, attachMany := g.store.(idemstore.BatchAttachStore)
	if now || (len(s.attached) > 0 && !attachMany) || !g.leaseOutlasts(ctx, s.l) {
		// Asked to record at once (DoClaimedNow). Or attached writes the store cannot
		// complete with others: their own transaction. Or the lease may end before Settle
		// records the outcome, and another caller would then run the key again.
		*left, err = g.settle(ctx, s)
		return result, false, err
	}
	b.mu.Lock()
	late := b.settled
	if !late {
		k.pending = &s
		*left = s.done // under b.mu: Settle may replace it with the record it stores
	}
	b.mu.Unlock()
	if late {
		// The batch has been settled (early, near the deadline): a later Settle may never
		// run, so the outcome is recorded now.
		*left, err = g.settle(ctx, s)
		return result, false, err
	}
	// *left is s.done, waiting for Settle, which reports to every request of the key if it
	// fails.
	return result, false, s.runErr
}

// leaseOutlasts reports whether l, as last confirmed, lasts at least until ctx's deadline
// for every caller whose clock runs ahead by no more than the lease margin, and the
// deadline is still ahead: only then may its outcome wait for [Batch.Settle], which runs
// before the deadline. Without a deadline nothing bounds when Settle runs.
func (g *Guard) leaseOutlasts(ctx context.Context, l *lease) bool {
	dl, ok := ctx.Deadline()
	return ok && g.now().Before(dl) && !l.confirmedEnd().Add(-g.cfg.leaseMargin).Before(dl)
}

// Settle records the outcomes DoClaimed left pending since the last Settle, in as few
// round trips as the store allows. Their expiry ([WithExpiry]) counts from Settle's
// recording them. It releases the claimed requests that have not started. From the first
// Settle on, DoClaimed records each outcome as soon as its handler returns. Settle is safe
// for concurrent use with DoClaimed. Call it at least once after every DoClaimed has
// returned.
//
// It returns, per request, the error of recording its outcome so far:
//
//   - nil when there was nothing to record or it was recorded;
//   - else, for example, [ErrLeaseLost] or an error wrapping [ErrStore];
//   - an [*AttachPanicError] when its attached writes (or the store) panicked while
//     completing it: Settle recovered the panic, read the record back, found it not
//     completed and released the key;
//   - for an outcome an overlapping Settle is recording, that recording's error: Settle
//     waits for it.
//
// A request whose DoClaimed succeeded but whose Settle error is non-nil did not durably
// complete: treat it as failed.
func (b *Batch) Settle(ctx context.Context) []error {
	g := b.g
	bs, ok := g.store.(idemstore.BatchStore)
	if !ok {
		return make([]error, len(b.items))
	}
	var (
		done       []*settlement
		doneIdx    []int
		keys, toks []string
		released   []*settlement
		notRun     = errors.New("idem: claimed but not run")
	)
	now := g.now()
	b.mu.Lock()
	b.settled = true
	for i := range b.items {
		it := &b.items[i]
		switch {
		case !it.claimed || it.released:
		case !it.started:
			it.released = true
			keys, toks = append(keys, it.key), append(toks, it.rec.LeaseToken)
			released = append(released, &settlement{l: &lease{g: g, key: it.key, token: it.rec.LeaseToken}, start: g.now(), runErr: notRun})
		case it.pending == nil: // running, or settled
		case it.pending.done == nil:
			keys, toks = append(keys, it.key), append(toks, it.rec.LeaseToken)
			released = append(released, it.pending)
			it.pending = nil
		default:
			s := b.stamped(it, now)
			done, doneIdx = append(done, s), append(doneIdx, i)
			it.pending, it.recording = nil, make(chan struct{})
		}
	}
	b.mu.Unlock()
	// However Settle leaves (a hook that panics or calls runtime.Goexit while it concludes
	// another outcome), every recording it opened is closed, so that a later or overlapping
	// Settle waiting for one never waits for ever; one it had not concluded is unknown.
	// Recordings are closed only under b.mu, so the check below is exact.
	defer func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, i := range doneIdx {
			it := &b.items[i]
			select {
			case <-it.recording:
			default:
				it.settleErr = &StoreError{Op: OpCommit, Err: errSettleExited}
				close(it.recording)
			}
		}
	}()

	cctx, cancel := detached(ctx)
	defer cancel()
	// Outcomes with attached writes (only on a BatchAttachStore: else DoClaimed recorded
	// them) go in the store's transactions, the others in its plain batch completion.
	var plain, attached []int
	for j, s := range done {
		if len(s.attached) > 0 {
			attached = append(attached, j)
		} else {
			plain = append(plain, j)
		}
	}
	// Both at once: sent one after the other, the second would wait for the first's answer,
	// and an invocation killed meanwhile would lose outcomes that finished long before. The
	// goroutine makes the store call alone, which runs the attached writes (user code) under
	// a recover: a panic there must not take the process down. Its outcomes are concluded
	// here, on the caller's goroutine, where the hooks run.
	var wg sync.WaitGroup
	var attachedResults []error
	if len(attached) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs := make([]*idemstore.Record, len(attached))
			writes := make([][]any, len(attached))
			for n, j := range attached {
				recs[n], writes[n] = done[j].done, done[j].attached
			}
			// A call that did not return (a panic, or runtime.Goexit, after which wg.Done
			// still runs) is unknown for every record of it: settleBatchWritten learns each
			// one's.
			unknown := func(p *AttachPanicError) {
				attachedResults = make([]error, len(attached))
				for n := range attachedResults {
					attachedResults[n] = p
				}
			}
			p := recovered(func() {
				attachedResults = bs.(idemstore.BatchAttachStore).CompleteManyAttached(cctx, recs, writes)
			}, unknown)
			if p != nil {
				unknown(p)
			}
		}()
	}
	if len(plain) > 0 {
		recs := make([]*idemstore.Record, len(plain))
		for n, j := range plain {
			recs[n] = done[j].done
		}
		b.settleBatchWritten(ctx, done, doneIdx, plain, bs.CompleteMany(cctx, recs))
	}
	wg.Wait()
	if len(attached) > 0 {
		b.settleBatchWritten(ctx, done, doneIdx, attached, attachedResults)
	}
	if len(keys) > 0 {
		results := bs.ReleaseMany(cctx, keys, toks, g.now())
		for j, s := range released {
			var err error = errCount
			if len(results) == len(keys) {
				err = results[j]
			}
			g.reportRelease(s.run.context(ctx), s.l, s.start, s.runErr, err, s.l.handlerDone)
			s.run.end(s.l.handlerRan, s.runErr)
		}
	}
	// An outcome an overlapping Settle took is still being recorded: its answer is that
	// recording's, so wait for it (the store calls are bounded: see completionTimeout).
	var recording []chan struct{}
	b.mu.Lock()
	for i := range b.items {
		if c := b.items[i].recording; c != nil {
			recording = append(recording, c)
		}
	}
	b.mu.Unlock()
	for _, c := range recording {
		<-c
	}
	errs := make([]error, len(b.items))
	b.mu.Lock()
	for i := range b.items {
		k := &b.items[i]
		if k.dupOf >= 0 {
			k = &b.items[k.dupOf] // a duplicate shares its key's outcome, and so its recording
		}
		errs[i] = k.settleErr
	}
	b.mu.Unlock()
	return errs
}

// stamped returns the pending outcome of it, whose completion Settle writes at now, with
// the completion's expiry counted from now ([WithExpiry]: from completion): the handler
// returned earlier, maybe longer ago than the expiry, while other handlers of the batch
// ran. The expiry never moves back (a clock stepped back). The completion is a copy, and
// it.left, which the key's duplicates replay, becomes it. b.mu is held.
func (b *Batch) stamped(it *batchItem, now time.Time) *settlement {
	s := *it.pending
	done := *s.done
	if e := now.Add(b.g.cfg.expiry); e.After(done.Expires) {
		done.Expires = e
	}
	if it.left == s.done {
		it.left = &done
	}
	s.done = &done
	return &s
}

// settleBatchWritten concludes, for each j in which, the write of done[j], whose answer
// from the batch call is results. It resends a store failure alone ([Guard.writeCompletion])
// and keeps each request's error ([Guard.settleWritten]).
func (b *Batch) settleBatchWritten(ctx context.Context, done []*settlement, doneIdx, which []int, results []error) {
	g := b.g
	next := 0 // the first of which whose recording is open
	defer func() {
		if next == len(which) {
			return
		}
		// Not returned (runtime.Goexit in a resend's attached write, concluded as a panic
		// by writeCompletion, or a panic in a hook): the goroutine goes, but a Settle that
		// waits for these recordings must not wait for ever. Their outcome is unknown.
		b.mu.Lock()
		for _, j := range which[next:] {
			it := &b.items[doneIdx[j]]
			it.settleErr = &StoreError{Op: OpCommit, Err: errSettleExited}
			close(it.recording)
		}
		b.mu.Unlock()
	}()
	for n, j := range which {
		var err error = errCount
		if len(results) == len(which) {
			err = results[n]
		}
		st := *done[j]
		st.runErr = nil // DoClaimed already returned a remembered failure's error

		// The batched call's panic (Settle's own error, never wrapped) leaves every record of
		// it unknown.
		p, callPanicked := err.(*AttachPanicError) //nolint:errorlint // never wrapped
		switch {
		case callPanicked && len(which) == 1:
			// The batched call held this record alone, so its writes (or the store) panicked:
			// the outcome is unknown, and a resend would run them again. Read it back.
			err = g.completionPanicked(ctx, st, p)
		case callPanicked, err != nil && resendable(err):
			// A store failure of the batched call, or a panic in a call of several records
			// (whose records' outcomes are all unknown), whose outcome is unknown: resend
			// this completion alone (with its attached writes: a store completes a record
			// already completed under its token without committing them again), and read
			// it back if that fails too, as Do does. Settling it as failed would leave the
			// work unrecorded and run it again after its lease. A completion that panics
			// alone is this record's own: writeCompletion recovers it and reads back.
			err = g.writeCompletion(ctx, st)
		}
		// A panic, here or in the resend without the result after ErrTooLarge, is concluded
		// as the handler's ([Guard.concludePanicked]): not completed, the key released, the
		// error is the *AttachPanicError, as if its handler had panicked.
		recorded, err := g.settleWritten(ctx, st, err)
		b.mu.Lock()
		it := &b.items[doneIdx[j]]
		it.settleErr = err
		if err == nil && it.left == st.done {
			// The duplicates replay what the store recorded (without a body, say).
			it.left = recorded
		}
		close(it.recording)
		next = n + 1
		b.mu.Unlock()
	}
}

// recovered calls f and returns, if f did not return normally, its panic as an
// [*AttachPanicError], whatever the value (nil too: panic(nil) under GODEBUG=panicnil=1).
// Whether f returned is known from a flag set after it, never from recover's value. If f
// calls [runtime.Goexit], recovered cannot return: it calls exited (if not nil) with an
// [*AttachPanicError] whose Value is [errGoexit] while the goroutine goes on exiting.
func recovered(f func(), exited func(*AttachPanicError)) (p *AttachPanicError) {
	returned, caught := false, false
	defer func() {
		if !returned && !caught && exited != nil {
			p.Value = errGoexit // runtime.Goexit: a panic would have been caught below
			exited(p)
		}
	}()
	func() {
		defer func() {
			if !returned {
				p = &AttachPanicError{Value: recover(), Stack: debug.Stack()}
			}
		}()
		f()
		returned = true
	}()
	caught = !returned
	return p
}

// errGoexit is the Value of the [*AttachPanicError] for a store call that called
// [runtime.Goexit] (an attached write's t.FailNow, say) and so never returned.
var errGoexit = errors.New("idem: the completion with attached writes called runtime.Goexit")

var errSettleExited = errors.New("idem: Settle's goroutine exited before this outcome was recorded")

var errRunTwice = errors.New("idem: DoClaimed called twice for one request")

var errCount = errors.New("idem: batch store returned a result count unlike its input")
