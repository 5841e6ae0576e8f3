package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// Errors the simulated store answers with. Both wrap idem.ErrStore, as the Store contract
// asks of store failures.
var (
	errInjected = fmt.Errorf("%w: sim: injected failure, not applied", idem.ErrStore)
	errLost     = fmt.Errorf("%w: sim: response lost after the request applied", idem.ErrStore)
	errUnread   = fmt.Errorf("%w: sim: the record met could not be read", idem.ErrStore)
	errShutdown = errors.New("sim: the schedule is over")
)

// store is the simulated store: a real *memstore.Store, the reference semantics, with a
// scheduling point before every request reaches it (where the scheduler may fail it, lose
// its response, or hold the response back) and the ledger's observations of what applied.
type store struct {
	w      *world
	mem    *memstore.Store
	mutant string // a deliberate store bug, for the test that the invariants catch bugs
	// cpSeq is, for variantCheckpointsInOrder, the sequence number of the checkpoint
	// request each token's record holds.
	cpSeq map[string]uint64
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// The mutants: deliberate store bugs that the invariants must catch.
const (
	// A claim takes over live in-progress records.
	mutantClaimIgnoresLeases = "claim-ignores-leases"
	// A completion commits without its attached writes.
	mutantCompleteDropsAttached = "complete-drops-attached"
	// A single completion answers nil without applying.
	mutantCompleteLies = "complete-lies"
	// An extension writes the end it carries, even an earlier one.
	mutantExtendAnyEnd = "extend-any-end"
	// A checkpoint overwrites whatever the record holds, even a later one.
	mutantCheckpointAnyOrder = "checkpoint-any-order"
	// A batch release answers nil without being sent: as a caller that never releases
	// the claims it did not start.
	mutantReleaseManySkipped = "release-many-skipped"

	// Not bugs: the semantics issue 22 items 1 and 2 ask of every store, for the test that
	// the invariants hold them (no false alarm).

	// An extension never lowers the stored end (PostgreSQL's GREATEST).
	variantExtendKeepsLater = "extend-keeps-later"
	// A checkpoint sent before the one the record holds is a no-op.
	variantCheckpointsInOrder = "checkpoints-in-order"
)

// batchStore is the simulated store with idemstore.BatchStore and
// idemstore.BatchAttachStore.
type batchStore struct{ *store }

func (s *store) name(key string) string {
	if n, ok := s.w.keyNames[key]; ok {
		return n
	}
	return "?" + key[max(0, len(key)-6):]
}

func (s *store) names(keys []string) string {
	n := make([]string, len(keys))
	for i, k := range keys {
		n[i] = s.name(k)
	}
	return strings.Join(n, "+")
}

// attempt says which attempt of a request applies: the one its caller waits for, the
// SDK's resend of it, or a first attempt landing late, which no one waits for.
type attempt uint8

const (
	attemptFirst  attempt = iota
	attemptResend         // the SDK's resend, after the first attempt's response was lost
	attemptLate           // a first attempt landing after its resend, or after its caller gave up
)

// send makes one request named op, for the keys named n, through its scheduling point: every
// store call goes through here. apply makes the request on the reference store and records
// in the ledger what applied; it returns the store's answer, which send returns as res, with
// err nil. Otherwise err is the error the caller gets instead. At the point the scheduler
// decides the request's fault:
//
//   - faultBefore: it fails without applying;
//   - faultLose: it applies and the response is lost;
//   - faultResend: it applies, the response is lost, and the SDK resends it: the resend
//     applies too, and its answer is the caller's;
//   - faultLate: it applies and answers at a later point (respond);
//   - faultDelay: the SDK resends it, the resend applies and answers now, and the first
//     attempt lands at a later step, within the SDK's retry window (see world.addGhost).
//
// If the caller's context ends while the request waits at its point, the caller gets the
// context's error at once; with FeatDelay the request may have been on its way, and may
// still land later. A late attempt applies on a context that does not end: the store does
// not know its caller gave up.
func (s *store) send(ctx context.Context, op, n string, apply func(context.Context, attempt, []bool) any) (res any, err error) {
	a := actorOf(ctx)
	if tag := reqTag(ctx); tag != "" {
		if err := ctx.Err(); err != nil {
			// A request of a batch with duplicate keys, made on a context that has ended:
			// the SDK returns the context's error without sending it. (Whether the library
			// makes it at all may depend on a select between that context and another
			// request's outcome, both ready: no point, so that the schedule does not.)
			return nil, fmt.Errorf("%w: sim: request not sent: %w", idem.ErrStore, err)
		}
		n += tag
	}
	late := func(maybe bool) {
		if s.w.p.has(FeatDelay) {
			lctx := context.WithoutCancel(ctx)
			s.w.addGhost(a, op, n, maybe, func() { apply(lctx, attemptLate, nil) })
		}
	}
	d, err := s.w.blockCtx(ctx, a, pointStore, op, n)
	if d.abort {
		return nil, errShutdown
	}
	if err != nil {
		late(true)
		return nil, err
	}
	switch d.fault {
	case faultBefore:
		return nil, errInjected
	case faultLose:
		apply(ctx, attemptFirst, d.itemFail)
		return nil, errLost
	case faultResend:
		apply(ctx, attemptFirst, d.itemFail)
		res = apply(ctx, attemptResend, d.itemFail)
	case faultDelay:
		late(false)
		res = apply(ctx, attemptFirst, d.itemFail) // the resend, the first to apply
	default:
		res = apply(ctx, attemptFirst, d.itemFail)
	}
	if err := s.respond(ctx, a, d, op, n); err != nil {
		return nil, err
	}
	return res, nil
}

// respond holds a late answer back until the scheduler releases it. It returns errShutdown
// when the schedule is over, and the context's error if the caller's context ends first:
// the request applied, and its caller never hears so.
func (s *store) respond(ctx context.Context, a *actor, d decision, op, keys string) error {
	if d.fault != faultLate {
		return nil
	}
	d, err := s.w.blockCtx(ctx, a, pointStoreResp, op+"-resp", keys)
	if d.abort {
		return errShutdown
	}
	return err
}

// errOf returns the error a request answered with: res itself, or the error err the caller
// got instead.
func errOf(res any, err error) error {
	if err != nil {
		return err
	}
	e, _ := res.(error)
	return e
}

// claimAnswer is a claim's answer.
type claimAnswer struct {
	prev    *idemstore.Record
	claimed bool
	err     error
}

// Claim implements idemstore.Store. The record is copied as it was sent: the guard may
// change it for its next attempt (carrying a checkpoint) while this one is on its way.
func (s *store) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	sent := *rec
	poll := s.w.streamPoll(actorOf(ctx), rec.Key)
	res, err := s.send(ctx, "claim", s.name(rec.Key), func(ctx context.Context, at attempt, _ []bool) any {
		rec := sent
		a := actorOf(ctx)
		prev, claimed, err := s.mem.Claim(ctx, &rec, now)
		if s.mutant == mutantClaimIgnoresLeases && err == nil && !claimed && prev.Status == idemstore.StatusInProgress && prev.LeaseToken != rec.LeaseToken {
			s.mem.Put(rec)
			claimed = true
		}
		s.w.led.claimed(s.w, a, &rec, now, prev, claimed, err, at)
		if tag := reqTag(ctx); tag != "" {
			s.w.led.tagRun(rec.LeaseToken, tag)
		}
		if at == attemptResend {
			s.w.led.markResent(rec.LeaseToken)
		}
		return claimAnswer{prev, claimed, err}
	})
	if err != nil {
		return nil, false, err
	}
	c := res.(claimAnswer)
	if poll && c.err == nil && c.claimed {
		s.w.led.mu.Lock()
		s.w.led.stats.StreamTakeovers++
		s.w.led.mu.Unlock()
	}
	if c.err == nil && (c.claimed || c.prev != nil && c.prev.LeaseToken == rec.LeaseToken) {
		s.w.led.claimAnswered(rec.LeaseToken)
	}
	if c.prev != nil || c.claimed {
		s.w.led.metRecord(actorOf(ctx), rec.Key)
	}
	return c.prev, c.claimed, c.err
}

