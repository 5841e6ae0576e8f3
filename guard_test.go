package idem_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// Do returns the handler's result with its error, and a nil interface result as nil.
func TestDoReturnsResultWithError(t *testing.T) {
	g, err := idem.New(memstore.New(), "test")
	require.NoError(t, err)
	boom := errors.New("boom")
	v, replayed, err := idem.Do(context.Background(), g, idem.Request{Key: "a"}, func(context.Context) (int, error) { return 7, boom })
	require.ErrorIs(t, err, boom)
	require.False(t, replayed)
	require.Equal(t, 7, v)

	var nilErr error
	e, _, err := idem.Do(context.Background(), g, idem.Request{Key: "b"}, func(context.Context) (error, error) { return nilErr, nil })
	require.NoError(t, err)
	require.Nil(t, e)
}

func TestRoundTrips(t *testing.T) {
	t.Parallel()
	for _, cached := range []bool{false, true} {
		s := newCounting(memstore.New())
		opts := []idem.Option{idem.WithScope("rt")}
		if cached {
			opts = append(opts, idem.WithCache(8))
		}
		g, err := idem.New(s, "test", opts...)
		require.NoError(t, err)
		ctx := context.Background()
		fn := func(context.Context) (int, error) { return 1, nil }

		_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, fn)
		require.NoError(t, err)
		assert.Equal(t, 2, s.total(), "new key: claim + complete")

		s.reset()
		_, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, fn)
		require.NoError(t, err)
		assert.True(t, replayed)
		if cached {
			assert.Equal(t, 0, s.total(), "warm cache replay")
		} else {
			assert.Equal(t, 1, s.total(), "replay: the claim's conflict carries the record")
		}
	}

	s := newCounting(memstore.New())
	g, err := idem.New(s, "test")
	require.NoError(t, err)
	release := make(chan struct{})
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = idem.Do(context.Background(), g, idem.Request{Key: "busy"}, func(context.Context) (int, error) {
			close(started)
			<-release
			return 1, nil
		})
	}()
	<-started
	s.reset()
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "busy"}, func(context.Context) (int, error) { return 2, nil })
	require.ErrorIs(t, err, idem.ErrInProgress)
	assert.Equal(t, 1, s.total(), "in-flight duplicate")
	close(release)
	<-done
}

// resentClaim is a store whose claims take effect but lose their response, after which the
// request is sent again and meets the record it wrote: what the SDK retryer does when a
// connection breaks after DynamoDB applied a PutItem.
type resentClaim struct{ idemstore.Store }

func (s resentClaim) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	if _, _, err := s.Store.Claim(ctx, rec, now); err != nil {
		return nil, false, err
	}
	return s.Store.Claim(ctx, rec, now)
}

func TestResentClaimMeetsOwnRecord(t *testing.T) {
	t.Parallel()
	g, err := idem.New(resentClaim{memstore.New()}, "test")
	require.NoError(t, err)
	runs := 0
	fn := func(context.Context) (string, error) { runs++; return "done", nil }

	got, replayed, err := idem.Do(t.Context(), g, idem.Request{Key: "k"}, fn)
	require.NoError(t, err, "our own in-progress record is our claim, not another owner's")
	assert.Equal(t, "done", got)
	assert.False(t, replayed)

	got, replayed, err = idem.Do(t.Context(), g, idem.Request{Key: "k"}, fn)
	require.NoError(t, err)
	assert.Equal(t, "done", got)
	assert.True(t, replayed)
	assert.Equal(t, 1, runs)
}

func TestInProgressWithoutLeaseEndHoldsKey(t *testing.T) {
	t.Parallel()
	now := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memstore.New()
	g, err := idem.New(s, "test", idem.WithClock(idem.ClockFunc(func() time.Time { return now })))
	require.NoError(t, err)
	sk, _ := g.StoredKey(idem.Request{Key: "k"})
	s.Put(idemstore.Record{Key: sk, Status: idemstore.StatusInProgress, Expires: now.Add(time.Hour), LeaseToken: "x"})
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 1, nil })
	require.ErrorIs(t, err, idem.ErrInProgress, "as the DynamoDB claim condition does")
}

