package idem

import (
	"context"
	"errors"
	"time"
)

// BatchStore is an optional extension of [Store] for stores that can claim, complete and
// release many records in one round trip. [Guard.Claim] uses it when the store has it.
// Each method must have exactly the per-record semantics of its single-record counterpart;
// result i belongs to input i. A store may split large inputs into several round trips.
type BatchStore interface {
	Store
	// ClaimMany makes [Store.Claim] for each record. recs hold distinct keys.
	ClaimMany(ctx context.Context, recs []*Record, now time.Time) []ClaimResult
	// CompleteMany makes [Store.Complete], without attached writes, for each record.
	CompleteMany(ctx context.Context, recs []*Record) []error
	// ReleaseMany makes [Store.Release] for each key and its token.
	ReleaseMany(ctx context.Context, keys, tokens []string) []error
}

// ClaimResult is the outcome of one claim of [BatchStore.ClaimMany], with the meaning of
// [Store.Claim]'s results.
type ClaimResult struct {
	Prev    *Record
	Claimed bool
	Err     error
}

// Batch is a set of requests claimed together, for batch consumers such as SQS: on a
// [BatchStore], claiming all of them costs one round trip per store batch, and recording
// all their outcomes ([Batch.Settle]) one or two more, instead of two per request.
//
// Use: [Guard.Claim] the requests, call [DoClaimed] for each one to run (concurrently if
// you like, at most once per index), then call [Batch.Settle] once all have returned.
// Outcomes are recorded at Settle, so keep batches short-lived: until then, other callers
// see their keys in progress. A handler that attaches writes ([Attach]) completes at once,
// in its own transaction. Requests claimed but never run are released by Settle.
//
// On a store without batch support a Batch claims lazily: DoClaimed behaves exactly as
// [Do] and Settle has nothing to do.
type Batch struct {
	g     *Guard
	items []batchItem
}

type batchItem struct {
	req     Request
	key, fp string
	now     time.Time
	err     error   // key or claim error
	rec     *Record // ours when claimed; else the live record found
	claimed bool
	lazy    bool        // no batch claim was made: DoClaimed runs Do
	pending *settlement // outcome waiting for Settle
	ran     bool
	final   error // error from Settle's recording of the outcome
}

// Claim claims the keys of reqs, as [Do] would before running a handler. Two requests with
// the same stored key in one batch are not both claimed: the later one gets an
// [*InProgressError] from [DoClaimed], so callers should run duplicates from the first's
// outcome. Claim reports nothing itself: [DoClaimed] returns each request's error.
func (g *Guard) Claim(ctx context.Context, reqs []Request) *Batch {
	b := &Batch{g: g, items: make([]batchItem, len(reqs))}
	bs, batched := g.store.(BatchStore)
	now := g.now()
	var recs []*Record
	var idx []int
	seen := make(map[string]int, len(reqs))
	for i, r := range reqs {
		it := &b.items[i]
		it.req, it.now = r, now
		it.key, it.err = g.StoredKey(r)
		if it.err != nil {
			continue
		}
		it.fp = fingerprintHash(r.Fingerprint)
		if !batched {
			it.lazy = true
			continue
		}
		if _, dup := seen[it.key]; dup {
			it.err = &InProgressError{RetryAfter: time.Second, LeaseExpires: now}
			continue
		}
		seen[it.key] = i
		if rec := g.cache.get(it.key, now); rec != nil {
			it.rec = rec
			continue
		}
		recs = append(recs, g.claimRecord(ctx, it.key, it.fp, now))
		idx = append(idx, i)
	}
	if len(recs) == 0 {
		return b
	}
	results := bs.ClaimMany(ctx, recs, now)
	if len(results) != len(recs) {
		err := errors.New("idem: ClaimMany returned a result count unlike its input")
		results = make([]ClaimResult, len(recs))
		for j := range results {
			results[j].Err = err
		}
	}
	for j, res := range results {
		it := &b.items[idx[j]]
		it.rec, it.claimed, it.err = g.claimed(ctx, recs[j], now, res.Prev, res.Claimed, res.Err)
	}
	return b
}