// Get implements idemstore.Store.
func (s *store) Get(ctx context.Context, key string) (*idemstore.Record, error) {
	s.w.streamGot(actorOf(ctx), key)
	type got struct {
		rec *idemstore.Record
		err error
	}
	res, err := s.send(ctx, "get", s.name(key), func(ctx context.Context, _ attempt, _ []bool) any {
		rec, err := s.mem.Get(ctx, key)
		return got{rec, err}
	})
	if err != nil {
		return nil, err
	}
	g := res.(got)
	return g.rec, g.err
}

// Complete implements idemstore.Store. A resend of a completion that applied is a no-op
// that answers nil (DynamoDB's transactions carry a client token to the same effect), and
// so is its first attempt landing after it: memstore's Complete does both.
func (s *store) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	s.panicIfPoisoned(ctx, []*idemstore.Record{rec}, [][]any{attached})
	a := actorOf(ctx)
	sent := *rec
	s.w.led.completeSent(s.w, a, []*idemstore.Record{rec})
	res, err := s.send(ctx, "complete", s.name(rec.Key), func(ctx context.Context, _ attempt, _ []bool) any {
		rec := sent
		var err error
		switch s.mutant {
		case mutantCompleteDropsAttached:
			err = s.mem.Complete(ctx, &rec, nil)
		case mutantCompleteLies:
			return nil
		default:
			err = s.mem.Complete(ctx, &rec, attached)
		}
		s.w.led.completed(s.w, a, &rec, err)
		return err
	})
	err = errOf(res, err)
	s.w.led.completeAnswered(a, rec.LeaseToken, err)
	return err
}

