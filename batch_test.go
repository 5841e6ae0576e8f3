package idem_test

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

// runBatch claims rs, runs them concurrently, and settles the batch, under a context with
// a deadline as in Lambda: without one, outcomes are recorded as each request finishes.
func runBatch(t *testing.T, g *idem.Guard, rs []idem.Request, fn func(i int) (int, error)) (vals []int, replayed []bool, errs, settle []error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b := g.Claim(ctx, rs)
	vals, replayed, errs = make([]int, len(rs)), make([]bool, len(rs)), make([]error, len(rs))
	var wg sync.WaitGroup
	for i := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vals[i], replayed[i], errs[i] = idem.DoClaimed(ctx, b, i, func(context.Context) (int, error) { return fn(i) })
		}()
	}
	wg.Wait()
	return vals, replayed, errs, b.Settle(ctx)
}

func TestBatchRoundTrips(t *testing.T) {
	t.Parallel()
	s := newCountingBatch()
	g, err := idem.New(s, "test")
	require.NoError(t, err)
	rs := reqs("k", 10)

	vals, replayed, errs, settle := runBatch(t, g, rs, func(i int) (int, error) { return i * 10, nil })
	for i := range rs {
		require.NoError(t, errs[i])
		require.NoError(t, settle[i])
		assert.False(t, replayed[i])
		assert.Equal(t, i*10, vals[i])
	}
	assert.Equal(t, map[string]int{"claimMany": 1, "completeMany": 1}, s.calls, "10 new keys: 2 round trips")

	s.reset()
	vals, replayed, errs, settle = runBatch(t, g, rs, func(int) (int, error) { return -1, nil })
	for i := range rs {
		require.NoError(t, errs[i])
		require.NoError(t, settle[i])
		assert.True(t, replayed[i])
		assert.Equal(t, i*10, vals[i])
	}
	assert.Equal(t, map[string]int{"claimMany": 1}, s.calls, "10 replays: 1 round trip")
}

func TestBatchMixed(t *testing.T) {
	t.Parallel()
	s := newCountingBatch()
	g, err := idem.New(s, "test")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a Lambda deadline
	defer cancel()
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "done"}, func(context.Context) (int, error) { return 7, nil })
	require.NoError(t, err)
	release, started, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		_, _, _ = idem.Do(ctx, g, idem.Request{Key: "busy"}, func(context.Context) (int, error) {
			close(started)
			<-release
			return 1, nil
		})
	}()
	<-started
	defer func() { close(release); <-finished }()

	boom := errors.New("boom")
	rs := []idem.Request{{Key: "done"}, {Key: "busy"}, {Key: "new"}, {}, {Key: "fails"}, {Key: "new"}, {Key: "skipped"}}
	b := g.Claim(ctx, rs)
	v, replayed, err := idem.DoClaimed(ctx, b, 0, func(context.Context) (int, error) { return 0, nil })
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, 7, v)
	_, _, err = idem.DoClaimed(ctx, b, 1, func(context.Context) (int, error) { return 0, nil })
	require.ErrorIs(t, err, idem.ErrInProgress)
	v, _, err = idem.DoClaimed(ctx, b, 2, func(context.Context) (int, error) { return 3, nil })
	require.NoError(t, err)
	assert.Equal(t, 3, v)
	_, _, err = idem.DoClaimed(ctx, b, 3, func(context.Context) (int, error) { return 0, nil })
	require.ErrorIs(t, err, idem.ErrMissingKey)
	_, _, err = idem.DoClaimed(ctx, b, 4, func(context.Context) (int, error) { return 0, boom })
	require.ErrorIs(t, err, boom)
	v, replayed, err = idem.DoClaimed(ctx, b, 5, func(context.Context) (int, error) { return 0, nil })
	require.NoError(t, err, "a duplicate within the batch is not claimed twice")
	assert.True(t, replayed, "it replays the first's result, waiting for Settle")
	assert.Equal(t, 3, v)
	// Request 6 is never run.
	s.reset()
	for i, err := range b.Settle(ctx) {
		assert.NoError(t, err, "request %d", i)
	}
	assert.Equal(t, map[string]int{"completeMany": 1, "releaseMany": 1}, s.calls)

	// The failed and the skipped keys were released; the new key replays.
	for _, k := range []string{"fails", "skipped"} {
		_, replayed, err := idem.Do(ctx, g, idem.Request{Key: k}, func(context.Context) (int, error) { return 9, nil })
		require.NoError(t, err)
		assert.False(t, replayed, k)
	}
	v, replayed, err = idem.Do(ctx, g, idem.Request{Key: "new"}, func(context.Context) (int, error) { return 0, nil })
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, 3, v)
}

