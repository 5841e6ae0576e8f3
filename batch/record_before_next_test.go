package batch_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
)

var recordBeforeNext = batch.Mode{Ordered: true, RecordBeforeNext: true}

// completed reports whether key's record is completed in store.
func completed(t *testing.T, g *idem.Guard, store idemstore.Store, key string) bool {
	t.Helper()
	sk, err := g.StoredKey(idem.Request{Key: key})
	require.NoError(t, err)
	rec, err := store.Get(context.Background(), sk)
	require.NoError(t, err)
	return rec != nil && rec.Status == idemstore.StatusCompleted
}

// TestRecordBeforeNext: with RecordBeforeNext, an item followed in the batch by another
// item of its group is recorded before that one starts, on its own; the last item of each
// group waits for the batch's completion call. The claims stay one batch call.
func TestRecordBeforeNext(t *testing.T) {
	t.Parallel()
	for _, concurrency := range []int{1, 4} {
		t.Run(fmt.Sprint("concurrency ", concurrency), func(t *testing.T) {
			t.Parallel()
			store := newCountingStore()
			g, err := idem.New(store, "before-next")
			require.NoError(t, err)
			e, err := batch.New(g, batch.Source{}, batch.WithConcurrency(concurrency))
			require.NoError(t, err)
			its := items("a/a1", "b/b1", "a/a2", "c/c1", "a/a3")
			rec := &recorder{items: its}
			seen := map[string]bool{}
			run := func(ctx context.Context, i int) error {
				switch its[i].ID {
				case "a2":
					seen["a1 before a2"] = completed(t, g, store, "key-a1")
				case "a3":
					seen["a2 before a3"] = completed(t, g, store, "key-a2")
				}
				return rec.run(ctx, i)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rep := e.Process(ctx, its, run, recordBeforeNext)
			assert.Equal(t, []string{"a1:ran", "b1:ran", "a2:ran", "c1:ran", "a3:ran"}, statuses(rep))
			assert.Equal(t, map[string]bool{"a1 before a2": true, "a2 before a3": true}, seen)
			assert.Equal(t, 1, store.claimMany, "one claim call")
			assert.Equal(t, 2, store.complete, "a1 and a2 recorded on their own")
			assert.Equal(t, 1, store.completeMany, "b1, c1 and a3 recorded together")
			for _, k := range []string{"key-a1", "key-a2", "key-a3", "key-b1", "key-c1"} {
				assert.True(t, completed(t, g, store, k), k)
			}
		})
	}
}

// TestRecordBeforeNextFailedRecordingStopsGroup: an early recording that fails (the lease
// was lost) fails its item, which is its group's first failure; the rest of the group is
// not started and its claims are released, while other groups go on.
func TestRecordBeforeNextFailedRecordingStopsGroup(t *testing.T) {
	t.Parallel()
	store := newCountingStore()
	g, err := idem.New(store, "before-next-fail")
	require.NoError(t, err)
	a1, err := g.StoredKey(idem.Request{Key: "key-a1"})
	require.NoError(t, err)
	store.failSingle = map[string]error{a1: idemstore.ErrLeaseLost}
	e, err := batch.New(g, batch.Source{})
	require.NoError(t, err)
	its := items("a/a1", "b/b1", "a/a2", "a/a3")
	rec := &recorder{items: its}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep := e.Process(ctx, its, rec.run, recordBeforeNext)
	assert.Equal(t, []string{"a1:lease_lost", "b1:ran", "a2:group_stopped", "a3:group_stopped"}, statuses(rep))
	assert.Equal(t, []int{0}, rep.FirstFailures())
	require.ErrorIs(t, rep.Outcomes[0].Err, idem.ErrLeaseLost)
	assert.NotContains(t, rec.ran, "a2")
	assert.NotContains(t, rec.ran, "a3")
	assert.Len(t, store.released, 2, "the claims of a2 and a3 are released")

}

// TestRecordBeforeNextLostResponse: an early recording whose response is lost after it
// took effect is resent, and the resend finds it recorded under its lease: the item
// succeeds, and the next item of its group starts after it, seeing it completed.
func TestRecordBeforeNextLostResponse(t *testing.T) {
	t.Parallel()
	store := newCountingStore()
	g, err := idem.New(store, "before-next-lost")
	require.NoError(t, err)
	a1, err := g.StoredKey(idem.Request{Key: "key-a1"})
	require.NoError(t, err)
	store.failSingle = map[string]error{a1: errors.New("read tcp: connection reset by peer")}
	store.landed = map[string]bool{a1: true}
	e, err := batch.New(g, batch.Source{})
	require.NoError(t, err)
	its := items("a/a1", "a/a2")
	rec := &recorder{items: its}
	var sawA1 bool
	run := func(ctx context.Context, i int) error {
		if its[i].ID == "a2" {
			sawA1 = completed(t, g, store, "key-a1")
		}
		return rec.run(ctx, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep := e.Process(ctx, its, run, recordBeforeNext)
	assert.Equal(t, []string{"a1:ran", "a2:ran"}, statuses(rep))
	assert.True(t, sawA1)
	assert.Equal(t, 2, store.complete, "a1 sent twice; a2, the last of its group, waits for the batch")
}

// TestRecordBeforeNextLateLandingResend: an early recording whose first attempt is delayed
// is resent; the resend records it, and the next item of its group runs after it. When the
// first attempt lands after that item's writes, it finds the record completed and commits
// nothing: the item's attached write ran once.
func TestRecordBeforeNextLateLandingResend(t *testing.T) {
	t.Parallel()
	store := newCountingStore()
	g, err := idem.New(store, "before-next-late")
	require.NoError(t, err)
	a1, err := g.StoredKey(idem.Request{Key: "key-a1"})
	require.NoError(t, err)
	store.hold = map[string]bool{a1: true}
	e, err := batch.New(g, batch.Source{})
	require.NoError(t, err)
	its := items("a/a1", "a/a2")
	rec := &recorder{items: its}
	var writes []string
	var sawA1 bool
	run := func(ctx context.Context, i int) error {
		id := its[i].ID
		if id == "a2" {
			sawA1 = completed(t, g, store, "key-a1")
		}
		if err := idem.Attach(ctx, func() error { writes = append(writes, id); return nil }); err != nil {
			return err
		}
		return rec.run(ctx, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep := e.Process(ctx, its, run, recordBeforeNext)
	assert.Equal(t, []string{"a1:ran", "a2:ran"}, statuses(rep))
	assert.True(t, sawA1, "a1 recorded by the resend before a2 started")
	require.Len(t, store.held, 1)
	require.NoError(t, store.held[0](), "the late first attempt finds a1 completed")
	assert.Equal(t, []string{"a1", "a2"}, writes, "a1's write committed once, before a2's")
}

// TestRecordBeforeNextCrash: an item recorded early is durable before the next one of its
// group starts, so an invocation that dies while that one runs (before the batch's
// completion) leaves it completed: the redelivery replays it and does not run it again.
func TestRecordBeforeNextCrash(t *testing.T) {
	t.Parallel()
	store := newCountingStore()
	g, err := idem.New(store, "before-next-crash")
	require.NoError(t, err)
	e, err := batch.New(g, batch.Source{})
	require.NoError(t, err)
	its := items("a/a1", "a/a2")
	rec := &recorder{items: its}
	var replayed bool
	run := func(ctx context.Context, i int) error {
		if its[i].ID == "a2" {
			// What a redelivery after a crash here meets for a1.
			other, err := idem.New(store, "before-next-crash")
			require.NoError(t, err)
			_, replayed, err = idem.Do(context.Background(), other, idem.Request{Key: "key-a1", Fingerprint: []byte("a1")},
				func(context.Context) (struct{}, error) { t.Error("a1 ran twice"); return struct{}{}, nil })
			require.NoError(t, err)
		}
		return rec.run(ctx, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep := e.Process(ctx, its, run, recordBeforeNext)
	assert.Equal(t, []string{"a1:ran", "a2:ran"}, statuses(rep))
	assert.True(t, replayed, "a1 replays")
}

// TestRecordBeforeNextLeaseEndsBeforeNext: a lease taken at the batch claim that ends
// between an item's early recording and the next item of its group (a maximum lease below
// the deadline, and a long item of another group in between) does not let the next item
// run on a key another caller may own: it is not started, and is its group's first
// failure. The item recorded before it stays recorded; the redelivery replays it and runs
// the next.
func TestRecordBeforeNextLeaseEndsBeforeNext(t *testing.T) {
	t.Parallel()
	clock := storetest.NewSettableClock()
	store := newCountingStore()
	g, err := idem.New(store, "before-next-lease", idem.WithClock(clock), idem.WithMaxLease(time.Minute))
	require.NoError(t, err)
	e, err := batch.New(g, batch.Source{}, batch.WithConcurrency(1), batch.WithDeadlineMargin(0))
	require.NoError(t, err)
	its := items("a/a1", "b/b1", "a/a2")
	rec := &recorder{items: its}
	run := func(ctx context.Context, i int) error {
		if its[i].ID == "b1" {
			clock.Advance(2 * time.Minute) // past every lease of the batch claim
		}
		return rec.run(ctx, i)
	}
	ctx := deadlineContext(t, clock, time.Hour)
	rep := e.Process(ctx, its, run, recordBeforeNext)
	assert.Equal(t, "a1:ran", statuses(rep)[0])
	assert.Equal(t, "a2:not_started", statuses(rep)[2])
	require.ErrorIs(t, rep.Outcomes[2].Err, idem.ErrLeaseLost)
	assert.NotContains(t, rec.ran, "a2")
	assert.True(t, completed(t, g, store, "key-a1"))

	rec.ran = nil
	redelivered := []batch.Item{its[0], its[2]}
	rec.items = redelivered
	rep = e.Process(deadlineContext(t, clock, time.Hour), redelivered, rec.run, recordBeforeNext)
	assert.Equal(t, []string{"a1:replayed", "a2:ran"}, statuses(rep))
}

// TestRecordBeforeNextLastFailsAtSettle: the last item of a group waits for the batch's
// completion; if that recording fails, the item fails and is its group's first failure,
// and nothing of its group ran after it in the batch.
func TestRecordBeforeNextLastFailsAtSettle(t *testing.T) {
	t.Parallel()
	store := newCountingStore()
	g, err := idem.New(store, "before-next-settle")
	require.NoError(t, err)
	a2, err := g.StoredKey(idem.Request{Key: "key-a2"})
	require.NoError(t, err)
	store.failComplete = map[string]error{a2: idemstore.ErrLeaseLost}
	e, err := batch.New(g, batch.Source{})
	require.NoError(t, err)
	its := items("a/a1", "b/b1", "a/a2")
	rec := &recorder{items: its}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep := e.Process(ctx, its, rec.run, recordBeforeNext)
	assert.Equal(t, []string{"a1:ran", "b1:ran", "a2:lease_lost"}, statuses(rep))
	assert.Equal(t, []int{2}, rep.FirstFailures())
	assert.True(t, completed(t, g, store, "key-a1"))
}
