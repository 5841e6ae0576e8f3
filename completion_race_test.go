package idem_test

// Failing tests from the hostile review of the at-most-once fixes (branch review). Each test
// names the path that breaks the promise, and none fixes library code.

import (
	"context"
	"errors"
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

// errReviewThrottled stands for a store call that failed for good after the SDK's own retries
// (throttling, a 5xx) without applying.
var errReviewThrottled = errors.New("throttled (injected)")

// flakyCompleteMany is a BatchStore over a MemStore whose first CompleteMany fails, for
// every record, without applying: a BatchExecuteStatement throttled past the SDK's
// retries. Later calls go through.
type flakyCompleteMany struct {
	*memstore.Store
	failures atomic.Int32 // CompleteMany calls left to fail
	calls    atomic.Int32
}

func (f *flakyCompleteMany) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	f.calls.Add(1)
	if f.failures.Add(-1) >= 0 {
		out := make([]error, len(recs))
		for i := range out {
			out[i] = &idem.StoreError{Op: "complete", Err: errReviewThrottled}
		}
		return out
	}
	return f.Store.CompleteMany(ctx, recs)
}

// flakyComplete is the single-record counterpart: its first Complete fails without
// applying.
type flakyComplete struct {
	*memstore.Store
	failures atomic.Int32
}

func (f *flakyComplete) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	if f.failures.Add(-1) >= 0 {
		return &idem.StoreError{Op: "complete", Err: errReviewThrottled}
	}
	return f.Store.Complete(ctx, rec, attached)
}

// REVIEW HOLE 1 (double execution, batch path).
//
// Path: Guard.Claim → DoClaimed leaves the outcome pending (the lease outlasts the
// deadline) → Batch.Settle sends one CompleteMany; it fails once with a store error (a
// throttled BatchExecuteStatement after the SDK's retries) → Settle hands that error
// straight to g.completed: no resend with backoff and no strongly consistent read-back, as
// Guard.complete does for Do. The record stays INPROGRESS, Settle reports a store error
// (sqs fails the message, SQS redelivers it), and once the lease ends the redelivery takes
// the key over and runs the handler a second time. The same single transient failure on
// the Do path (subtest "do") is absorbed by the resend: one run.
//
// RELIABILITY.md calls a rerun by design only when "every attempt fails"; here one attempt
// is all the batch path ever makes.
func TestReviewSettleDoesNotRetryCompletion(t *testing.T) {
	t.Parallel()
	req := idem.Request{Key: "order-1"}
	handler := func(runs *atomic.Int32) func(context.Context) (int, error) {
		return func(context.Context) (int, error) { runs.Add(1); return 42, nil }
	}

	t.Run("do", func(t *testing.T) {
		t.Parallel()
		clock := storetest.NewClock()
		store := &flakyComplete{Store: memstore.New()}
		store.failures.Store(1)
		g, err := idem.New(store, "test", idem.WithClock(clock))
		require.NoError(t, err)
		var runs atomic.Int32
		v, _, err := idem.Do(deadlineIn(t, clock, time.Minute), g, req, handler(&runs))
		require.NoError(t, err, "the resend absorbs one failed completion")
		assert.Equal(t, 42, v)
		clock.Advance(2 * time.Minute) // past any lease
		_, replayed, err := idem.Do(deadlineIn(t, clock, time.Minute), g, req, handler(&runs))
		require.NoError(t, err)
		assert.True(t, replayed)
		assert.Equal(t, int32(1), runs.Load())
	})

	t.Run("batch", func(t *testing.T) {
		t.Parallel()
		clock := storetest.NewClock()
		store := &flakyCompleteMany{Store: memstore.New()}
		store.failures.Store(1)
		g, err := idem.New(store, "test", idem.WithClock(clock))
		require.NoError(t, err)
		var runs atomic.Int32

		ctx := deadlineIn(t, clock, time.Minute)
		b := g.Claim(ctx, []idem.Request{req, {Key: "pad"}})
		v, _, err := idem.DoClaimed(ctx, b, 0, handler(&runs))
		require.NoError(t, err)
		assert.Equal(t, 42, v)
		settleErrs := b.Settle(ctx)
		assert.Equal(t, int32(1), store.calls.Load(), "Settle made one CompleteMany")

		// The redelivery after the lease (deadline plus margin) ended.
		clock.Advance(2 * time.Minute)
		_, replayed, err := idem.Do(deadlineIn(t, clock, time.Minute), g, req, handler(&runs))
		require.NoError(t, err)
		assert.NoError(t, settleErrs[0], "one transient completion failure is resent, as on the Do path")
		assert.True(t, replayed, "the retry replays the first run's result")
		assert.Equal(t, int32(1), runs.Load(), "the handler ran once per key")
	})
}

