package sim

import (
	"context"
	"errors"
	"fmt"
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
	errShutdown = errors.New("sim: the schedule is over")
)

// store is the simulated store: a real *memstore.Store, the reference semantics, with a
// scheduling point before every request reaches it (where the scheduler may fail it, lose
// its response, or hold the response back) and the ledger's observations of what applied.
type store struct {
	w      *world
	mem    *memstore.Store
	mutant string // a deliberate store bug, for the test that the invariants catch bugs
}

// The mutants: deliberate store bugs that the invariants must catch.
const (
	mutantClaimIgnoresLeases    = "claim-ignores-leases"    // a claim takes over live in-progress records
	mutantCompleteDropsAttached = "complete-drops-attached" // a completion commits without its attached writes
	mutantCompleteLies          = "complete-lies"           // a single completion answers nil without applying
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

// request blocks at the point before a request and returns the scheduler's decision. If
// the request's context ends first, as a real SDK does, it returns the context's error
// without applying (see world.blockCtx).
func (s *store) request(ctx context.Context, op, keys string) (*actor, decision, error) {
	a := actorOf(ctx)
	d, err := s.w.blockCtx(ctx, a, pointStore, op, keys)
	return a, d, err
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

// Claim implements idemstore.Store.
func (s *store) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	n := s.name(rec.Key)
	a, d, err := s.request(ctx, "claim", n)
	if err != nil {
		return nil, false, err
	}
	if d.abort {
		return nil, false, errShutdown
	}
	if d.fault == faultBefore {
		return nil, false, errInjected
	}
	prev, claimed, err := s.mem.Claim(ctx, rec, now)
	if s.mutant == mutantClaimIgnoresLeases && err == nil && !claimed && prev.Status == idemstore.StatusInProgress && prev.LeaseToken != rec.LeaseToken {
		s.mem.Put(*rec)
		claimed = true
	}
	s.w.led.claimed(s.w, a, rec, now, prev, claimed, err)
	switch d.fault {
	case faultLose:
		return nil, false, errLost
	case faultResend:
		prev, claimed, err = s.mem.Claim(ctx, rec, now)
		s.w.led.claimed(s.w, a, rec, now, prev, claimed, err)
		s.w.led.markResent(rec.LeaseToken)
	}
	if err := s.respond(ctx, a, d, "claim", n); err != nil {
		return nil, false, err
	}
	return prev, claimed, err
}

// call makes one request that answers with an error alone: the point, the scheduler's
// fault, apply (the inner call and the ledger's observation of it), and the answer.
func (s *store) call(ctx context.Context, op, n string, apply func() error) (*actor, error) {
	a, d, err := s.request(ctx, op, n)
	if err != nil {
		return a, err
	}
	if d.abort {
		return a, errShutdown
	}
	if d.fault == faultBefore {
		return a, errInjected
	}
	err = apply()
	if d.fault == faultLose || d.fault == faultResend {
		return a, errLost
	}
	if err := s.respond(ctx, a, d, op, n); err != nil {
		return a, err
	}
	return a, err
}

// Get implements idemstore.Store.
func (s *store) Get(ctx context.Context, key string) (*idemstore.Record, error) {
	var rec *idemstore.Record
	_, err := s.call(ctx, "get", s.name(key), func() (err error) {
		rec, err = s.mem.Get(ctx, key)
		return err
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// Complete implements idemstore.Store. A lost response is not resent: DynamoDB's transactions
// carry a client token that makes a resend a no-op, which the in-memory store cannot model.
func (s *store) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	a := actorOf(ctx)
	s.w.led.completeSent(s.w, a, []string{rec.LeaseToken})
	_, err := s.call(ctx, "complete", s.name(rec.Key), func() error {
		var err error
		switch s.mutant {
		case mutantCompleteDropsAttached:
			err = s.mem.Complete(ctx, rec, nil)
		case mutantCompleteLies:
			return nil
		default:
			err = s.mem.Complete(ctx, rec, attached)
		}
		s.w.led.completed(s.w, a, rec, err)
		return err
	})
	s.w.led.completeAnswered(a, rec.LeaseToken, err)
	return err
}

// Release implements idemstore.Store.
func (s *store) Release(ctx context.Context, key, token string, now time.Time) error {
	_, err := s.call(ctx, "release", s.name(key), func() error {
		err := s.mem.Release(ctx, key, token, now)
		s.w.led.released(s.w, key, token, err)
		return err
	})
	return err
}

// Extend implements idemstore.Store.
func (s *store) Extend(ctx context.Context, key, token string, leaseExpires time.Time) error {
	_, err := s.call(ctx, "extend", s.name(key), func() error {
		err := s.mem.Extend(ctx, key, token, leaseExpires)
		s.w.led.extended(s.w, token, leaseExpires, err)
		return err
	})
	return err
}

// SetCheckpoint implements idemstore.Store.
func (s *store) SetCheckpoint(ctx context.Context, key, token, checkpoint string, seq int64) error {
	_, err := s.call(ctx, "checkpoint", s.name(key), func() error {
		err := s.mem.SetCheckpoint(ctx, key, token, checkpoint, seq)
		s.w.led.checkpointed(s.w, key, token, checkpoint, err)
		return err
	})
	return err
}

// ClaimMany implements idemstore.BatchStore: one request for the whole batch.
func (s *batchStore) ClaimMany(ctx context.Context, recs []*idemstore.Record, now time.Time) []idemstore.ClaimResult {
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = r.Key
	}
	n := s.names(keys)
	fail := func(err error) []idemstore.ClaimResult {
		out := make([]idemstore.ClaimResult, len(recs))
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	a, d, err := s.request(ctx, "claimMany", n)
	if err != nil {
		return fail(err)
	}
	if d.abort {
		return fail(errShutdown)
	}
	if d.fault == faultBefore {
		return fail(errInjected)
	}
	apply := func() []idemstore.ClaimResult {
		out := s.mem.ClaimMany(ctx, recs, now)
		for i, r := range out {
			s.w.led.claimed(s.w, a, recs[i], now, r.Prev, r.Claimed, r.Err)
		}
		return out
	}
	out := apply()
	switch d.fault {
	case faultLose:
		return fail(errLost)
	case faultResend:
		out = apply()
		for _, r := range recs {
			s.w.led.markResent(r.LeaseToken)
		}
	}
	if err := s.respond(ctx, a, d, "claimMany", n); err != nil {
		return fail(err)
	}
	return out
}

// CompleteMany implements idemstore.BatchStore: one request for the whole batch.
func (s *batchStore) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	return s.completeMany(ctx, "completeMany", recs, func() []error { return s.mem.CompleteMany(ctx, recs) })
}

// CompleteManyAttached implements idemstore.BatchAttachStore: one request for the whole
// batch, each record's completion and attached writes applying together or not at all (the
// reference store completes them one by one). Its faults are those of CompleteMany: a
// failure before it applies, a lost response after it applied (the guard then resends each
// record alone with Complete and reads it back), a late answer; the caller may crash at any
// of its points. The mutant complete-drops-attached drops the attached writes here too.
func (s *batchStore) CompleteManyAttached(ctx context.Context, recs []*idemstore.Record, attached [][]any) []error {
	return s.completeMany(ctx, "completeManyAttached", recs, func() []error {
		if s.mutant == mutantCompleteDropsAttached {
			attached = nil
		}
		return s.mem.CompleteManyAttached(ctx, recs, attached)
	})
}

// completeMany is one batch completion request named op: apply makes it on the reference
// store once the request has arrived without a fault before it, and the ledger records
// what was sent, applied and answered, the faults as CompleteMany's doc says.
func (s *batchStore) completeMany(ctx context.Context, op string, recs []*idemstore.Record, apply func() []error) []error {
	keys := make([]string, len(recs))
	tokens := make([]string, len(recs))
	for i, r := range recs {
		keys[i], tokens[i] = r.Key, r.LeaseToken
	}
	n := s.names(keys)
	s.w.led.completeSent(s.w, actorOf(ctx), tokens)
	a, d, err := s.request(ctx, op, n)
	if err != nil {
		return fill(len(recs), err)
	}
	if d.abort {
		return fill(len(recs), errShutdown)
	}
	if d.fault == faultBefore {
		return fill(len(recs), errInjected)
	}
	out := apply()
	for i, err := range out {
		s.w.led.completed(s.w, a, recs[i], err)
	}
	if d.fault == faultLose || d.fault == faultResend {
		return fill(len(recs), errLost)
	}
	if err := s.respond(ctx, a, d, op, n); err != nil {
		return fill(len(recs), err)
	}
	for i, err := range out {
		s.w.led.completeAnswered(a, recs[i].LeaseToken, err)
	}
	return out
}

// ReleaseMany implements idemstore.BatchStore: one request for the whole batch.
func (s *batchStore) ReleaseMany(ctx context.Context, keys, tokens []string, now time.Time) []error {
	n := s.names(keys)
	a, d, err := s.request(ctx, "releaseMany", n)
	if err != nil {
		return fill(len(keys), err)
	}
	if d.abort {
		return fill(len(keys), errShutdown)
	}
	if d.fault == faultBefore {
		return fill(len(keys), errInjected)
	}
	out := s.mem.ReleaseMany(ctx, keys, tokens, now)
	for i, err := range out {
		s.w.led.released(s.w, keys[i], tokens[i], err)
	}
	if d.fault == faultLose || d.fault == faultResend {
		return fill(len(keys), errLost)
	}
	if err := s.respond(ctx, a, d, "releaseMany", n); err != nil {
		return fill(len(keys), err)
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

// truth returns the stored record for key as the table holds it, bypassing the scheduler.
func (s *store) truth(key string) *idemstore.Record {
	rec, _ := s.mem.Get(context.Background(), key)
	return rec
}