func TestLeaseFollowsDeadline(t *testing.T) {
	t.Parallel()
	base := time.Now() // deadlines are real: the context ends on the real clock
	clock := func() time.Time { return base }
	s := memstore.New()
	g, err := idem.New(s, "test", idem.WithClock(idem.ClockFunc(clock)), idem.WithLeaseMargin(time.Second), idem.WithMaxLease(time.Minute))
	require.NoError(t, err)
	cases := []struct {
		name     string
		deadline time.Duration // 0: none
		want     time.Duration
	}{
		{"NoDeadline", 0, idem.DefaultLease + time.Second}, // WithLease plus the margin, as a deadline gets
		{"Deadline", 10 * time.Second, 11 * time.Second},
		{"CappedByMaxThenMargin", time.Hour, time.Minute + time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, base.Add(tc.deadline))
				defer cancel()
			}
			var lease time.Time
			_, _, err := idem.Do(ctx, g, idem.Request{Key: tc.name}, func(ctx context.Context) (int, error) {
				sk, _ := g.StoredKey(idem.Request{Key: tc.name})
				rec, err := s.Get(ctx, sk)
				require.NoError(t, err)
				lease = rec.LeaseExpires
				return 0, nil
			})
			require.NoError(t, err)
			assert.Equal(t, tc.want, lease.Sub(base))
		})
	}
}

// holdKey makes g claim key and hold it in a handler until the test ends; the test's
// cleanup lets the handler return and waits for its completion.
func holdKey(t *testing.T, g *idem.Guard, key string) {
	t.Helper()
	release, claimed, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = idem.Do(context.Background(), g, idem.Request{Key: key}, func(context.Context) (int, error) {
			close(claimed)
			<-release
			return 1, nil
		})
	}()
	<-claimed
	t.Cleanup(func() { close(release); <-done })
}

func TestWaitGivesUpAtBudget(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "test", idem.WithWait(30*time.Millisecond, 5*time.Millisecond))
	require.NoError(t, err)
	holdKey(t, g, "w")
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "w"}, func(context.Context) (int, error) { return 2, nil })
	require.ErrorIs(t, err, idem.ErrInProgress)
}

func TestWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	owner, err := idem.New(s, "test")
	require.NoError(t, err)
	waiter, err := idem.New(s, "test", idem.WithWait(time.Minute, time.Millisecond))
	require.NoError(t, err)
	holdKey(t, owner, "w")
	// The caller gives up while waiting (a deadline ends the wait earlier, by its margin: see
	// TestWaitEndsBeforeTheDeadline).
	gaveUp := errors.New("caller gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	time.AfterFunc(20*time.Millisecond, func() { cancel(gaveUp) })
	_, _, err = idem.Do(ctx, waiter, idem.Request{Key: "w"}, func(context.Context) (int, error) { return 2, nil })
	require.ErrorIs(t, err, gaveUp)
}

