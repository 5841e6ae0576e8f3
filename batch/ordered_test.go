package batch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// countingStore is a memstore.Store that counts its batch calls and can fail the batch
// completion of chosen stored keys, as a lease lost to another owner does.
type countingStore struct {
	*memstore.Store
	mu                      sync.Mutex
	claimMany, completeMany int
	released                []string
	failComplete            map[string]error
	// complete counts the single completions; failSingle fails the next single completion
	// of a stored key with its error, after it took effect where landed says so (a lost
	// response).
	complete   int
	failSingle map[string]error
	landed     map[string]bool
	// hold delays the next single completion of a stored key: it fails as a timeout, and
	// lands when the test calls the function left in held.
	hold map[string]bool
	held []func() error
}

func (s *countingStore) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	s.mu.Lock()
	s.complete++
	err, landed := s.failSingle[rec.Key], s.landed[rec.Key]
	delete(s.failSingle, rec.Key)
	if s.hold[rec.Key] {
		delete(s.hold, rec.Key)
		first := *rec
		s.held = append(s.held, func() error { return s.Store.Complete(context.Background(), &first, attached) })
		s.mu.Unlock()
		return context.DeadlineExceeded
	}
	s.mu.Unlock()
	if err == nil {
		return s.Store.Complete(ctx, rec, attached)
	}
	if landed {
		if cerr := s.Store.Complete(ctx, rec, attached); cerr != nil {
			return cerr
		}
	}
	return err
}

func newCountingStore() *countingStore { return &countingStore{Store: memstore.New()} }

func (s *countingStore) ClaimMany(ctx context.Context, recs []*idemstore.Record, now time.Time) []idemstore.ClaimResult {
	s.mu.Lock()
	s.claimMany++
	s.mu.Unlock()
	return s.Store.ClaimMany(ctx, recs, now)
}

func (s *countingStore) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	s.mu.Lock()
	s.completeMany++
	fail := s.failComplete
	s.mu.Unlock()
	errs := make([]error, len(recs))
	var pass []*idemstore.Record
	var at []int
	for i, r := range recs {
		if err := fail[r.Key]; err != nil {
			errs[i] = err
			continue
		}
		pass, at = append(pass, r), append(at, i)
	}
	for j, err := range s.Store.CompleteMany(ctx, pass) {
		errs[at[j]] = err
	}
	return errs
}

func (s *countingStore) ReleaseMany(ctx context.Context, keys, tokens []string, now time.Time) []error {
	s.mu.Lock()
	s.released = append(s.released, keys...)
	s.mu.Unlock()
	return s.Store.ReleaseMany(ctx, keys, tokens, now)
}

// recorder is a handler that records the items it ran, in order, fails the items named in
// fail, and tracks how many runs overlap.
type recorder struct {
	items   []batch.Item
	fail    map[string]bool
	mu      sync.Mutex
	ran     []string
	running atomic.Int32
	most    atomic.Int32
}

func (r *recorder) run(_ context.Context, i int) error {
	n := r.running.Add(1)
	defer r.running.Add(-1)
	for m := r.most.Load(); n > m && !r.most.CompareAndSwap(m, n); m = r.most.Load() {
	}
	id := r.items[i].ID
	r.mu.Lock()
	r.ran = append(r.ran, id)
	r.mu.Unlock()
	if r.fail[id] {
		return errors.New("handler failed: " + id)
	}
	return nil
}

// items returns one item per "group/id" spec, keyed by id, fingerprinted by id.
func items(specs ...string) []batch.Item {
	out := make([]batch.Item, len(specs))
	for i, s := range specs {
		var g, id string
		_, _ = fmt.Sscanf(s, "%1s/%s", &g, &id)
		out[i] = batch.Item{ID: id, Group: g, Key: "key-" + id, Fingerprint: []byte(id)}
	}
	return out
}

func statuses(rep *batch.Report) []string {
	var s []string
	for _, o := range rep.Outcomes {
		if o.Failed() {
			s = append(s, o.ID+":"+string(o.Reason))
		} else {
			s = append(s, o.ID+":"+string(o.Status))
		}
	}
	return s
}

func deadlineContext(t *testing.T, clock idem.Clock, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(d))
	t.Cleanup(cancel)
	return ctx
}

