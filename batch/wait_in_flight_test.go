package batch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
)

// crashedClaim claims keys as an invocation that dies before it settles leaves them: in
// progress until their lease ends, leaseFor from now plus a 100 ms margin, and never
// before a second from now (the guard's shortest lease).
func crashedClaim(t *testing.T, store *countingStore, scope string, leaseFor time.Duration, keys ...string) {
	t.Helper()
	other, err := idem.New(store, scope, idem.WithLeaseMargin(100*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), leaseFor)
	defer cancel()
	var reqs []idem.Request
	for _, k := range keys {
		reqs = append(reqs, idem.Request{Key: "key-" + k, Fingerprint: []byte(k)})
	}
	other.Claim(ctx, reqs) // never settled: the sandbox died
}

// TestWaitInFlightTakesOverACrashedClaim: with WithWaitInFlight, an item whose key a
// crashed invocation's claim holds, with a lease that ends before the item's cut-off,
// waits for the lease to end and takes the key over in this invocation, instead of
// failing (which a stream source would count as a retry of the batch). The item after it
// in its group runs only after it; other groups go on meanwhile. Off, the item fails at
// once.
func TestWaitInFlightTakesOverACrashedClaim(t *testing.T) {
	t.Parallel()
	store := newCountingStore()
	crashedClaim(t, store, "wait-crash", 300*time.Millisecond, "a1", "c1")
	g, err := idem.New(store, "wait-crash")
	require.NoError(t, err)
	its := items("a/a1", "a/a2", "b/b1")
	mode := batch.Mode{Ordered: true, RecordBeforeNext: true}

	off, err := batch.New(g, batch.Source{})
	require.NoError(t, err)
	rec := &recorder{items: its}
	rep := off.Process(deadlineContext(t, g.Clock(), 10*time.Second), its, rec.run, mode)
	assert.Equal(t, []string{"a1:in_progress", "a2:group_stopped", "b1:ran"}, statuses(rep))

	on, err := batch.New(g, batch.Source{}, batch.WithWaitInFlight(true), batch.WithDeadlineMargin(time.Second))
	require.NoError(t, err)
	rec = &recorder{items: its}
	rep = on.Process(deadlineContext(t, g.Clock(), 10*time.Second), its, rec.run, mode)
	assert.Equal(t, []string{"a1:ran", "a2:ran", "b1:replayed"}, statuses(rep))
	assert.Equal(t, []string{"a1", "a2"}, rec.ran, "a1 taken over, then a2")
	assert.True(t, completed(t, g, store, "key-a1"))
	assert.True(t, completed(t, g, store, "key-a2"))
}

// TestWaitInFlightReplaysTheOwnersResult: an item waiting for a key that a live run holds
// replays that run's result once it completes; the handler does not run again.
func TestWaitInFlightReplaysTheOwnersResult(t *testing.T) {
	t.Parallel()
	store := newCountingStore()
	g, err := idem.New(store, "wait-live")
	require.NoError(t, err)
	claimed, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = idem.Do(context.Background(), g, idem.Request{Key: "key-a1", Fingerprint: []byte("a1")},
			func(context.Context) (struct{}, error) {
				close(claimed)
				time.Sleep(200 * time.Millisecond)
				return struct{}{}, nil
			})
	}()
	<-claimed
	e, err := batch.New(g, batch.Source{}, batch.WithWaitInFlight(true), batch.WithDeadlineMargin(time.Second))
	require.NoError(t, err)
	its := items("a/a1", "a/a2", "b/b1")
	rec := &recorder{items: its}
	rep := e.Process(deadlineContext(t, g.Clock(), time.Minute), its, rec.run, batch.Mode{Ordered: true, RecordBeforeNext: true})
	<-done
	assert.Equal(t, []string{"a1:replayed", "a2:ran", "b1:ran"}, statuses(rep))
	assert.ElementsMatch(t, []string{"a2", "b1"}, rec.ran)
}

// TestWaitInFlightLeaseBeyondTheCutoff: a claim whose lease ends after the item's cut-off
// (the deadline less the margin) is not taken over: the item fails in progress at the
// cut-off, and the rest of its group is not started; other groups run.
func TestWaitInFlightLeaseBeyondTheCutoff(t *testing.T) {
	t.Parallel()
	store := newCountingStore()
	crashedClaim(t, store, "wait-late", time.Minute, "a1", "c1")
	g, err := idem.New(store, "wait-late")
	require.NoError(t, err)
	e, err := batch.New(g, batch.Source{}, batch.WithWaitInFlight(true), batch.WithDeadlineMargin(500*time.Millisecond))
	require.NoError(t, err)
	its := items("a/a1", "a/a2", "b/b1")
	rec := &recorder{items: its}
	ctx := deadlineContext(t, g.Clock(), time.Second)
	rep := e.Process(ctx, its, rec.run, batch.Mode{Ordered: true, RecordBeforeNext: true})
	assert.Equal(t, []string{"a1:in_progress", "a2:group_stopped", "b1:ran"}, statuses(rep))
	require.ErrorIs(t, rep.Outcomes[0].Err, idem.ErrInProgress)
	assert.Equal(t, []string{"b1"}, rec.ran)
	assert.NoError(t, ctx.Err(), "the item gave up at its cut-off, before the deadline")
}
