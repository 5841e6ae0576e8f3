package idem_test

// Failing tests from the final hostile review (branch final). Each names the path that
// breaks the promise; none changes library code.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// unfencedRelease is a store over a MemStore whose completions all end with an error of
// unknown outcome, the first still in flight at the store (queued, applied when the test
// lets it land), and whose releases fail with a store error without applying: DynamoDB
// refuses a DeleteItem/UpdateItem on an item an ongoing transaction holds
// (TransactionConflictException), or throttles it past the SDK's retries.
type unfencedRelease struct {
	*memstore.Store
	mu       sync.Mutex
	queued   func() error
	attempts int
	later    error // what attempts after the first return; nil for an unknown outcome
	releases atomic.Int32
}

func (s *unfencedRelease) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if s.attempts == 1 {
		r := *rec
		s.queued = func() error { return s.Store.Complete(context.Background(), &r, attached) }
	} else if s.later != nil {
		return s.later
	}
	return &idem.StoreError{Op: "complete", Err: context.DeadlineExceeded}
}

func (s *unfencedRelease) Release(ctx context.Context, key, token string) error {
	s.releases.Add(1)
	return &idem.StoreError{Op: "release", Err: errors.New("TransactionConflictException (injected)")}
}

func (s *unfencedRelease) land() error {
	s.mu.Lock()
	q := s.queued
	s.queued = nil
	s.mu.Unlock()
	if q == nil {
		return errors.New("nothing in flight")
	}
	return q()
}

// FINAL HOLE 1 (wrong answer: "nothing committed" after a commit; the known in-flight
// case, when the release that should fence it fails).
//
// Path: a handler attaches a write. Every completion attempt fails with an error of unknown
// outcome, the first because its transaction is still in flight at DynamoDB.
// resolveComplete reads the record INPROGRESS under our token and answers ErrNotCommitted;
// Guard.completed then relies on releaseUncommitted to fence the in-flight transaction off
// (delete the record, or replace its token). But that release fails with a store error
// (DynamoDB answers TransactionConflictException to a single write on an item that an
// ongoing transaction holds, exactly the state the in-flight transaction creates, or a
// throttle past the SDK's retries), and releaseUncommitted only logs it: the caller is
// still told ErrNotCommitted ("nothing of fn's outcome committed... the key was released,
// a retry runs fn again"). The record keeps our token and INPROGRESS, the condition the
// in-flight transaction needs: it lands, the attached write commits and the record
// completes. The caller acted on "nothing committed" (lambdawrap: 503 ProblemNotCommitted);
// it all committed. When the release is not known to have applied, the only true answer is
// OpCommit (unknown).
func TestFinalNotCommittedWhenReleaseFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		later error
	}{
		// Every attempt times out; the read-back sees INPROGRESS.
		{name: "every attempt unknown"},
		// The resend meets the first transaction still holding the item: DynamoDB cancels it
		// with reason TransactionConflict, which the dynamo store maps to ErrNotCommitted (a
		// verdict: no read-back); the release meets the same transaction and gets
		// TransactionConflictException, which the SDK does not retry.
		{name: "resend cancelled by the in-flight transaction", later: &idem.StoreError{Op: "complete",
			Err: fmt.Errorf("dynamo: complete: %w: TransactionCanceledException [None, TransactionConflict] (injected)", idemstore.ErrNotCommitted)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := storetest.NewClock()
			store := &unfencedRelease{Store: memstore.New(), later: tc.later}
			g, err := idem.New(store, "test", idem.WithClock(clock))
			require.NoError(t, err)
			req := idem.Request{Key: "pay-1"}
			var charged atomic.Int32

			_, _, err = idem.Do(deadlineIn(t, clock, time.Minute), g, req, func(ctx context.Context) (int, error) {
				require.NoError(t, idem.Attach(ctx, func() error { charged.Add(1); return nil }))
				return 7, nil
			})
			require.Error(t, err)
			notCommitted := errors.Is(err, idemstore.ErrNotCommitted)
			t.Logf("caller's error: %v (ErrNotCommitted: %v); releases tried: %d", err, notCommitted, store.releases.Load())

			landErr := store.land()
			key, err := g.StoredKey(req)
			require.NoError(t, err)
			rec, err := store.Get(context.Background(), key)
			require.NoError(t, err)
			require.NotNil(t, rec)
			t.Logf("late transaction: %v; record: %s, attached write committed %d time(s)", landErr, rec.Status, charged.Load())

			if notCommitted {
				assert.Zero(t, charged.Load(), "the caller was told ErrNotCommitted, yet the attached write committed")
				assert.NotEqual(t, idemstore.StatusCompleted, rec.Status, "the caller was told ErrNotCommitted, yet the record completed")
			}
		})
	}
}