// TestOrderedStopsGroupAtFirstFailure: in an ordered batch on batch claims, a group stops
// at its first failure; the rest of it is reported without running, and its claims are
// released, so the redelivery runs them (and replays what finished) rather than finding
// them in progress. Other groups go on. Sequential and concurrent alike.
func TestOrderedStopsGroupAtFirstFailure(t *testing.T) {
	t.Parallel()
	for _, concurrency := range []int{1, 4} {
		t.Run(fmt.Sprint("concurrency ", concurrency), func(t *testing.T) {
			t.Parallel()
			store := newCountingStore()
			clock := storetest.NewSettableClock()
			g, err := idem.New(store, "ordered", idem.WithClock(clock))
			require.NoError(t, err)
			e, err := batch.New(g, batch.Source{Name: "test"}, batch.WithConcurrency(concurrency))
			require.NoError(t, err)
			its := items("a/a1", "b/b1", "a/a2", "a/a3", "b/b2", "a/a4")
			rec := &recorder{items: its, fail: map[string]bool{"a2": true}}
			rep := e.Process(deadlineContext(t, clock, time.Minute), its, rec.run, batch.Mode{Ordered: true})

			assert.Equal(t, []string{"a1:ran", "b1:ran", "a2:handler", "a3:group_stopped", "b2:ran", "a4:group_stopped"}, statuses(rep))
			assert.NotContains(t, rec.ran, "a3")
			assert.NotContains(t, rec.ran, "a4")
			assert.Equal(t, []int{2}, rep.FirstFailures(), "the group's first failure only")
			require.ErrorIs(t, rep.Outcomes[3].Err, batch.ErrGroupStopped)
			assert.Equal(t, 1, store.claimMany, "one claim call")
			assert.Equal(t, 1, store.completeMany, "one completion call")
			a3, err := g.StoredKey(idem.Request{Key: "key-a3"})
			require.NoError(t, err)
			assert.Contains(t, store.released, a3, "the claim of a record not started is released")

			// The redelivery from the failed record on: what finished replays, the rest runs.
			rec.fail, rec.ran, rec.items = nil, nil, its[2:]
			rep = e.Process(deadlineContext(t, clock, time.Minute), its[2:], rec.run, batch.Mode{Ordered: true})
			assert.Equal(t, []string{"a2:ran", "a3:ran", "b2:replayed", "a4:ran"}, statuses(rep))
			assert.Equal(t, []string{"a2", "a3", "a4"}, rec.ran)
		})
	}
}

// TestOrderedSequentialIsSequential: with WithConcurrency(1), an ordered batch runs one
// item at a time in the items' order, whatever its groups.
func TestOrderedSequentialIsSequential(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "sequential")
	require.NoError(t, err)
	e, err := batch.New(g, batch.Source{}, batch.WithConcurrency(1))
	require.NoError(t, err)
	its := items("a/1", "b/2", "c/3", "a/4", "d/5", "b/6", "e/7", "f/8")
	rec := &recorder{items: its}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep := e.Process(ctx, its, rec.run, batch.Mode{Ordered: true})
	assert.Equal(t, 8, rep.Ran)
	assert.Equal(t, []string{"1", "2", "3", "4", "5", "6", "7", "8"}, rec.ran)
	assert.Equal(t, int32(1), rec.most.Load(), "never two runs at once")
}

// TestOrderedGroupsInOrderBounded: groups run concurrently up to WithConcurrency, each in
// its items' order.
func TestOrderedGroupsInOrderBounded(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "bounded")
	require.NoError(t, err)
	e, err := batch.New(g, batch.Source{}, batch.WithConcurrency(3))
	require.NoError(t, err)
	var specs []string
	for i := range 40 {
		specs = append(specs, fmt.Sprintf("%c/%d", 'a'+i%7, i))
	}
	its := items(specs...)
	rec := &recorder{items: its}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep := e.Process(ctx, its, rec.run, batch.Mode{Ordered: true})
	require.Equal(t, 40, rep.Ran)
	assert.LessOrEqual(t, rec.most.Load(), int32(3))
	pos := make(map[string]int)
	for p, id := range rec.ran {
		pos[id] = p
	}
	last := make(map[string]int)
	for _, it := range its {
		if p, ok := last[it.Group]; ok {
			assert.Less(t, p, pos[it.ID], "group %s in order", it.Group)
		}
		last[it.Group] = pos[it.ID]
	}
}

