// Package memstore is an in-memory idempotency store with the semantics of the DynamoDB
// store, for tests and local runs. Its zero value is ready to use:
//
//	var s memstore.Store
//	g, err := idem.New(&s, "create-order")
//
// It passes the same behaviour suite (package storetest) as every store in this
// repository. Records live in the process only: a guard over it protects nothing across
// Lambda execution environments, and a restart (a new execution environment, a crash)
// forgets every record, so every key runs again. Use it for tests and local runs.
package memstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemkit/idem/idemstore"
)

// Store is an in-memory [idemstore.Store], [idemstore.BatchStore] and
// [idemstore.BatchAttachStore]. The zero value is an empty store, ready to use; a Store
// must not be copied after first use. It is safe for concurrent use. Expired records are
// treated as absent but kept until overwritten, as DynamoDB's lagging TTL deletion would.
//
// Attached writes (idem.Attach) must be of type func() error, or outbox messages (as
// outbox.Record attaches; committed with the record, then listed by [Store.Outbox]), and
// idem.Attach refuses any other value at once ([Store.CheckAttached]). They run under the
// store's lock when the completion's lease condition holds, once per completion (a resent
// completion runs none):
//
//   - An error from one fails the completion with [idemstore.ErrConditionFailed]. An error
//     that wraps it, or [idemstore.ErrNotCommitted] for a write refused as a whole, is
//     returned as it is.
//   - Functions that ran before the failing one are not undone, so in-memory atomicity
//     holds only for writes that fail before they change anything.
//
// A function is the store-neutral write: the store knows no tables. To run a handler that
// attaches DynamoDB writes in memory, use package dynamotest's MemStore, which applies
// them to in-memory tables.
type Store struct {
	mu      sync.Mutex
	records map[string]idemstore.Record
	outbox  []idemstore.OutboxMessage // committed with their completions, in commit order
}

// New returns an empty store; new(Store) and a Store's zero value do as well.
func New() *Store { return new(Store) }

// put stores r under its key, making the map on first use. The caller holds s.mu.
func (s *Store) put(r idemstore.Record) {
	if s.records == nil {
		s.records = make(map[string]idemstore.Record)
	}
	s.records[r.Key] = r
}

func clone(r idemstore.Record) *idemstore.Record {
	r.Data = append([]byte(nil), r.Data...)
	return &r
}

// Claim implements [idemstore.Store].
func (s *Store) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.records[rec.Key]
	if ok && !old.ClaimableBy(rec, now) {
		return clone(old), false, nil
	}
	s.put(*clone(*rec))
	if !ok {
		return nil, true, nil
	}
	return clone(old), true, nil
}

// Get implements [idemstore.Store].
func (s *Store) Get(ctx context.Context, key string) (*idemstore.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.records[key]; ok {
		return clone(r), nil
	}
	return nil, nil
}

// owned returns the record for key if token owns it. The caller holds s.mu.
func (s *Store) owned(key, token string, inProgress bool) (idemstore.Record, error) {
	r, ok := s.records[key]
	if !ok || r.LeaseToken != token || (inProgress && r.Status != idemstore.StatusInProgress) {
		return idemstore.Record{}, idemstore.ErrLeaseLost
	}
	return r, nil
}

// CheckAttached implements [idemstore.AttachChecker]: every attached write must be a
// func() error (not nil) or an outbox message ([idemstore.OutboxMessage], as outbox.Record
// attaches), so idem.Attach refuses anything else at once.
func (s *Store) CheckAttached(attached []any) error {
	for i, a := range attached {
		if _, ok := a.(idemstore.OutboxMessage); ok {
			continue
		}
		if f, ok := a.(func() error); !ok || f == nil {
			return fmt.Errorf("memstore: attached write %d is %s, want a func() error", i, describe(a))
		}
	}
	return nil
}

// describe names a's type for an error, nil included.
func describe(a any) string {
	if f, ok := a.(func() error); ok && f == nil {
		return "a nil func() error"
	}
	return fmt.Sprintf("%T", a)
}