// Release implements idemstore.Store.
func (s *store) Release(ctx context.Context, key, token string, now time.Time) error {
	s.w.led.releaseMade(token)
	res, err := s.send(ctx, "release", s.name(key), func(ctx context.Context, _ attempt, _ []bool) any {
		err := s.mem.Release(ctx, key, token, now)
		s.w.led.released(s.w, key, token, err)
		return err
	})
	return errOf(res, err)
}

// Extend implements idemstore.Store. The ledger learns the lease end the store holds after
// it, whatever end the request carried: a store may keep a later one.
func (s *store) Extend(ctx context.Context, key, token string, leaseExpires time.Time) error {
	res, err := s.send(ctx, "extend", s.name(key), func(ctx context.Context, at attempt, _ []bool) any {
		var err error
		switch s.mutant {
		case mutantExtendAnyEnd:
			err = s.overwrite(key, token, func(r *idemstore.Record) { r.LeaseExpires = leaseExpires })
		case variantExtendKeepsLater:
			err = s.overwrite(key, token, func(r *idemstore.Record) { r.LeaseExpires = later(r.LeaseExpires, leaseExpires) })
		default:
			err = s.mem.Extend(ctx, key, token, leaseExpires)
		}
		if rec := s.truth(key); err == nil && rec != nil && rec.LeaseToken == token {
			s.w.led.extended(s.w, token, rec.LeaseExpires, at)
		}
		return err
	})
	err = errOf(res, err)
	if err == nil {
		s.w.led.extendAcked(s.w, token, leaseExpires)
	}
	return err
}

// SetCheckpoint implements idemstore.Store; n, the checkpoint's number, goes to the
// reference store as it is. The ledger learns that the checkpoint applied if the record
// holds it after the request, whatever the store answered: a store keeps a later
// checkpoint and answers nil.
func (s *store) SetCheckpoint(ctx context.Context, key, token, checkpoint string, n int64) error {
	seq := s.w.led.checkpointSent()
	res, err := s.send(ctx, "checkpoint", s.name(key), func(ctx context.Context, at attempt, _ []bool) any {
		before := s.truth(key)
		var err error
		switch s.mutant {
		case mutantCheckpointAnyOrder:
			err = s.overwrite(key, token, func(r *idemstore.Record) { r.Checkpoint = checkpoint })
		case variantCheckpointsInOrder:
			err = s.overwrite(key, token, func(r *idemstore.Record) {
				if s.cpSeq[token] < seq {
					s.cpSeq[token], r.Checkpoint = seq, checkpoint
				}
			})
		default:
			err = s.mem.SetCheckpoint(ctx, key, token, checkpoint, n)
		}
		after := s.truth(key)
		if err == nil && after != nil && after.LeaseToken == token && after.Checkpoint == checkpoint &&
			(before == nil || before.LeaseToken != token || before.Checkpoint != checkpoint || before.Status != idemstore.StatusInProgress || at != attemptLate) {
			s.w.led.checkpointed(s.w, key, token, checkpoint, seq, at)
		}
		return err
	})
	err = errOf(res, err)
	if err == nil {
		s.w.led.checkpointAcked(s.w, key, token, checkpoint, seq)
	}
	return err
}

