package idem

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// MemStore is an in-memory [Store] with the same semantics as the DynamoDB store, for tests
// and local runs. It is safe for concurrent use. Expired records are treated as absent but
// kept until overwritten, as DynamoDB's lagging TTL deletion would.
//
// Attached writes ([Attach]) must be of type func() error: they run under the store's lock
// when the completion's lease condition holds, and an error from one fails the completion
// with [ErrConditionFailed]. Functions that ran before the failing one are not undone, so
// in-memory atomicity holds only for writes that fail before they change anything.
type MemStore struct {
	mu      sync.Mutex
	records map[string]Record
}

// NewMemStore returns an empty in-memory store.
func NewMemStore() *MemStore {
	return &MemStore{records: make(map[string]Record)}
}

func clone(r Record) *Record {
	r.Data = append([]byte(nil), r.Data...)
	return &r
}

// Claim implements [Store].
func (s *MemStore) Claim(ctx context.Context, rec *Record, now time.Time) (*Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.records[rec.Key]
	if ok && !old.claimableBy(rec, now) {
		return clone(old), false, nil
	}
	s.records[rec.Key] = *clone(*rec)
	if !ok {
		return nil, true, nil
	}
	return clone(old), true, nil
}

// Get implements [Store].
func (s *MemStore) Get(ctx context.Context, key string) (*Record, error) {
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
func (s *MemStore) owned(key, token string, inProgress bool) (Record, error) {
	r, ok := s.records[key]
	if !ok || r.LeaseToken != token || (inProgress && r.Status != StatusInProgress) {
		return Record{}, ErrLeaseLost
	}
	return r, nil
}

// Complete implements [Store].
func (s *MemStore) Complete(ctx context.Context, rec *Record, attached []any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	writes := make([]func() error, len(attached))
	for i, a := range attached {
		f, ok := a.(func() error)
		if !ok {
			return fmt.Errorf("idem: MemStore: attached write %d is %T, want func() error", i, a)
		}
		writes[i] = f
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.owned(rec.Key, rec.LeaseToken, false)
	if err != nil {
		return err
	}
	if old.Status != StatusInProgress {
		return nil // completed already: a resend, whose writes must not run again
	}
	for _, w := range writes {
		if err := w(); err != nil {
			return fmt.Errorf("%w: %w", ErrConditionFailed, err)
		}
	}
	next := *clone(*rec)
	next.Checkpoint = old.Checkpoint
	next.LeaseExpires = time.Time{}
	s.records[rec.Key] = next
	return nil
}

// Release implements [Store].
func (s *MemStore) Release(ctx context.Context, key, token string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.owned(key, token, true)
	if err != nil {
		return err
	}
	if r.Checkpoint == "" {
		delete(s.records, key)
		return nil
	}
	r.LeaseExpires = time.Unix(0, 0) // ended for every clock, as the DynamoDB store writes it
	r.LeaseToken = ReleasedToken(token)
	s.records[key] = r
	return nil
}

// Extend implements [Store].
func (s *MemStore) Extend(ctx context.Context, key, token string, leaseExpires time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.owned(key, token, true)
	if err != nil {
		return err
	}
	r.LeaseExpires = leaseExpires
	s.records[key] = r
	return nil
}

// SetCheckpoint implements [Store].
func (s *MemStore) SetCheckpoint(ctx context.Context, key, token, checkpoint string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.owned(key, token, true)
	if err != nil {
		return err
	}
	r.Checkpoint = checkpoint
	s.records[key] = r
	return nil
}

// Put writes rec as it is, unconditionally. It is for tests that need a record in a given
// state (an expired lease, a hostile or outdated record).
func (s *MemStore) Put(rec Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[rec.Key] = *clone(rec)
}

// Len returns the number of records held, expired ones included.
func (s *MemStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

// ClaimMany implements [BatchStore] by claiming each record in turn.
func (s *MemStore) ClaimMany(ctx context.Context, recs []*Record, now time.Time) []ClaimResult {
	out := make([]ClaimResult, len(recs))
	for i, r := range recs {
		out[i].Prev, out[i].Claimed, out[i].Err = s.Claim(ctx, r, now)
	}
	return out
}

// CompleteMany implements [BatchStore] by completing each record in turn.
func (s *MemStore) CompleteMany(ctx context.Context, recs []*Record) []error {
	out := make([]error, len(recs))
	for i, r := range recs {
		out[i] = s.Complete(ctx, r, nil)
	}
	return out
}

// ReleaseMany implements [BatchStore] by releasing each key in turn.
func (s *MemStore) ReleaseMany(ctx context.Context, keys, tokens []string) []error {
	out := make([]error, len(keys))
	for i := range keys {
		out[i] = s.Release(ctx, keys[i], tokens[i])
	}
	return out
}
