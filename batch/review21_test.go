package batch_test

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
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// blipStore is a memstore.Store whose single claims (the ones idem.Do makes) fail while
// failing is set, as a throttled or unreachable DynamoDB answers; its batch claims
// (ClaimMany, memstore's own) are not affected.
type blipStore struct {
	*memstore.Store
	failing atomic.Bool
	failed  atomic.Int32
}

func (s *blipStore) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	if s.failing.Load() {
		s.failed.Add(1)
		return nil, false, errors.New("ProvisionedThroughputExceededException: throttled")
	}
	return s.Store.Claim(ctx, rec, now)
}

// failOpenSchedule runs the schedule of TestReview21_WaitInFlightPollFailsOpenOverALiveRun
// on a fail-open guard with guardOpts and an engine with engineOpts: a live run holds
// key-a1 (its handler blocked), the store then fails single claims, and the batch
// [a/a1, b/b1] is processed. It returns the report, the items run, the single claims
// the store failed, and how often a1's handler ran in all (the owner's run included).
func failOpenSchedule(t *testing.T, guardOpts []idem.Option, engineOpts ...batch.Option) (*batch.Report, []string, int32, int32) {
	t.Helper()
	store := &blipStore{Store: memstore.New()}
	g, err := idem.New(store, "wait-failopen", append([]idem.Option{idem.WithFailOpen(true)}, guardOpts...)...)
	require.NoError(t, err)
	var runsA1 atomic.Int32
	claimed, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_, _, err := idem.Do(context.Background(), g, idem.Request{Key: "key-a1", Fingerprint: []byte("a1")},
			func(context.Context) (struct{}, error) {
				runsA1.Add(1)
				close(claimed)
				<-release
				return struct{}{}, nil
			})
		assert.NoError(t, err, "the owner's run")
	}()
	<-claimed
	store.failing.Store(true)

	e, err := batch.New(g, batch.Source{}, engineOpts...)
	require.NoError(t, err)
	its := items("a/a1", "b/b1")
	var mu sync.Mutex
	var ran []string
	run := func(_ context.Context, i int) error {
		if its[i].ID == "a1" {
			runsA1.Add(1)
		}
		mu.Lock()
		ran = append(ran, its[i].ID)
		mu.Unlock()
		return nil
	}
	rep := e.Process(deadlineContext(t, g.Clock(), 3*time.Second), its, run, batch.Mode{Ordered: true, RecordBeforeNext: true})
	store.failing.Store(false)
	close(release)
	<-done
	return rep, ran, store.failed.Load(), runsA1.Load()
}

// TestReview21_WaitInFlightPollFailsOpenOverALiveRun: a guard with idem.WithFailOpen and
// an engine with WithWaitInFlight. Key a1 is held by a live run elsewhere (another
// invocation's handler, still running). The batch's claim meets that run's record: the
// guard's promise (idem.WithFailOpen, idem.Guard.Claim) is that once a claim or poll of
// the key met the record holding it, a store failure returns the store error and the
// handler does not run, since the key is in progress elsewhere.
//
// The waiter's polls are fresh idem.Do calls (process.go waitInFlight sets the item's
// claim to -1 and calls guarded, which calls idem.Do): they carry nothing of the record
// the batch claim met. The first poll whose claim the store fails (a throttle, a timeout)
// therefore fails open, and the handler of a1 runs unguarded while the live run holds
// the key: the effect twice.
//
// Schedule: the owner claims a1 through idem.Do and blocks in its handler; the store
// then fails single claims (batch claims still pass); the batch [a/a1, b/b1] claims both
// keys together and meets a1 in progress; the waiter pauses 100 ms and polls a1 with
// idem.Do; the claim fails with a store error; failsOpen sees no met record and runs a1.
//
// Control (passes): the same schedule with the guard's own wait (idem.WithWait) instead
// of WithWaitInFlight: the guard's poll carries the batch claim's record, and a1 fails
// with batch.ReasonStore without running.
//
// Expected: a1 fails (batch.ReasonStore or batch.ReasonInProgress) without running, as it
// does with idem.WithWait. Severity: double execution (under WithFailOpen, on a store
// blip while waiting: exactly when WithWaitInFlight is waiting on a live run).
//
// Fails on main: the handler runs a1 while the owner holds it.
func TestReview21_WaitInFlightPollFailsOpenOverALiveRun(t *testing.T) {
	t.Parallel()
	rep, ran, failed, runs := failOpenSchedule(t, []idem.Option{idem.WithWait(2*time.Second, 100*time.Millisecond)})
	t.Logf("control, idem.WithWait: outcomes %v, ran %v, single claims failed %d", statuses(rep), ran, failed)
	require.Positive(t, failed, "control: the guard's poll met the store failure")
	require.Equal(t, int32(1), runs, "control: a1 ran once, in the owner")
	require.Equal(t, []string{"a1:store", "b1:ran"}, statuses(rep), "control")

	rep, ran, failed, runs = failOpenSchedule(t, nil, batch.WithWaitInFlight(true), batch.WithDeadlineMargin(time.Second))
	t.Logf("WithWaitInFlight: outcomes %v, ran %v, single claims failed %d", statuses(rep), ran, failed)
	require.Positive(t, failed, "the waiter's poll met the store failure")
	assert.NotContains(t, ran, "a1", "a1 ran unguarded while a live run held its key")
	assert.Equal(t, int32(1), runs, "a1's handler ran once in all")
	assert.True(t, rep.Outcomes[0].Failed(), "a1 is reported, to be delivered again")
}

// TestReview21_WaitInFlightContextEndReason: WithWaitInFlight's documentation says "At the
// cut-off, or when ctx ends, it fails with [ReasonInProgress] as before." When ctx ends
// while the item waits, waitInFlight returns the last in-progress answer, but process then
// meets ctx.Err() != nil with the handler not run and fails the item with
// ReasonNotStarted (its error wraps ErrNotStarted and the in-progress answer). A caller
// that counts keys in flight elsewhere by ReasonInProgress (the hooks' failed_by, an
// alarm) miscounts; the record is still reported failed, so nothing is lost.
//
// Expected: the reason the documentation names (ReasonInProgress, an error wrapping
// idem.ErrInProgress), or documentation that names ReasonNotStarted for a context that
// ended. Severity: doc.
//
// Fails on main: a1's reason is not_started.
func TestReview21_WaitInFlightContextEndReason(t *testing.T) {
	t.Parallel()
	store := newCountingStore()
	crashedClaim(t, store, "review21-ctx", time.Hour, "a1", "z1")
	g, err := idem.New(store, "review21-ctx")
	require.NoError(t, err)
	e, err := batch.New(g, batch.Source{}, batch.WithWaitInFlight(true), batch.WithDeadlineMargin(time.Second))
	require.NoError(t, err)
	its := items("a/a1", "b/b1")
	rec := &recorder{items: its}
	ctx, cancel := context.WithDeadline(context.Background(), g.Clock().Now().Add(time.Hour))
	defer cancel()
	go func() {
		time.Sleep(300 * time.Millisecond) // a1 is waiting by then: b1 ran at once
		cancel()
	}()
	rep := e.Process(ctx, its, rec.run, batch.Mode{Ordered: true, RecordBeforeNext: true})
	require.Equal(t, []string{"b1"}, rec.ran)
	o := rep.Outcomes[0]
	require.True(t, o.Failed())
	assert.Equal(t, batch.ReasonInProgress, o.Reason, "a1 waited for a key in flight elsewhere until ctx ended: %v", o.Err)
	assert.ErrorIs(t, o.Err, idem.ErrInProgress)
}