// TestBatchSettleReportsLostLease has a caller whose clock runs far ahead (beyond the lease
// margin) take over a request's key while it runs and complete it before Settle: Settle
// reports the lost lease and never overwrites the other's result.
func TestBatchSettleReportsLostLease(t *testing.T) {
	t.Parallel()
	now := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memstore.New()
	g, err := idem.New(s, "test", idem.WithClock(idem.ClockFunc(func() time.Time { return now })))
	require.NoError(t, err)
	ahead, err := idem.New(s, "test", idem.WithClock(idem.ClockFunc(func() time.Time { return now.Add(3 * time.Minute) })))
	require.NoError(t, err)
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(time.Minute)) // in the clock's time
	defer cancel()
	b := g.Claim(ctx, []idem.Request{{Key: "k"}, {Key: "pad"}})
	_, _, err = idem.DoClaimed(ctx, b, 0, func(context.Context) (int, error) {
		_, _, err := idem.Do(context.Background(), ahead, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 2, nil })
		require.NoError(t, err) // to its clock the lease had ended: it took the key and completed
		return 1, nil
	})
	require.NoError(t, err)
	require.ErrorIs(t, b.Settle(ctx)[0], idem.ErrLeaseLost)
	v, _, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 3, nil })
	require.NoError(t, err)
	assert.Equal(t, 2, v, "the late owner never overwrites")
}

func TestBatchWithoutBatchStore(t *testing.T) {
	t.Parallel()
	s := newCounting(memstore.New()) // Store only: no batch methods
	g, err := idem.New(s, "test")
	require.NoError(t, err)
	_, _, errs, settle := runBatch(t, g, reqs("k", 4), func(i int) (int, error) { return i, nil })
	for i := range errs {
		require.NoError(t, errs[i])
		require.NoError(t, settle[i])
	}
	assert.Equal(t, map[string]int{"claim": 4, "complete": 4}, s.calls)
}

// TestBatchSettleEarly settles a batch early, as the SQS wrapper does when the Lambda
// deadline nears, while a request still runs: what finished is recorded then, what had not
// started is released, and what finishes afterwards is recorded as soon as it does, since
// the invocation may be killed before any later Settle.
func TestBatchSettleEarly(t *testing.T) {
	t.Parallel()
	s := newCountingBatch()
	g, err := idem.New(s, "test")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a Lambda deadline
	defer cancel()
	b := g.Claim(ctx, reqs("e", 3))
	_, _, err = idem.DoClaimed(ctx, b, 0, func(context.Context) (int, error) { return 1, nil })
	require.NoError(t, err)

	// Request 1 is still running when the deadline nears and the batch settles early.
	running, finish := make(chan struct{}), make(chan struct{})
	result := make(chan error, 1)
	go func() {
		_, _, err := idem.DoClaimed(ctx, b, 1, func(context.Context) (int, error) {
			close(running)
			<-finish
			return 2, nil
		})
		result <- err
	}()
	<-running
	for _, err := range b.Settle(ctx) {
		require.NoError(t, err)
	}
	_, replayed, err := idem.Do(ctx, g, idem.Request{Key: "e0"}, func(context.Context) (int, error) { return 0, nil })
	require.NoError(t, err)
	assert.True(t, replayed, "finished work is recorded by the early settle")

	_, _, err = idem.DoClaimed(ctx, b, 2, func(context.Context) (int, error) { t.Error("ran"); return 0, nil })
	require.ErrorIs(t, err, idem.ErrLeaseLost, "not started before the settle: released")

	close(finish)
	require.NoError(t, <-result)
	sk, _ := g.StoredKey(idem.Request{Key: "e1"})
	rec, err := s.Get(ctx, sk)
	require.NoError(t, err)
	assert.Equal(t, idemstore.StatusCompleted, rec.Status, "finished after the early settle: recorded at once, not left for a Settle that may never run")
	for _, err := range b.Settle(ctx) {
		require.NoError(t, err)
	}
	v, replayed, err := idem.Do(ctx, g, idem.Request{Key: "e1"}, func(context.Context) (int, error) { return 0, nil })
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, 2, v)
	_, replayed, err = idem.Do(ctx, g, idem.Request{Key: "e2"}, func(context.Context) (int, error) { return 3, nil })
	require.NoError(t, err)
	assert.False(t, replayed, "the released key runs on redelivery")
}