// TestWaitEndsBeforeTheDeadline lets a WithWait caller wait, in simulated time, for a key
// whose owner never finishes: it must answer ErrInProgress by its context's deadline less
// the lease margin (in Lambda, the function timeout: a waiter that runs into it is billed
// for the whole timeout and answers nothing), or at the end of its wait budget if that
// comes first, and never run the handler.
func TestWaitEndsBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	const budget, margin = time.Minute, 2 * time.Second
	tests := []struct {
		name        string
		deadline    time.Duration // from the call; 0 for none
		wantElapsed time.Duration
	}{
		{name: "deadline within the budget", deadline: 10 * time.Second, wantElapsed: 8 * time.Second},
		{name: "deadline within the margin", deadline: time.Second, wantElapsed: 0},
		{name: "deadline after the budget", deadline: 2 * time.Minute, wantElapsed: budget},
		{name: "no deadline", wantElapsed: budget},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := storetest.NewSimulatedClock()
			s := memstore.New()
			// The owner's lease outlives any wait. Its clock reads the same time, but its
			// timers (the lease watchdog's) are not the ones the test drives.
			owner, err := idem.New(s, "test", idem.WithClock(storetest.NewSettableClock()), idem.WithLease(time.Hour), idem.WithMaxLease(time.Hour))
			require.NoError(t, err)
			waiter, err := idem.New(s, "test", idem.WithClock(clock), idem.WithLeaseMargin(margin), idem.WithWait(budget, time.Second))
			require.NoError(t, err)

			holdKey(t, owner, "k")

			ctx, cancel := context.WithCancel(deadlineIn(t, clock, tc.deadline))
			defer cancel()
			// Move the clock to each timer the waiter sets, until it answers. Should it hang,
			// the bound ends the wait with its context.
			driving, stop := context.WithTimeout(context.Background(), 30*time.Second)
			defer stop()
			driven := make(chan struct{})
			go func() {
				defer close(driven)
				for n := 1; clock.WaitAfterCalls(driving, n) && clock.AdvanceToNext(driving); n++ {
				}
				if driving.Err() == context.DeadlineExceeded {
					cancel()
				}
			}()
			start := clock.Now()
			_, _, err = idem.Do(ctx, waiter, idem.Request{Key: "k"}, func(context.Context) (int, error) {
				t.Error("the waiter ran the handler")
				return 0, nil
			})
			elapsed := clock.Now().Sub(start)
			stop()
			<-driven
			var ipe *idem.InProgressError
			require.ErrorAs(t, err, &ipe)
			assert.Positive(t, ipe.RetryAfter)
			assert.Equal(t, tc.wantElapsed, elapsed, "simulated time spent waiting")
		})
	}
}

// cancelDuringGet is a store whose reads end the caller's context while in flight and then
// fail with the context's error, as an SDK call does when its context ends.
type cancelDuringGet struct {
	*memstore.Store
	cancel context.CancelCauseFunc
	cause  error
}

