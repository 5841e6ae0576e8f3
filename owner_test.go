package idem_test

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

func TestPanicReleasesKey(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "test")
	require.NoError(t, err)
	assert.Panics(t, func() {
		_, _, _ = idem.Do(context.Background(), g, idem.Request{Key: "p"}, func(context.Context) (int, error) { panic("bug") })
	})
	v, replayed, err := idem.Do(context.Background(), g, idem.Request{Key: "p"}, func(context.Context) (int, error) { return 3, nil })
	require.NoError(t, err)
	assert.False(t, replayed)
	assert.Equal(t, 3, v)
}

func TestDoNotStoreBeatsRememberFailures(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "test", idem.WithRememberFailures(func(error) bool { return true }))
	require.NoError(t, err)
	runs := 0
	fn := func(context.Context) (int, error) {
		runs++
		return 503, fmt.Errorf("upstream down: %w", idem.ErrDoNotStore)
	}
	for range 2 {
		v, _, err := idem.Do(context.Background(), g, idem.Request{Key: "k"}, fn)
		require.ErrorIs(t, err, idem.ErrDoNotStore)
		assert.Equal(t, 503, v, "the handler's result comes back as is")
	}
	assert.Equal(t, 2, runs, "released, never remembered")
}

// blindStore fails every completion and every read.
type blindStore struct{ *memstore.Store }

var errBlind = errors.New("store unreachable")

func (blindStore) Complete(context.Context, *idemstore.Record, []any) error { return errBlind }
func (blindStore) Get(context.Context, string) (*idemstore.Record, error)   { return nil, errBlind }

// A completion that fails, and whose record cannot be read back, reports what is known:
// without attached writes the handler's effects stand ("complete"); with them, whether they
// committed is unknown (OpCommit), never "nothing committed" nor a plain success.
func TestCompletionOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		attach bool
		op     string
	}{
		{"no attached writes", false, "complete"},
		{"attached writes", true, idem.OpCommit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := idem.New(blindStore{memstore.New()}, "test")
			require.NoError(t, err)
			v, _, err := idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(ctx context.Context) (int, error) {
				if tc.attach {
					require.NoError(t, idem.Attach(ctx, func() error { return nil }))
				}
				return 7, nil
			})
			var se *idem.StoreError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tc.op, se.Op)
			assert.ErrorIs(t, err, errBlind)
			assert.NotErrorIs(t, err, idemstore.ErrNotCommitted)
			assert.Equal(t, 7, v, "the handler's result comes back with the error")
		})
	}
}

// Regression tests from the hostile review of the at-most-once fixes: each names a path that
// broke the promise before its fix (the fix's commit message quotes the failure).

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
// at the store. readBackCompletion's strongly consistent read shows the record still
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
	clock := storetest.NewSettableClock()
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

// Failing tests from the final hostile review (branch final). Each names the path that
// breaks the promise; none changes library code.

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

func (s *unfencedRelease) Release(ctx context.Context, key, token string, now time.Time) error {
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
// readBackCompletion reads the record INPROGRESS under our token and answers ErrNotCommitted;
// Guard.settleWritten then relies on releaseUncommitted to fence the in-flight transaction off
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
			clock := storetest.NewSettableClock()
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