func TestBatchLeaseLapsedBeforeStart(t *testing.T) {
	t.Parallel()
	clock := storetest.NewSettableClock()
	g, err := idem.New(memstore.New(), "test", idem.WithClock(clock), idem.WithLease(time.Minute))
	require.NoError(t, err)
	ctx := context.Background()
	b := g.Claim(ctx, reqs("l", 2))
	_, _, err = idem.DoClaimed(ctx, b, 0, func(context.Context) (int, error) {
		clock.Advance(2 * time.Minute) // a slow message outlives the batch's leases
		return 0, nil
	})
	require.NoError(t, err)
	_, _, err = idem.DoClaimed(ctx, b, 1, func(context.Context) (int, error) {
		t.Error("ran on a lapsed lease")
		return 0, nil
	})
	require.ErrorIs(t, err, idem.ErrLeaseLost)
	_, _, err = idem.DoClaimed(ctx, b, 1, func(context.Context) (int, error) { return 0, nil })
	require.Error(t, err, "a request runs at most once per batch")
}

func TestBatchDuplicateOfCachedKeyReplays(t *testing.T) {
	t.Parallel()
	g, err := idem.New(newCountingBatch(), "test", idem.WithCache(8))
	require.NoError(t, err)
	ctx := context.Background()
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "c"}, func(context.Context) (int, error) { return 5, nil })
	require.NoError(t, err)
	b := g.Claim(ctx, []idem.Request{{Key: "c"}, {Key: "c"}})
	for i := range 2 {
		v, replayed, err := idem.DoClaimed(ctx, b, i, func(context.Context) (int, error) { return 0, nil })
		require.NoError(t, err)
		assert.True(t, replayed)
		assert.Equal(t, 5, v)
	}
}

// TestBatchOutcomeWaitsOnlyWhileItsLeaseLasts runs one request of a batch and looks at its
// record when DoClaimed returns: the outcome may wait for Settle only if its lease, as last
// confirmed (heartbeat extensions included), lasts until the context's deadline, before
// which Settle runs; else another caller could take the key over and run it again before it
// is recorded, so it is recorded at once.
func TestBatchOutcomeWaitsOnlyWhileItsLeaseLasts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		deadline    time.Duration // from the claim; 0 for none
		maxLease    time.Duration
		beats       int           // heartbeat extensions while the handler runs, one per 20 s
		runFor      time.Duration // else how long the handler runs
		wantPending bool
	}{
		{name: "deadline within the max lease", deadline: 10 * time.Minute, maxLease: 15 * time.Minute, wantPending: true},
		{name: "lease capped below the deadline", deadline: 15 * time.Minute, maxLease: time.Minute},
		{name: "no deadline", maxLease: 15 * time.Minute},
		{name: "lease capped below the deadline, heartbeat past it", deadline: 3 * time.Minute, maxLease: time.Minute, beats: 8, wantPending: true},
		{name: "lease capped below the deadline, heartbeat short of it", deadline: 5 * time.Minute, maxLease: time.Minute, beats: 3},
		{name: "handler ran past the deadline", deadline: 30 * time.Second, maxLease: 15 * time.Minute, runFor: 40 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := storetest.NewSimulatedClock()
			s := newExtendStore(1 << 30)
			opts := []idem.Option{idem.WithClock(clock), idem.WithMaxLease(tc.maxLease)}
			if tc.beats > 0 {
				opts = append(opts, idem.WithHeartbeat(20*time.Second))
			}
			g, err := idem.New(s, "test", opts...)
			require.NoError(t, err)
			ctx := deadlineIn(t, clock, tc.deadline)
			b := g.Claim(ctx, reqs("p", 2))
			_, _, err = idem.DoClaimed(ctx, b, 0, func(ctx context.Context) (int, error) {
				if tc.beats > 0 {
					require.True(t, clock.DriveHeartbeat(t, ctx, s.calls, tc.beats, nil).IsZero(), "cancelled")
				}
				clock.Advance(tc.runFor)
				return 1, nil
			})
			require.NoError(t, err)
			sk, _ := g.StoredKey(idem.Request{Key: "p0"})
			rec, err := s.Get(context.Background(), sk)
			require.NoError(t, err)
			if tc.wantPending {
				assert.Equal(t, idemstore.StatusInProgress, rec.Status, "left for Settle: its lease outlasts the deadline")
			} else {
				assert.Equal(t, idemstore.StatusCompleted, rec.Status, "recorded at once: its lease could end before Settle")
			}
			for i, err := range b.Settle(ctx) {
				require.NoError(t, err, i)
			}
			rec, err = s.Get(context.Background(), sk)
			require.NoError(t, err)
			assert.Equal(t, idemstore.StatusCompleted, rec.Status)
		})
	}
}