func (s *cancelDuringGet) Get(ctx context.Context, _ string) (*idemstore.Record, error) {
	s.cancel(s.cause)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestWaitEndedDuringAPoll: a caller whose context ends while a poll is in flight gets its
// context's cause, as when it ends between polls, not a store error.
func TestWaitEndedDuringAPoll(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	s := &cancelDuringGet{Store: memstore.New(), cancel: cancel, cause: errors.New("caller gave up")}
	owner, err := idem.New(s.Store, "test")
	require.NoError(t, err)
	waiter, err := idem.New(s, "test", idem.WithWait(time.Minute, time.Millisecond))
	require.NoError(t, err)
	holdKey(t, owner, "w")
	_, _, err = idem.Do(ctx, waiter, idem.Request{Key: "w"}, func(context.Context) (int, error) { return 2, nil })
	require.ErrorIs(t, err, s.cause)
	assert.NotErrorIs(t, err, idem.ErrStore)
}

// fingerprint is the stored form of a request fingerprint.
func fingerprint(fp string) string {
	sum := sha256.Sum256([]byte(fp))
	return hex.EncodeToString(sum[:])
}

// deadRecord is the record of an owner that died at now-2m, with a one-minute lease.
func deadRecord(key string, now time.Time, checkpoint, fp string) idemstore.Record {
	return idemstore.Record{
		Key: key, Status: idemstore.StatusInProgress, Expires: now.Add(time.Hour), LeaseExpires: now.Add(-time.Minute),
		Fingerprint: fp, LeaseToken: "dead", Checkpoint: checkpoint, Version: idemstore.SchemaVersion,
	}
}

// runSeeing makes one call of req on g whose handler notes the checkpoint it starts from.
func runSeeing(g *idem.Guard, req idem.Request) (runs int, seen string, err error) {
	_, _, err = idem.Do(context.Background(), g, req, func(ctx context.Context) (int, error) {
		runs++
		seen = idem.LastCheckpoint(ctx)
		return 1, nil
	})
	return runs, seen, err
}

// TestTakeoverCarriesCheckpoint takes over records whose owners died, and counts the store
// calls: a checkpoint costs one more claim, which carries it into the new record.
func TestTakeoverCarriesCheckpoint(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		existing   func(key string, now time.Time) idemstore.Record
		requestFP  string // "" : no fingerprint
		wantErr    error
		wantSeen   string
		wantCounts map[string]int
	}{
		{
			name:       "CheckpointSameRequest",
			existing:   func(k string, now time.Time) idemstore.Record { return deadRecord(k, now, "charged", fingerprint("A")) },
			requestFP:  "A",
			wantSeen:   "charged",
			wantCounts: map[string]int{"claim": 2, "complete": 1},
		},
		{
			name:       "CheckpointWithoutFingerprint",
			existing:   func(k string, now time.Time) idemstore.Record { return deadRecord(k, now, "charged", fingerprint("A")) },
			wantSeen:   "charged",
			wantCounts: map[string]int{"claim": 2, "complete": 1},
		},
		{
			// The store takes over a record with a checkpoint only for a claim of its own
			// fingerprint: the takeover carries the record's (none), and goes through.
			name:       "CheckpointOwnerGaveNoFingerprint",
			existing:   func(k string, now time.Time) idemstore.Record { return deadRecord(k, now, "charged", "") },
			requestFP:  "A",
			wantSeen:   "charged",
			wantCounts: map[string]int{"claim": 2, "complete": 1},
		},
		{
			name:       "CheckpointOtherRequest",
			existing:   func(k string, now time.Time) idemstore.Record { return deadRecord(k, now, "charged", fingerprint("A")) },
			requestFP:  "B",
			wantErr:    idem.ErrPayloadMismatch,
			wantCounts: map[string]int{"claim": 1},
		},
		{
			name:       "NoCheckpointOtherRequest",
			existing:   func(k string, now time.Time) idemstore.Record { return deadRecord(k, now, "", fingerprint("A")) },
			requestFP:  "B",
			wantCounts: map[string]int{"claim": 1, "complete": 1},
		},
		{
			name: "ExpiredWithCheckpoint",
			existing: func(k string, now time.Time) idemstore.Record {
				r := deadRecord(k, now, "charged", fingerprint("A"))
				r.Expires = now.Add(-time.Second)
				return r
			},
			requestFP:  "A",
			wantSeen:   "",
			wantCounts: map[string]int{"claim": 1, "complete": 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mem := memstore.New()
			s := newCounting(mem)
			clock := storetest.NewSettableClock()
			g, err := idem.New(s, "test", idem.WithClock(clock), idem.WithScope("takeover"))
			require.NoError(t, err)
			req := idem.Request{Key: "k"}
			if tc.requestFP != "" {
				req.Fingerprint = []byte(tc.requestFP)
			}
			sk, err := g.StoredKey(req)
			require.NoError(t, err)
			mem.Put(tc.existing(sk, clock.Now()))

			runs, seen, err := runSeeing(g, req)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Zero(t, runs)
				rec, err := mem.Get(context.Background(), sk)
				require.NoError(t, err)
				assert.Equal(t, "dead", rec.LeaseToken, "the dead owner's record stays")
			} else {
				require.NoError(t, err)
				assert.Equal(t, 1, runs)
				assert.Equal(t, tc.wantSeen, seen)
			}
			assert.Equal(t, tc.wantCounts, s.counts())
		})
	}
}

// movingCheckpoint is a store whose dead owner, still running past its lease, moves its
// checkpoint before each of the first moves claims.
type movingCheckpoint struct {
	*memstore.Store
	moves, moved int
}

func (s *movingCheckpoint) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	if s.moved < s.moves {
		s.moved++
		if err := s.SetCheckpoint(ctx, rec.Key, "dead", fmt.Sprintf("step-%d", s.moved), int64(s.moved)); err != nil {
			return nil, false, err
		}
	}
	return s.Store.Claim(ctx, rec, now)
}

