package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/internal/ddbfault"
	"github.com/idemkit/idem/internal/ddblocal"
)

var errBoom = errors.New("handler failed")

// Outcomes of one call, as a test states them.
const (
	result       = "result"        // the handler's result, computed or replayed
	inProgress   = "in-progress"   // ErrInProgress
	storeError   = "store-error"   // ErrStore, wrapping the injected error
	notCommitted = "not-committed" // ErrStore and ErrNotCommitted: nothing committed, key released
	handlerErr   = "handler-err"   // the handler's own error
	leaseLost    = "lease-lost"    // ErrLeaseLost
)

// faultCase states what happens when one call of step fails: what the first caller gets and
// how many handler runs it caused, what an immediate retry gets, and how many runs there
// are in all once the lease has ended and a last retry has settled the key.
type faultCase struct {
	step      ddbfault.Step
	applied   bool // the faulted write took effect on the server
	always    bool // every call of the step fails, not only the first
	first     string
	firstRuns int
	retry     string
	totalRuns int // at most one per lease: a second run only after a lease ended
	effects   int // attached business writes committed (complete with attachments only)
}

// faultCases covers every step; each row runs once per fault that fits its applied column.
var faultCases = []faultCase{
	// A failed claim never runs the handler (fail closed).
	{step: ddbfault.Claim, first: storeError, firstRuns: 0, retry: result, totalRuns: 1},
	// The claim landed but the caller cannot know: the key is held until the lease ends.
	{step: ddbfault.Claim, applied: true, first: storeError, firstRuns: 0, retry: inProgress, totalRuns: 1},
	// A waiter's poll fails: the waiter gets the error, the owner is not disturbed.
	{step: ddbfault.Get, first: storeError, firstRuns: 1, retry: result, totalRuns: 1},
	{step: ddbfault.Get, applied: true, first: storeError, firstRuns: 1, retry: result, totalRuns: 1},
	// The completion failed once: the guard sends it again, and it lands.
	{step: ddbfault.Complete, first: result, firstRuns: 1, retry: result, totalRuns: 1, effects: 1},
	// The completion landed and its answer was lost: the resent transaction finds the record
	// completed under its token and commits nothing twice.
	{step: ddbfault.Complete, applied: true, first: result, firstRuns: 1, retry: result, totalRuns: 1, effects: 1},
	// Every attempt failed: a read shows the record still in progress, so nothing committed
	// (the business write is attached): the key is released and the retry runs again.
	{step: ddbfault.Complete, always: true, first: notCommitted, firstRuns: 1, retry: result, totalRuns: 2, effects: 1},
	// Every attempt's answer was lost, the first one landed: a read shows it completed.
	{step: ddbfault.Complete, applied: true, always: true, first: result, firstRuns: 1, retry: result, totalRuns: 1, effects: 1},
	// The handler failed and its release failed: the key waits for its lease to end.
	{step: ddbfault.Release, first: handlerErr, firstRuns: 1, retry: inProgress, totalRuns: 2},
	{step: ddbfault.Release, applied: true, first: handlerErr, firstRuns: 1, retry: result, totalRuns: 2},
	// Every heartbeat fails while the handler outlives its lease: each failure is reported,
	// and once no extension has succeeded by the lease end less the margin, the handler's
	// context is cancelled with ErrLeaseLost. The handler gives up with that error, so the
	// key is released, and the retry runs: no overlap, but the work runs twice.
	{step: ddbfault.Extend, first: leaseLost, firstRuns: 1, retry: result, totalRuns: 2},
	{step: ddbfault.Extend, applied: true, first: leaseLost, firstRuns: 1, retry: result, totalRuns: 2},
	// The handler sees its checkpoint fail and gives up; the key is released.
	{step: ddbfault.Checkpoint, first: storeError, firstRuns: 1, retry: result, totalRuns: 2},
	{step: ddbfault.Checkpoint, applied: true, first: storeError, firstRuns: 1, retry: result, totalRuns: 2},
}

// TestFaultsAtEachStep injects every fault into every step's DynamoDB call, against
// DynamoDB Local, and checks the stated outcome, that a completed result is never lost,
// and that runs per lease stay at most one.
func TestFaultsAtEachStep(t *testing.T) {
	t.Parallel()
	raw := ddblocal.Client(t)
	table := ddblocal.NewTable(t, raw)
	effects := counterTable(t, raw)
	for _, tc := range faultCases {
		for _, f := range ddbfault.Faults {
			if f.Applied() != tc.applied {
				continue
			}
			name := fmt.Sprintf("%s/%s", tc.step, f)
			if tc.always {
				name += "/always"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				runFaultCase(t, raw, table, effects, tc, f)
			})
		}
	}
}