// TestBatchFailOpenNeverOnCancelledContext: with WithFailOpen, DoClaimed refuses to run a
// request whose claim failed because the caller's own context ended, as Do does.
func TestBatchFailOpenNeverOnCancelledContext(t *testing.T) {
	t.Parallel()
	g, err := idem.New(newCountingBatch(), "test", idem.WithFailOpen(true))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := g.Claim(ctx, reqs("k", 2))
	for i := range 2 {
		_, _, err := idem.DoClaimed(ctx, b, i, func(context.Context) (int, error) {
			t.Error("ran unguarded for a caller that gave up")
			return 0, nil
		})
		require.ErrorIs(t, err, context.Canceled)
	}
}

// Regression tests from the hostile review of the at-most-once fixes: each names a path that
// broke the promise before its fix (the fix's commit message quotes the failure).

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
// Guard.writeCompletion does for Do. The record stays INPROGRESS, Settle reports a store error
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
		clock := storetest.NewSettableClock()
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
		clock := storetest.NewSettableClock()
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

// TestHoleDoClaimedStartsWithinTheMargin: DoClaimed refuses to start a request whose lease
// has ended (now >= LeaseExpires), but not one whose lease is within the margin of its end,
// although the margin is exactly the skew the guard claims to tolerate: a caller whose
// clock runs ahead by the margin may already have taken the key over. DoClaimed then runs
// the handler anyway, on a context that has ended before it starts (watch); a handler whose
// side effect does not look at its context runs a second time.
//
// Path: Guard.Claim without a deadline at T0 (lease ends T0+WithLease+margin). The batch
// reaches request 0 at T0+WithLease+margin/2. Caller B, whose clock is 1.5s ahead
// (1.5s, within the 2s margin), sees the lease ended and runs the key. Then DoClaimed on the owner:
// g.now() < it.rec.LeaseExpires, so it runs fn.
func TestHoleDoClaimedStartsWithinTheMargin(t *testing.T) {
	t.Parallel()
	const lease, margin = time.Minute, 2 * time.Second
	store := memstore.New()
	clockA := storetest.NewSimulatedClock()
	clockB := storetest.NewSimulatedClock()
	clockB.Advance(1500 * time.Millisecond) // B runs ahead of A by 1.5s: within the 2s margin
	gA, err := idem.New(store, "test", idem.WithClock(clockA), idem.WithLease(lease), idem.WithLeaseMargin(margin))
	require.NoError(t, err)
	gB, err := idem.New(store, "test", idem.WithClock(clockB), idem.WithLease(lease), idem.WithLeaseMargin(margin))
	require.NoError(t, err)

	b := gA.Claim(context.Background(), []idem.Request{{Key: "k"}, {Key: "pad"}})
	clockA.Advance(lease + margin/2)
	clockB.Advance(lease + margin/2)

	var runs atomic.Int32
	_, _, errB := idem.Do(context.Background(), gB, idem.Request{Key: "k"}, func(context.Context) (int, error) {
		runs.Add(1)
		return 2, nil
	})
	var startedOnEndedCtx bool
	_, _, errA := idem.DoClaimed(context.Background(), b, 0, func(ctx context.Context) (int, error) {
		startedOnEndedCtx = ctx.Err() != nil
		runs.Add(1) // a side effect that does not take the context
		return 1, nil
	})
	t.Logf("B: %v; A: %v; A's handler started on an ended context: %v", errB, errA, startedOnEndedCtx)
	assert.EqualValues(t, 1, runs.Load(), "the guarded handler ran more than once for one key")
}