// Complete implements [idemstore.Store].
func (s *Store) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.CheckAttached(attached); err != nil {
		return err
	}
	var writes []func() error
	var msgs []idemstore.OutboxMessage
	for _, a := range attached {
		if m, ok := a.(idemstore.OutboxMessage); ok {
			msgs = append(msgs, m)
			continue
		}
		writes = append(writes, a.(func() error))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.owned(rec.Key, rec.LeaseToken, false)
	if err != nil {
		return err
	}
	if old.Status != idemstore.StatusInProgress {
		return nil // completed already: a resend, whose writes must not run again
	}
	for _, w := range writes {
		if err := w(); err != nil {
			if errors.Is(err, idemstore.ErrConditionFailed) || errors.Is(err, idemstore.ErrNotCommitted) {
				return err // the write says why it refused
			}
			return fmt.Errorf("%w: %w", idemstore.ErrConditionFailed, err)
		}
	}
	next := *clone(*rec)
	next.Checkpoint, next.CheckpointSeq = old.Checkpoint, old.CheckpointSeq
	next.LeaseExpires = time.Time{}
	s.put(next)
	s.outbox = append(s.outbox, msgs...)
	return nil
}

// Outbox returns the outbox messages committed so far (see package outbox), in the order
// they committed: each with its completion, none of a completion that failed or of a run
// whose lease was lost. It is what a relay would publish; tests read it.
func (s *Store) Outbox() []idemstore.OutboxMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]idemstore.OutboxMessage(nil), s.outbox...)
}

// Release implements [idemstore.Store].
func (s *Store) Release(ctx context.Context, key, token string, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.owned(key, token, true)
	if err != nil {
		return err
	}
	// Kept, never deleted, its lease ended at now: the record refuses a claim sent before
	// the release and delivered late, token's own or another owner's.
	r.LeaseExpires = now
	r.LeaseToken = idemstore.ReleasedToken(token)
	s.put(r)
	return nil
}

// Extend implements [idemstore.Store]. It never lowers the stored lease end: an
// extension to an earlier end (the late first attempt of an earlier beat) succeeds and
// leaves the later end.
func (s *Store) Extend(ctx context.Context, key, token string, leaseExpires time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.owned(key, token, true)
	if err != nil {
		return err
	}
	if leaseExpires.After(r.LeaseExpires) {
		r.LeaseExpires = leaseExpires
		s.put(r)
	}
	return nil
}

// SetCheckpoint implements [idemstore.Store]: a write numbered below the stored
// checkpoint's (a late one) changes nothing, and one that finds its own checkpoint at its
// own number (a resend) succeeds.
func (s *Store) SetCheckpoint(ctx context.Context, key, token, checkpoint string, seq int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.owned(key, token, true)
	if err != nil {
		return err
	}
	switch {
	case r.CheckpointSeq == seq && r.Checkpoint == checkpoint:
		return nil
	case r.CheckpointSeq >= seq:
		return idemstore.ErrLeaseLost
	}
	r.Checkpoint, r.CheckpointSeq = checkpoint, seq
	s.put(r)
	return nil
}

// Put writes rec as it is, unconditionally. It is for tests that need a record in a given
// state (an expired lease, a hostile or outdated record).
func (s *Store) Put(rec idemstore.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.put(*clone(rec))
}

// Len returns the number of records held, expired ones included.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

// ClaimMany implements [idemstore.BatchStore] by claiming each record in turn.
func (s *Store) ClaimMany(ctx context.Context, recs []*idemstore.Record, now time.Time) []idemstore.ClaimResult {
	out := make([]idemstore.ClaimResult, len(recs))
	for i, r := range recs {
		out[i].Prev, out[i].Claimed, out[i].Err = s.Claim(ctx, r, now)
	}
	return out
}

// CompleteMany implements [idemstore.BatchStore] by completing each record in turn.
func (s *Store) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	out := make([]error, len(recs))
	for i, r := range recs {
		out[i] = s.Complete(ctx, r, nil)
	}
	return out
}

// CompleteManyAttached implements [idemstore.BatchAttachStore] by completing each record,
// with its attached writes, in turn: each as [Store.Complete], atomic per record as far as
// Complete is, and one record's failure leaves the others as they are.
func (s *Store) CompleteManyAttached(ctx context.Context, recs []*idemstore.Record, attached [][]any) []error {
	out := make([]error, len(recs))
	for i, r := range recs {
		var a []any
		if i < len(attached) {
			a = attached[i]
		}
		out[i] = s.Complete(ctx, r, a)
	}
	return out
}

// ReleaseMany implements [idemstore.BatchStore] by releasing each key in turn.
func (s *Store) ReleaseMany(ctx context.Context, keys, tokens []string, now time.Time) []error {
	out := make([]error, len(keys))
	for i := range keys {
		out[i] = s.Release(ctx, keys[i], tokens[i], now)
	}
	return out
}