// ClaimMany implements idemstore.BatchStore: one request for the whole batch.
func (s *batchStore) ClaimMany(ctx context.Context, recs []*idemstore.Record, now time.Time) []idemstore.ClaimResult {
	keys := make([]string, len(recs))
	sent := make([]idemstore.Record, len(recs))
	for i, r := range recs {
		keys[i], sent[i] = r.Key, *r
	}
	res, err := s.send(ctx, "claimMany", s.names(keys), func(ctx context.Context, at attempt, fail []bool) any {
		a := actorOf(ctx)
		recs := make([]*idemstore.Record, len(sent))
		for i := range sent {
			r := sent[i]
			recs[i] = &r
		}
		out := make([]idemstore.ClaimResult, len(recs))
		// The items failing with the record they met (FeatBatchMix), drawn on the failing
		// items' bits past the first len(recs): see metFail.
		met, unread := metFail(fail, len(recs))
		var sub []int
		for _, i := range subset(fail, len(recs)) {
			if met[i] && !unread[i] {
				// The claim goes through; a refusal comes back without the result it
				// could not read, with the error.
				prev, claimed, err := s.mem.Claim(ctx, recs[i], now)
				out[i] = idemstore.ClaimResult{Prev: prev, Claimed: claimed, Err: err}
				if err == nil && !claimed && prev != nil {
					p := *prev
					p.Data = nil
					out[i].Prev, out[i].Err = &p, errUnread
				}
				continue
			}
			if met[i] {
				if rec := s.truth(recs[i].Key); rec != nil {
					// The insert met an item that could not be read: its key alone.
					out[i] = idemstore.ClaimResult{Prev: &idemstore.Record{Key: rec.Key}, Err: errUnread}
					continue
				}
			}
			sub = append(sub, i)
		}
		for j, r := range s.mem.ClaimMany(ctx, pick(recs, sub), now) {
			out[sub[j]] = r
		}
		for i := range out {
			if i < len(fail) && fail[i] {
				out[i].Err = errInjected
			}
		}
		for i, r := range out {
			s.w.led.claimed(s.w, a, recs[i], now, r.Prev, r.Claimed, r.Err, at)
			if at == attemptResend {
				s.w.led.markResent(recs[i].LeaseToken)
			}
		}
		return out
	})
	if err != nil {
		out := make([]idemstore.ClaimResult, len(recs))
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	out := res.([]idemstore.ClaimResult)
	for i, r := range out {
		if r.Err == nil && (r.Claimed || r.Prev != nil && r.Prev.LeaseToken == recs[i].LeaseToken) {
			s.w.led.claimAnswered(recs[i].LeaseToken)
		}
		if r.Prev != nil || r.Claimed {
			s.w.led.metRecord(actorOf(ctx), recs[i].Key)
		}
	}
	return out
}

// metFail splits the n items of a claimMany decision fail, which may hold 3n bits (see
// drawMetFail): an item failing with the record it met (met), and of those, one whose
// insert met an item it could not read (unread, its claim not applied), as dynamo.Store's
// ClaimMany answers, rather than one refused whose result could not be read. Both are the
// "error, having learned that a record holds the key" of idemstore.Store.Claim.
func metFail(fail []bool, n int) (met, unread []bool) {
	met, unread = make([]bool, n), make([]bool, n)
	if len(fail) < 3*n {
		return met, unread
	}
	for i := range n {
		met[i], unread[i] = fail[n+i], fail[2*n+i]
	}
	return met, unread
}

// CompleteMany implements idemstore.BatchStore: one request for the whole batch.
func (s *batchStore) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	return s.completeMany(ctx, "completeMany", recs, func(ctx context.Context, recs []*idemstore.Record, _ []int) []error {
		return s.mem.CompleteMany(ctx, recs)
	})
}

// CompleteManyAttached implements idemstore.BatchAttachStore: one request for the whole
// batch, each record's completion and attached writes applying together or not at all (the
// reference store completes them one by one). Its faults are those of CompleteMany: a
// failure before it applies, a lost response after it applied (the guard then resends each
// record alone with Complete and reads it back), a late answer; the caller may crash at any
// of its points. The mutant complete-drops-attached drops the attached writes here too.
func (s *batchStore) CompleteManyAttached(ctx context.Context, recs []*idemstore.Record, attached [][]any) []error {
	s.panicIfPoisoned(ctx, recs, attached)
	return s.completeMany(ctx, "completeManyAttached", recs, func(ctx context.Context, recs []*idemstore.Record, sub []int) []error {
		if s.mutant == mutantCompleteDropsAttached {
			return s.mem.CompleteManyAttached(ctx, recs, nil)
		}
		return s.mem.CompleteManyAttached(ctx, recs, pick(attached, sub))
	})
}