// Len returns the number of requests in the batch.
func (b *Batch) Len() int { return len(b.items) }

// DoClaimed runs or replays request i of b, with the results and errors of [Do]. When the
// request was claimed, fn runs and its outcome is recorded by [Batch.Settle] (at once if fn
// attached writes); the error returned then is fn's own. DoClaimed is safe for concurrent
// use with distinct i, and must be called at most once per i.
func DoClaimed[T any](ctx context.Context, b *Batch, i int, fn func(context.Context) (T, error)) (result T, replayed bool, err error) {
	it := &b.items[i]
	g := b.g
	if it.lazy {
		return Do(ctx, g, it.req, fn)
	}
	it.ran = true
	run := func(ctx context.Context) (any, error) {
		v, err := fn(ctx)
		result = v
		return v, err
	}
	if it.err != nil {
		if g.cfg.failOpen && errors.Is(it.err, ErrStore) {
			_, err := run(ctx)
			return result, false, err
		}
		return result, false, it.err
	}
	if !it.claimed {
		rec, err := g.conflict(ctx, it.rec, it.fp, it.now)
		if errors.Is(err, ErrInProgress) && g.cfg.waitMax > 0 {
			return Do(ctx, g, it.req, fn) // WithWait: wait for the owner as Do does
		}
		if err != nil {
			return result, false, err
		}
		if err := g.replay(rec, &result); err != nil {
			var zero T
			return zero, false, err
		}
		return result, true, nil
	}
	s := g.runHandler(ctx, it.rec, run)
	if len(s.attached) > 0 {
		return result, false, g.settle(ctx, s) // transactional: cannot join a batch
	}
	it.pending = &s
	return result, false, s.runErr
}

// Settle records the outcomes DoClaimed left pending, in as few round trips as the store
// allows, releases claimed requests that never ran, and returns, per request, the error of
// recording its outcome: nil when there was nothing to record or it was recorded, else for
// example [ErrLeaseLost] or an error wrapping [ErrStore]. A request whose DoClaimed
// succeeded but whose Settle error is non-nil did not durably complete: treat it as failed.
// Call Settle once, after every DoClaimed has returned.
func (b *Batch) Settle(ctx context.Context) []error {
	errs := make([]error, len(b.items))
	bs, ok := b.g.store.(BatchStore)
	if !ok {
		return errs
	}
	g := b.g
	var (
		done        []*Record
		doneIdx     []int
		keys, toks  []string
		relSettle   []*settlement
		releaseNone = errors.New("idem: claimed but not run")
	)

	for i := range b.items {
		it := &b.items[i]
		switch {
		case it.claimed && !it.ran:
			keys, toks = append(keys, it.key), append(toks, it.rec.LeaseToken)
			relSettle = append(relSettle, &settlement{l: &lease{g: g, key: it.key, token: it.rec.LeaseToken}, start: g.now(), runErr: releaseNone})
		case it.pending == nil:
		case it.pending.done == nil:
			keys, toks = append(keys, it.key), append(toks, it.rec.LeaseToken)
			relSettle = append(relSettle, it.pending)
		default:
			done, doneIdx = append(done, it.pending.done), append(doneIdx, i)
		}
	}
	cctx, cancel := detached(ctx)
	defer cancel()
	if len(done) > 0 {
		results := bs.CompleteMany(cctx, done)
		for j, i := range doneIdx {
			var err error = errors.New("idem: CompleteMany returned a result count unlike its input")
			if len(results) == len(done) {
				err = results[j]
			}
			s := *b.items[i].pending
			s.runErr = nil // DoClaimed already returned a remembered failure's error
			errs[i] = g.completed(ctx, s, err)
		}
	}
	if len(keys) > 0 {
		results := bs.ReleaseMany(cctx, keys, toks)
		for j, s := range relSettle {
			var err error = errors.New("idem: ReleaseMany returned a result count unlike its input")
			if len(results) == len(keys) {
				err = results[j]
			}
			g.released(ctx, s.l, s.start, s.runErr, err)
		}
	}
	return errs
}