// TestTakeoverWhileCheckpointMoves takes over a record whose lease ended while its owner
// still moves its checkpoint: the claim carries the latest, and gives up (in progress)
// after a bounded number of attempts.
func TestTakeoverWhileCheckpointMoves(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		moves    int
		wantErr  error
		wantSeen string
	}{
		{"MovesOnce", 1, nil, "step-1"},
		{"MovesTwice", 2, nil, "step-2"},
		{"KeepsMoving", 100, idem.ErrInProgress, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &movingCheckpoint{Store: memstore.New(), moves: tc.moves}
			clock := storetest.NewSettableClock()
			g, err := idem.New(s, "test", idem.WithClock(clock), idem.WithScope("moving"))
			require.NoError(t, err)
			sk, err := g.StoredKey(idem.Request{Key: "k"})
			require.NoError(t, err)
			s.Put(deadRecord(sk, clock.Now(), "step-0", ""))

			runs, seen, err := runSeeing(g, idem.Request{Key: "k"})
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Zero(t, runs)
				assert.Equal(t, 3, s.moved, "three claims, then the caller is told to retry")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantSeen, seen)
		})
	}
}

func TestFailOpenRunIsReportedUnguarded(t *testing.T) {
	t.Parallel()
	faulty := storetest.NewFaulty(memstore.New())
	var unguarded []idem.Event
	g, err := idem.New(faulty, "test", idem.WithFailOpen(true), idem.WithHooks(idem.Hooks{
		OnUnguarded: func(_ context.Context, e idem.Event) { unguarded = append(unguarded, e) },
	}))
	require.NoError(t, err)
	faulty.Fail("claim", errors.New("down"), false)
	runs := 0
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) {
		runs++
		return 1, nil
	})
	require.NoError(t, err)
	assert.Equal(t, 1, runs)
	require.Len(t, unguarded, 1, "the fail-open run is reported")
	assert.Equal(t, "claim", unguarded[0].Op)
	require.ErrorIs(t, unguarded[0].Err, idem.ErrStore)
	assert.NotNil(t, g.Hooks().OnUnguarded, "wrappers fire it through Guard.Hooks")
}

func TestFailOpenNeverOnCancelledContext(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "test", idem.WithFailOpen(true))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, func(context.Context) (int, error) {
		t.Error("ran unguarded for a caller that gave up")
		return 0, nil
	})
	require.ErrorIs(t, err, context.Canceled)
}

// endingClaimStore is an in-memory batch store whose claims end the caller's context while
// they are in flight and then fail with a store error of their own, as a request that was
// still out when a Lambda deadline passed and then failed on the network would.
type endingClaimStore struct {
	*memstore.Store
	end func()
}

func (s *endingClaimStore) Claim(context.Context, *idemstore.Record, time.Time) (*idemstore.Record, bool, error) {
	s.end()
	return nil, false, errConnReset
}

func (s *endingClaimStore) ClaimMany(_ context.Context, recs []*idemstore.Record, _ time.Time) []idemstore.ClaimResult {
	s.end()
	out := make([]idemstore.ClaimResult, len(recs))
	for i := range out {
		out[i].Err = errConnReset
	}
	return out
}

// TestFailOpenNeverOnEndedContext: with WithFailOpen, a claim that fails with a store error
// of its own while the caller's context has ended (cancelled, or past its deadline) never
// runs the handler unguarded, through Do or DoClaimed: the caller is gone, and nobody would
// get its result.
func TestFailOpenNeverOnEndedContext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		deadline bool // the context ends at its deadline, else by cancel
		batch    bool
	}{
		{name: "Do, cancelled"},
		{name: "Do, deadline passed", deadline: true},
		{name: "DoClaimed, cancelled", batch: true},
		{name: "DoClaimed, deadline passed", deadline: true, batch: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			end := cancel // the context ends while the claim is in flight
			if tc.deadline {
				// The deadline passed while the claim was in flight.
				ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
				end = func() {}
			}
			defer cancel()
			s := &endingClaimStore{Store: memstore.New(), end: end}
			g, err := idem.New(s, "test", idem.WithFailOpen(true))
			require.NoError(t, err)
			fn := func(context.Context) (int, error) {
				t.Error("ran unguarded for a caller whose context had ended")
				return 1, nil
			}
			if tc.batch {
				b := g.Claim(ctx, []idem.Request{{Key: "k"}, {Key: "pad"}})
				_, _, err = idem.DoClaimed(ctx, b, 0, fn)
			} else {
				_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, fn)
			}
			require.ErrorIs(t, err, idem.ErrStore, "the claim's failure is the caller's answer")
		})
	}
}