// completeMany is one batch completion request named op: apply makes it on the reference
// store, and the ledger records what was sent, applied and answered.
func (s *batchStore) completeMany(ctx context.Context, op string, recs []*idemstore.Record, apply func(ctx context.Context, recs []*idemstore.Record, sub []int) []error) []error {
	keys := make([]string, len(recs))
	tokens := make([]string, len(recs))
	sent := make([]idemstore.Record, len(recs))
	for i, r := range recs {
		keys[i], tokens[i], sent[i] = r.Key, r.LeaseToken, *r
	}
	a := actorOf(ctx)
	s.w.led.completeSent(s.w, a, recs)
	res, err := s.send(ctx, op, s.names(keys), func(ctx context.Context, _ attempt, fail []bool) any {
		recs := make([]*idemstore.Record, len(sent))
		for i := range sent {
			r := sent[i]
			recs[i] = &r
		}
		out := fill(len(recs), errInjected)
		sub := subset(fail, len(recs))
		for j, err := range apply(ctx, pick(recs, sub), sub) {
			out[sub[j]] = err
		}
		for _, i := range sub {
			s.w.led.completed(s.w, a, recs[i], out[i])
		}
		return out
	})
	if err != nil {
		return fill(len(recs), err)
	}
	out := res.([]error)
	for i, err := range out {
		s.w.led.completeAnswered(a, tokens[i], err)
	}
	return out
}

// ReleaseMany implements idemstore.BatchStore: one request for the whole batch.
func (s *batchStore) ReleaseMany(ctx context.Context, keys, tokens []string, now time.Time) []error {
	if s.mutant == mutantReleaseManySkipped {
		return make([]error, len(keys))
	}
	keys, tokens = slices.Clone(keys), slices.Clone(tokens)
	s.w.led.releaseMade(tokens...)
	res, err := s.send(ctx, "releaseMany", s.names(keys), func(ctx context.Context, _ attempt, fail []bool) any {
		out := fill(len(keys), errInjected)
		sub := subset(fail, len(keys))
		for j, err := range s.mem.ReleaseMany(ctx, pick(keys, sub), pick(tokens, sub), now) {
			out[sub[j]] = err
		}
		for _, i := range sub {
			s.w.led.released(s.w, keys[i], tokens[i], out[i])
		}
		return out
	})
	if err != nil {
		return fill(len(keys), err)
	}
	return res.([]error)
}

// subset returns the indexes of the n items of a batch request that reach the store: those
// fail does not fail (all, for a nil fail).
func subset(fail []bool, n int) []int {
	var sub []int
	for i := range n {
		if i >= len(fail) || !fail[i] {
			sub = append(sub, i)
		}
	}
	return sub
}

// pick returns the items of xs at the indexes sub.
func pick[T any](xs []T, sub []int) []T {
	out := make([]T, len(sub))
	for j, i := range sub {
		out[j] = xs[i]
	}
	return out
}

func fill(n int, err error) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}

// overwrite is the write of the mutants extend-any-end and checkpoint-any-order: it
// changes the in-progress record token holds with set, unconditionally otherwise, or
// answers idem.ErrLeaseLost.
func (s *store) overwrite(key, token string, set func(*idemstore.Record)) error {
	rec := s.truth(key)
	if rec == nil || rec.LeaseToken != token || rec.Status != idemstore.StatusInProgress {
		return idemstore.ErrLeaseLost
	}
	set(rec)
	s.mem.Put(*rec)
	return nil
}

// truth returns the stored record for key as the table holds it, bypassing the scheduler.
func (s *store) truth(key string) *idemstore.Record {
	rec, _ := s.mem.Get(context.Background(), key)
	return rec
}

// panicIfPoisoned panics as an attached write whose handler drew a panic would, on the
// caller's goroutine, in the transaction of the completion, which rolls back: the request
// was sent, and nothing of it applies (PostgreSQL's Attach).
func (s *store) panicIfPoisoned(ctx context.Context, recs []*idemstore.Record, attached [][]any) {
	for i, r := range recs {
		if i < len(attached) && len(attached[i]) > 0 {
			if run, ok := s.w.panicTokens.Load(r.LeaseToken); ok {
				s.w.led.completeSent(s.w, actorOf(ctx), recs)
				s.w.led.attachPanicked()
				panic(panicValue{run: run.(int)})
			}
		}
	}
}