// inflightComplete models a completion transaction that is still in flight at the store
// when the guard gives up on it: the first Complete returns an error of unknown outcome
// without applying yet (a client-side timeout; the transaction is queued at DynamoDB). The
// guard's later attempts fail too. The queued transaction is applied, with its original
// condition (lease token and INPROGRESS, as the DynamoDB store's transaction requires),
// when the test lets it land.
type inflightComplete struct {
	*memstore.Store
	mu      sync.Mutex
	queued  func() error // the first attempt, not yet applied
	attempt int
}

func (s *inflightComplete) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempt++
	if s.attempt == 1 {
		r := *rec
		s.queued = func() error { return s.Store.Complete(context.Background(), &r, attached) }
	}
	return &idem.StoreError{Op: "complete", Err: context.DeadlineExceeded}
}

// land applies the queued first attempt.
func (s *inflightComplete) land() error {
	s.mu.Lock()
	q := s.queued
	s.queued = nil
	s.mu.Unlock()
	if q == nil {
		return errors.New("nothing in flight")
	}
	return q()
}

// REVIEW HOLE 2 (wrong answer: "nothing committed" after a commit).
//
// Path: a handler records a checkpoint and attaches a write. Every completion attempt ends
// with an error of unknown outcome, the first because its transaction is still in flight
// at the store. resolveComplete's strongly consistent read shows the record still
// INPROGRESS under our token, so the guard answers ErrNotCommitted ("nothing of fn's
// outcome committed... a retry runs fn again"; lambdawrap turns it into 503
// ProblemNotCommitted) and releases the key. Because the record has a checkpoint, release
// keeps it INPROGRESS under our token (its lease ended), which is exactly the condition the
// in-flight transaction needs: it lands afterwards, the attached write commits and the
// record completes. The caller was told nothing committed; it did. (Without a checkpoint
// the release deletes the record and the late transaction fails its condition, so the
// answer is then true.) A read-back cannot see a transaction still in flight, so after an
// attempt of unknown outcome the only true answer is OpCommit ("unknown"), unless the
// release fences the old token.
func TestReviewNotCommittedButCommitted(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock()
	store := &inflightComplete{Store: memstore.New()}
	g, err := idem.New(store, "test", idem.WithClock(clock))
	require.NoError(t, err)
	req := idem.Request{Key: "pay-1"}
	var charged atomic.Int32

	_, _, err = idem.Do(deadlineIn(t, clock, time.Minute), g, req, func(ctx context.Context) (int, error) {
		require.NoError(t, idem.Checkpoint(ctx, "charged"))
		require.NoError(t, idem.Attach(ctx, func() error { charged.Add(1); return nil }))
		return 7, nil
	})
	require.Error(t, err)
	notCommitted := errors.Is(err, idemstore.ErrNotCommitted)
	t.Logf("caller's error: %v (ErrNotCommitted: %v)", err, notCommitted)

	// The first attempt's transaction reaches the store after the guard answered.
	landErr := store.land()
	key, err2 := g.StoredKey(req)
	require.NoError(t, err2)
	rec, err2 := store.Get(context.Background(), key)
	require.NoError(t, err2)
	t.Logf("late transaction: %v; record: %s, attached write committed %d time(s)", landErr, rec.Status, charged.Load())

	if notCommitted {
		assert.Zero(t, charged.Load(), "the caller was told ErrNotCommitted, yet the attached write committed")
		assert.NotEqual(t, idemstore.StatusCompleted, rec.Status, "the caller was told ErrNotCommitted, yet the record completed")
	}
}