// TestBatchOfOneKeyClaimsSingly counts store calls: a batch with one key to claim (one
// request, or one key twice) claims it with the single claim, which returns a refusing
// record in the same call; from two keys on, the batch claims together.
func TestBatchOfOneKeyClaimsSingly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		reqs []idem.Request
		want map[string]int
	}{
		{"one request", reqs("a", 1), map[string]int{"claim": 1, "complete": 1}},
		{"one key twice", []idem.Request{{Key: "a"}, {Key: "a"}}, map[string]int{"claim": 1, "complete": 1}},
		{"two keys", reqs("a", 2), map[string]int{"claimMany": 1, "completeMany": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newCountingBatch()
			g, err := idem.New(s, "test")
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b := g.Claim(ctx, tc.reqs)
			for i := range b.Len() { // a duplicate key answers in progress, with no call
				_, _, _ = idem.DoClaimed(ctx, b, i, func(context.Context) (int, error) { return 1, nil })
			}
			for _, err := range b.Settle(ctx) {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, s.counts())
		})
	}
}

// attachBatch is an in-memory batch store whose completions with attached writes
// (idemstore.BatchAttachStore) are counted, and whose answer can be lost: the store
// applies the call, then returns a store error, as a TransactWriteItems whose response
// timed out.
type attachBatch struct {
	*memstore.Store

	mu               sync.Mutex
	calls            map[string]int
	loseManyAttached int // the next n CompleteManyAttached calls apply, then fail
}

func newAttachBatch() *attachBatch {
	return &attachBatch{Store: memstore.New(), calls: map[string]int{}}
}

func (s *attachBatch) inc(op string) {
	s.mu.Lock()
	s.calls[op]++
	s.mu.Unlock()
}

func (s *attachBatch) count(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

func (s *attachBatch) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	s.inc("complete")
	return s.Store.Complete(ctx, rec, attached)
}

func (s *attachBatch) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	s.inc("completeMany")
	return s.Store.CompleteMany(ctx, recs)
}

func (s *attachBatch) CompleteManyAttached(ctx context.Context, recs []*idemstore.Record, attached [][]any) []error {
	s.inc("completeManyAttached")
	errs := s.Store.CompleteManyAttached(ctx, recs, attached)
	s.mu.Lock()
	lose := s.loseManyAttached > 0
	if lose {
		s.loseManyAttached--
	}
	s.mu.Unlock()
	if lose {
		for i := range errs {
			errs[i] = errors.New("connection reset: response lost")
		}
	}
	return errs
}

// ledger is a business table that attached writes add to: func() error writes, the kind
// memstore commits with a completion.
type ledger struct {
	mu   sync.Mutex
	sums map[string]int
	// refuse names the keys whose write's own condition fails.
	refuse map[string]bool
}

func (l *ledger) add(ctx context.Context, key string, n int) error {
	return idem.Attach(ctx, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.refuse[key] {
			return idemstore.ErrConditionFailed
		}
		if l.sums == nil {
			l.sums = map[string]int{}
		}
		l.sums[key] += n
		return nil
	})
}

func (l *ledger) sum(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sums[key]
}