// TestOrderedInFlightElsewhere: a key another invocation holds (a crashed one whose lease
// has not ended, or a concurrent one) stops its group: the later records are not run, and
// their claims are released. Once the holder finishes, the redelivery replays its result
// and runs the rest.
func TestOrderedInFlightElsewhere(t *testing.T) {
	t.Parallel()
	store := newCountingStore()
	g, err := idem.New(store, "inflight")
	require.NoError(t, err)
	e, err := batch.New(g, batch.Source{})
	require.NoError(t, err)
	its := items("a/a1", "a/a2", "b/b1", "a/a3")
	claimed, finish, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = idem.Do(context.Background(), g, idem.Request{Key: "key-a1", Fingerprint: []byte("a1")},
			func(context.Context) (struct{}, error) { close(claimed); <-finish; return struct{}{}, nil })
	}()
	<-claimed
	rec := &recorder{items: its}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep := e.Process(ctx, its, rec.run, batch.Mode{Ordered: true})
	assert.Equal(t, []string{"a1:in_progress", "a2:group_stopped", "b1:ran", "a3:group_stopped"}, statuses(rep))
	assert.Equal(t, []string{"b1"}, rec.ran)
	require.ErrorIs(t, rep.Outcomes[0].Err, idem.ErrInProgress)
	assert.Len(t, store.released, 2, "a2 and a3 released")
	close(finish)
	<-done

	rec.ran = nil
	rep = e.Process(ctx, its, rec.run, batch.Mode{Ordered: true})
	assert.Equal(t, []string{"a1:replayed", "a2:ran", "b1:replayed", "a3:ran"}, statuses(rep))
	assert.Equal(t, []string{"a2", "a3"}, rec.ran)
}

// TestOrderedCompletionFailsAtSettle: with batch claims, a group's next item starts once
// the one before returned, and the outcomes are recorded together. An outcome whose
// recording fails (its lease was lost) fails its item, which becomes its group's first
// failure: a stream redelivers from it, and the later items, recorded, replay.
func TestOrderedCompletionFailsAtSettle(t *testing.T) {
	t.Parallel()
	store := newCountingStore()
	g, err := idem.New(store, "settle")
	require.NoError(t, err)
	a1, err := g.StoredKey(idem.Request{Key: "key-a1"})
	require.NoError(t, err)
	store.failComplete = map[string]error{a1: idemstore.ErrLeaseLost}
	e, err := batch.New(g, batch.Source{})
	require.NoError(t, err)
	its := items("a/a1", "a/a2", "b/b1")
	rec := &recorder{items: its}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep := e.Process(ctx, its, rec.run, batch.Mode{Ordered: true})
	assert.Equal(t, []string{"a1:lease_lost", "a2:ran", "b1:ran"}, statuses(rep))
	assert.Equal(t, []int{0}, rep.FirstFailures())
	require.ErrorIs(t, rep.Outcomes[0].Err, idem.ErrLeaseLost)
}

// TestOrderedRecordEach: with RecordEach, no batch claim is made; each item completes
// before the next of its group starts, so a failed completion stops the group before its
// next item runs.
func TestOrderedRecordEach(t *testing.T) {
	t.Parallel()
	store := storetest.NewFaulty(memstore.New())
	g, err := idem.New(store, "each")
	require.NoError(t, err)
	e, err := batch.New(g, batch.Source{})
	require.NoError(t, err)
	store.FailTimes("complete", idemstore.ErrLeaseLost, false, 1)
	its := items("a/a1", "a/a2", "b/b1")
	rec := &recorder{items: its}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep := e.Process(ctx, its, rec.run, batch.Mode{Ordered: true, RecordEach: true})
	require.True(t, rep.Outcomes[0].Failed() || rep.Outcomes[2].Failed(), "one completion failed")
	if rep.Outcomes[0].Failed() {
		assert.Equal(t, batch.ReasonGroupStopped, rep.Outcomes[1].Reason, "a2 never ran after a1's completion failed")
		assert.NotContains(t, rec.ran, "a2")
	}
}