// metRecordStore is an in-memory batch store whose claims meet a completed record but fail
// to read all of it, as the DynamoDB store's do when the read of a result kept in an item
// of its own fails: the record that refused the claim comes back with the error
// (idemstore.Store's Claim contract).
type metRecordStore struct {
	*memstore.Store
	met *idemstore.Record
}

func (s *metRecordStore) Claim(context.Context, *idemstore.Record, time.Time) (*idemstore.Record, bool, error) {
	met := *s.met
	return &met, false, &idem.StoreError{Op: "claim", Err: errConnReset}
}

func (s *metRecordStore) ClaimMany(_ context.Context, recs []*idemstore.Record, _ time.Time) []idemstore.ClaimResult {
	out := make([]idemstore.ClaimResult, len(recs))
	for i := range out {
		met := *s.met
		out[i] = idemstore.ClaimResult{Prev: &met, Err: &idem.StoreError{Op: "claim", Err: errConnReset}}
	}
	return out
}

// TestFailOpenNeverWhenTheClaimMetARecord: the guard fails open only when the store could
// not learn the key's state. A claim that met the record holding the key (here a completed
// one) but could not read all of it returns that record with its error; the guard, with
// WithFailOpen, then returns the store error (retry later) through Do and DoClaimed, and
// never runs the handler unguarded: the key may be completed, or in progress elsewhere.
func TestFailOpenNeverWhenTheClaimMetARecord(t *testing.T) {
	t.Parallel()
	for _, status := range []idemstore.Status{idemstore.StatusCompleted, idemstore.StatusInProgress} {
		for _, batch := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/batch=%v", status, batch), func(t *testing.T) {
				t.Parallel()
				now := time.Now()
				s := &metRecordStore{Store: memstore.New()}
				unguarded := 0
				g, err := idem.New(s, "test", idem.WithFailOpen(true), idem.WithHooks(idem.Hooks{
					OnUnguarded: func(context.Context, idem.Event) { unguarded++ },
				}))
				require.NoError(t, err)
				key, err := g.StoredKey(idem.Request{Key: "k"})
				require.NoError(t, err)
				s.met = &idemstore.Record{
					Key: key, Status: status, Expires: now.Add(time.Hour), LeaseExpires: now.Add(time.Minute),
					LeaseToken: "owner", Encoding: "json", Version: idemstore.SchemaVersion,
				}
				if status == idemstore.StatusCompleted {
					s.met.LeaseExpires = time.Time{}
				}
				fn := func(context.Context) (int, error) {
					t.Error("ran unguarded although the claim met the key's record")
					return 1, nil
				}
				ctx := context.Background()
				var replayed bool
				if batch {
					b := g.Claim(ctx, []idem.Request{{Key: "k"}})
					_, replayed, err = idem.DoClaimed(ctx, b, 0, fn)
				} else {
					_, replayed, err = idem.Do(ctx, g, idem.Request{Key: "k"}, fn)
				}
				require.ErrorIs(t, err, idem.ErrStore, "the claim's failure is the caller's answer: retry later")
				var se *idem.StoreError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, "claim", se.Op, "the handler did not run")
				assert.False(t, replayed)
				assert.Zero(t, unguarded, "OnUnguarded")
			})
		}
	}
}