// TestBatchAttachedOutcomes settles outcomes with attached writes together, on a store
// with CompleteManyAttached, and meets the four things that could go wrong with waiting
// for Settle: a crash before it, its lost answer, a lease lost while the batch runs, a
// duplicate arriving meanwhile, and one write's own failed condition.
func TestBatchAttachedOutcomes(t *testing.T) {
	t.Parallel()
	type env struct {
		s     *attachBatch
		l     *ledger
		clock *storetest.SettableClock
		g     *idem.Guard
		ctx   context.Context
		b     *idem.Batch
	}
	keys := []string{"a", "b", "c"}
	setup := func(t *testing.T, opts ...idem.Option) *env {
		e := &env{s: newAttachBatch(), l: &ledger{}, clock: storetest.NewSettableClock()}
		var err error
		e.g, err = idem.New(e.s, "test", append([]idem.Option{idem.WithClock(e.clock)}, opts...)...)
		require.NoError(t, err)
		e.ctx = deadlineIn(t, e.clock, 30*time.Second)
		return e
	}
	run := func(t *testing.T, e *env) {
		var reqs []idem.Request
		for _, k := range keys {
			reqs = append(reqs, idem.Request{Key: k})
		}
		e.b = e.g.Claim(e.ctx, reqs)
		for i, k := range keys {
			_, _, err := idem.DoClaimed(e.ctx, e.b, i, func(ctx context.Context) (int, error) {
				return i, e.l.add(ctx, k, 10)
			})
			require.NoError(t, err)
		}
	}
	status := func(t *testing.T, e *env, k string) idemstore.Status {
		sk, err := e.g.StoredKey(idem.Request{Key: k})
		require.NoError(t, err)
		rec, err := e.s.Get(context.Background(), sk)
		require.NoError(t, err)
		if !rec.Live(e.clock.Now()) {
			return "" // none, or the tombstone a release leaves
		}
		return rec.Status
	}

	t.Run("settled together", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		run(t, e)
		for _, k := range keys {
			assert.Zero(t, e.l.sum(k), "%s: nothing committed before Settle", k)
			assert.Equal(t, idemstore.StatusInProgress, status(t, e, k), k)
		}
		for _, err := range e.b.Settle(e.ctx) {
			require.NoError(t, err)
		}
		for _, k := range keys {
			assert.Equal(t, 10, e.l.sum(k), k)
			assert.Equal(t, idemstore.StatusCompleted, status(t, e, k), k)
		}
		assert.Equal(t, 1, e.s.count("completeManyAttached"))
		assert.Zero(t, e.s.count("complete"), "no completion of its own")
	})

	t.Run("crash before Settle", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		run(t, e) // and the process dies: Settle never runs
		for _, k := range keys {
			assert.Zero(t, e.l.sum(k), "%s: nothing committed", k)
		}
		e.clock.Advance(2 * time.Minute) // past every lease: the redelivery runs them again
		for _, k := range keys {
			_, replayed, err := idem.Do(deadlineIn(t, e.clock, 30*time.Second), e.g, idem.Request{Key: k}, func(ctx context.Context) (int, error) {
				return 0, e.l.add(ctx, k, 10)
			})
			require.NoError(t, err)
			assert.False(t, replayed)
			assert.Equal(t, 10, e.l.sum(k), "%s: applied once, by the run that completed", k)
		}
	})

	t.Run("answer lost", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.s.loseManyAttached = 1
		run(t, e)
		for i, err := range e.b.Settle(e.ctx) {
			require.NoError(t, err, "request %d: the resend finds it completed under its token", i)
		}
		for _, k := range keys {
			assert.Equal(t, 10, e.l.sum(k), "%s: applied once", k)
			assert.Equal(t, idemstore.StatusCompleted, status(t, e, k), k)
		}
	})

	t.Run("lease lost while the batch runs", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ahead, err := idem.New(e.s, "test", idem.WithClock(storetest.SkewedClock{Base: e.clock, Offset: 3 * time.Minute}))
		require.NoError(t, err)
		run(t, e)
		// A caller whose clock runs far ahead takes b over and completes it, its own write
		// attached.
		_, _, err = idem.Do(context.Background(), ahead, idem.Request{Key: "b"}, func(ctx context.Context) (int, error) {
			return 7, e.l.add(ctx, "b", 1)
		})
		require.NoError(t, err)
		errs := e.b.Settle(e.ctx)
		require.NoError(t, errs[0])
		require.ErrorIs(t, errs[1], idem.ErrLeaseLost)
		require.NoError(t, errs[2])
		assert.Equal(t, 10, e.l.sum("a"))
		assert.Equal(t, 1, e.l.sum("b"), "only the new owner's write")
		assert.Equal(t, 10, e.l.sum("c"))
	})

	t.Run("duplicate meanwhile", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		other, err := idem.New(e.s, "test", idem.WithClock(e.clock))
		require.NoError(t, err)
		run(t, e)
		ran := false
		_, _, err = idem.Do(deadlineIn(t, e.clock, 30*time.Second), other, idem.Request{Key: "a"}, func(ctx context.Context) (int, error) {
			ran = true
			return 0, e.l.add(ctx, "a", 10)
		})
		require.ErrorIs(t, err, idem.ErrInProgress)
		assert.False(t, ran)
		for _, err := range e.b.Settle(e.ctx) {
			require.NoError(t, err)
		}
		assert.Equal(t, 10, e.l.sum("a"))
	})

	t.Run("one write's condition fails", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.l.refuse = map[string]bool{"b": true}
		run(t, e)
		errs := e.b.Settle(e.ctx)
		require.NoError(t, errs[0])
		require.ErrorIs(t, errs[1], idem.ErrConditionFailed)
		require.NoError(t, errs[2])
		assert.Equal(t, 10, e.l.sum("a"))
		assert.Equal(t, 10, e.l.sum("c"))
		assert.Empty(t, status(t, e, "b"), "b released: a retry runs it")
	})

	t.Run("lease shorter than the deadline", func(t *testing.T) {
		t.Parallel()
		e := setup(t, idem.WithMaxLease(10*time.Second)) // below the 30 s deadline
		run(t, e)
		for _, k := range keys {
			assert.Equal(t, 10, e.l.sum(k), "%s: recorded at once", k)
		}
		assert.Equal(t, 3, e.s.count("complete"))
		for _, err := range e.b.Settle(e.ctx) {
			require.NoError(t, err)
		}
		assert.Zero(t, e.s.count("completeManyAttached"))
	})
}