// TestOrderedDuplicatesRunOnce: two records of a group with one key and content run once;
// the second is a duplicate.
func TestOrderedDuplicatesRunOnce(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "dups")
	require.NoError(t, err)
	e, err := batch.New(g, batch.Source{})
	require.NoError(t, err)
	its := items("a/a1", "a/a2", "b/b1")
	its[1].Key, its[1].Fingerprint = its[0].Key, its[0].Fingerprint
	rec := &recorder{items: its}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep := e.Process(ctx, its, rec.run, batch.Mode{Ordered: true})
	assert.Equal(t, []string{"a1:ran", "a2:duplicate", "b1:ran"}, statuses(rep))
	slices.Sort(rec.ran)
	assert.Equal(t, []string{"a1", "b1"}, rec.ran)
}

// TestOrderedDeadline: records not started for lack of time fail with not_started, and
// each group's first such record is its first failure.
func TestOrderedDeadline(t *testing.T) {
	t.Parallel()
	clock := storetest.NewSettableClock()
	store := newCountingStore()
	g, err := idem.New(store, "deadline", idem.WithClock(clock))
	require.NoError(t, err)
	e, err := batch.New(g, batch.Source{}, batch.WithConcurrency(1), batch.WithDeadlineMargin(10*time.Second))
	require.NoError(t, err)
	its := items("a/a1", "b/b1", "a/a2", "b/b2")
	rec := &recorder{items: its}
	ctx := deadlineContext(t, clock, time.Minute)
	run := func(ctx context.Context, i int) error {
		clock.Advance(55 * time.Second) // the first record uses up the time
		return rec.run(ctx, i)
	}
	rep := e.Process(ctx, its, run, batch.Mode{Ordered: true})
	assert.Equal(t, []string{"a1:ran", "b1:not_started", "a2:not_started", "b2:group_stopped"}, statuses(rep))
	assert.Equal(t, []int{1, 2}, rep.FirstFailures())
	require.ErrorIs(t, rep.Outcomes[1].Err, batch.ErrNotStarted)
	assert.Len(t, store.released, 3, "the claims of the records not started are released")
}

// TestOrderedLeaseLostMidRun: a record whose lease ends while its handler runs, and whose
// key another invocation takes over meanwhile, is not recorded over the other owner: it
// fails with lease_lost and is its group's first failure, and the rest of its group is not
// started. The other owner's result stays, and the redelivery replays it.
func TestOrderedLeaseLostMidRun(t *testing.T) {
	t.Parallel()
	clock := storetest.NewSettableClock()
	store := newCountingStore()
	g, err := idem.New(store, "lease", idem.WithClock(clock))
	require.NoError(t, err)
	other, err := idem.New(store, "lease", idem.WithClock(clock))
	require.NoError(t, err)
	e, err := batch.New(g, batch.Source{}, batch.WithConcurrency(1), batch.WithDeadlineMargin(0))
	require.NoError(t, err)
	its := items("a/a1", "a/a2", "b/b1")
	rec := &recorder{items: its}
	ctx := deadlineContext(t, clock, time.Minute)
	run := func(ctx context.Context, i int) error {
		if its[i].ID == "a1" {
			// The lease (to the deadline, plus the guard's margin) ends, and another
			// invocation takes the key over and completes it.
			clock.Advance(2 * time.Hour)
			_, _, err := idem.Do(deadlineContext(t, clock, time.Minute), other, idem.Request{Key: "key-a1", Fingerprint: []byte("a1")},
				func(context.Context) (string, error) { return "theirs", nil })
			require.NoError(t, err)
		}
		return rec.run(ctx, i)
	}
	rep := e.Process(ctx, its, run, batch.Mode{Ordered: true})
	assert.Equal(t, "a1:lease_lost", statuses(rep)[0])
	assert.True(t, rep.Outcomes[1].Failed(), "a2 is not started")
	assert.NotContains(t, rec.ran, "a2")
	assert.Equal(t, 0, rep.FirstFailures()[0])
	require.ErrorIs(t, rep.Outcomes[0].Err, idem.ErrLeaseLost)

	got, replayed, err := idem.Do(deadlineContext(t, clock, time.Minute), other, idem.Request{Key: "key-a1", Fingerprint: []byte("a1")},
		func(context.Context) (string, error) { return "again", nil })
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, "theirs", got, "the other owner's result stands")
}