func runFaultCase(t *testing.T, raw *dynamodb.Client, table, effects string, tc faultCase, f ddbfault.Fault) {
	client := ddbfault.New(raw)
	store := newStore(t, client, table)
	// The heartbeat's case runs in simulated time: its beats wait on a clock the test
	// moves. The others set the time but wait in wall time, as the completion's resends do.
	manual := storetest.NewManualClock()
	var clock interface {
		idem.Clock
		Advance(time.Duration)
	} = storetest.NewClock()
	if tc.step == ddbfault.Extend {
		clock = manual
	}
	opts := []idem.Option{idem.WithClock(clock), idem.WithLease(time.Minute), idem.WithScope("faults")}
	extendFailed := make(chan error, 100)
	if tc.step == ddbfault.Extend {
		opts = append(opts, idem.WithHeartbeat(20*time.Second), idem.WithHooks(idem.Hooks{
			OnStoreError: func(_ context.Context, e idem.Event) { extendFailed <- e.Err },
		}))
	}
	g, err := idem.New(store, "test", opts...)
	require.NoError(t, err)
	key := fmt.Sprintf("%s-%s-%v-%v", tc.step, f, tc.applied, tc.always)
	rawClient := ddblocal.Client(t)

	var runs, live atomic.Int32
	handler := func(ctx context.Context) (string, error) {
		n := runs.Add(1)
		if live.Add(1) != 1 {
			t.Errorf("two runs of %s at once", key)
		}
		defer live.Add(-1)
		switch tc.step {
		case ddbfault.Release:
			if n == 1 {
				return "", errBoom
			}
		case ddbfault.Extend:
			if n == 1 { // outlive the lease in simulated time, beat after failed beat
				require.False(t, manual.DriveHeartbeat(t, ctx, extendFailed, 10, nil).IsZero(), "the handler's context was cancelled")
				return "", context.Cause(ctx)
			}
		case ddbfault.Checkpoint:
			if err := idem.Checkpoint(ctx, "charged"); err != nil {
				return "", err
			}
		case ddbfault.Complete:
			if err := dynamo.Attach(ctx, addOne(effects, key)); err != nil {
				return "", err
			}
		}
		return "r:" + key, nil
	}
	call := func() (string, error) {
		ctx := t.Context()
		if tc.step != ddbfault.Extend { // the heartbeat's case keeps the lease of WithLease
			// The deadline is on the injected clock, as the guard reads it for the lease
			// and for retrying a completion.
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, clock.Now().Add(20*time.Second))
			defer cancel()
		}
		v, _, err := idem.Do(ctx, g, idem.Request{Key: key}, handler)
		return v, err
	}

	times := 1
	if tc.step == ddbfault.Extend || tc.always {
		times = -1 // every heartbeat, or every attempt, fails
	}
	client.Arm(tc.step, f, times)
	var got string
	var firstErr error
	if tc.step == ddbfault.Get {
		got, firstErr = waitThroughFailedPoll(t, g, store, key, handler)
	} else {
		got, firstErr = call()
	}
	client.Disarm()
	require.Positive(t, client.Injected(tc.step), "the fault was injected")
	assertOutcome(t, tc.first, key, got, firstErr)
	if tc.first == storeError || tc.first == notCommitted {
		assert.ErrorContains(t, firstErr, "injected", "the SDK error stays reachable")
	}
	assert.EqualValues(t, tc.firstRuns, runs.Load(), "runs after the first call")

	got, err = call()
	assertOutcome(t, tc.retry, key, got, err)

	clock.Advance(2 * time.Minute) // past any lease
	got, err = call()
	assertOutcome(t, result, key, got, err)
	assert.EqualValues(t, tc.totalRuns, runs.Load(), "runs in all")

	rec := storedRecord(t, g, store, key)
	require.NotNil(t, rec, "the completed record is kept")
	assert.Equal(t, idemstore.StatusCompleted, rec.Status)
	if tc.step == ddbfault.Complete {
		assert.Equal(t, tc.effects, counter(t, rawClient, effects, key), "attached writes committed")
	}
}

// waitThroughFailedPoll holds key in a handler while a second caller waits for it; the
// waiter's poll (GetItem) meets the armed fault. It returns the waiter's outcome once the
// owner has completed.
func waitThroughFailedPoll(t *testing.T, owner *idem.Guard, store idemstore.Store, key string, handler func(context.Context) (string, error)) (string, error) {
	t.Helper()
	waiter, err := idem.New(store, "test", idem.WithClock(storetest.NewClock()), idem.WithScope("faults"), idem.WithWait(time.Minute, 5*time.Millisecond))
	require.NoError(t, err)
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := idem.Do(t.Context(), owner, idem.Request{Key: key}, func(ctx context.Context) (string, error) {
			close(started)
			<-release
			return handler(ctx)
		})
		done <- err
	}()
	<-started
	v, _, werr := idem.Do(t.Context(), waiter, idem.Request{Key: key}, func(context.Context) (string, error) {
		t.Error("the waiter ran the handler")
		return "", nil
	})
	close(release)
	require.NoError(t, <-done, "the owner completes")
	return v, werr
}

func assertOutcome(t *testing.T, want, key, got string, err error) {
	t.Helper()
	switch want {
	case result:
		if assert.NoError(t, err) {
			assert.Equal(t, "r:"+key, got)
		}
	case inProgress:
		require.ErrorIs(t, err, idem.ErrInProgress)
	case storeError:
		require.ErrorIs(t, err, idem.ErrStore)
	case notCommitted:
		require.ErrorIs(t, err, idem.ErrStore)
		require.ErrorIs(t, err, idemstore.ErrNotCommitted)
	case handlerErr:
		require.ErrorIs(t, err, errBoom)
	case leaseLost:
		require.ErrorIs(t, err, idem.ErrLeaseLost)
	}
}