// TestBatchDuplicateTakesTheRunsEnd: a duplicate in a batch takes what the key's run
// ended in, a remembered failure or a panic too, and never runs.
func TestBatchDuplicateTakesTheRunsEnd(t *testing.T) {
	t.Parallel()
	declined := errors.New("declined")
	tests := []struct {
		name string
		fn   func(context.Context) (int, error)
		want func(t *testing.T, err error)
	}{
		{
			name: "remembered failure",
			fn:   func(context.Context) (int, error) { return 0, declined },
			want: func(t *testing.T, err error) {
				var fe *idem.FailedError
				require.ErrorAs(t, err, &fe, "replayed as a retry would")
				assert.Equal(t, "declined", fe.Message)
			},
		},
		{
			name: "panic",
			fn:   func(context.Context) (int, error) { panic("boom") },
			want: func(t *testing.T, err error) {
				require.Error(t, err)
				assert.ErrorContains(t, err, "panicked")
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := idem.New(newCountingBatch(), "test", idem.WithRememberFailures(func(err error) bool { return errors.Is(err, declined) }))
			require.NoError(t, err)
			ctx := context.Background()
			b := g.Claim(ctx, []idem.Request{{Key: "k"}, {Key: "k"}, {Key: "other"}})
			func() {
				defer func() { _ = recover() }()
				_, _, _ = idem.DoClaimed(ctx, b, 0, tc.fn)
			}()
			_, replayed, err := idem.DoClaimed(ctx, b, 1, func(context.Context) (int, error) {
				t.Error("the duplicate ran")
				return 0, nil
			})
			assert.False(t, replayed)
			tc.want(t, err)
		})
	}
}

// TestBatchDuplicatesConcurrent runs many requests of one key at once, racing an early
// Settle: the key runs at most once, and every other request replays that run's result,
// or, when Settle released the key before any started, none runs and all get
// ErrLeaseLost.
func TestBatchDuplicatesConcurrent(t *testing.T) {
	t.Parallel()
	for round := range 20 {
		g, err := idem.New(newCountingBatch(), "test")
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		reqs := []idem.Request{{Key: "other"}}
		for range 8 {
			reqs = append(reqs, idem.Request{Key: "k"})
		}
		b := g.Claim(ctx, reqs)
		var runs atomic.Int32
		vals, errs := make([]int, len(reqs)), make([]error, len(reqs))
		replayed := make([]bool, len(reqs))
		var wg sync.WaitGroup
		for i := 1; i < len(reqs); i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				vals[i], replayed[i], errs[i] = idem.DoClaimed(ctx, b, i, func(context.Context) (int, error) {
					return int(runs.Add(1)) * 10, nil
				})
			}()
		}
		b.Settle(ctx)
		wg.Wait()
		b.Settle(ctx)
		cancel()
		require.LessOrEqual(t, runs.Load(), int32(1), "round %d", round)
		for i := 1; i < len(reqs); i++ {
			if runs.Load() == 0 {
				require.ErrorIs(t, errs[i], idem.ErrLeaseLost, "round %d, request %d", round, i)
				continue
			}
			require.NoError(t, errs[i], "round %d, request %d", round, i)
			assert.Equal(t, 10, vals[i], "round %d, request %d", round, i)
		}
	}
}
