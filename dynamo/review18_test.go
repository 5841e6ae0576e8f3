package dynamo_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/idemstore"
)

// TestReview18_WaitInFlightOnDynamoDB: batch.WithWaitInFlight on DynamoDB Local. A crashed
// invocation's batch claim (BatchExecuteStatement) holds three keys, leases ending in about
// a second; a live caller holds a fourth through idem.Do and completes it while the batch
// waits. The batch (its own batch claim meets all four in progress) takes the crashed keys
// over once their leases end, each run exactly once and completed on its own, replays the
// live caller's result without running, and the records after a1 in its group run after
// it. (Passes on main: coverage of the takeover and replay through dynamo.Store.)
func TestReview18_WaitInFlightOnDynamoDB(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	crashed, err := idem.New(e.store, "review18-wait", idem.WithLeaseMargin(100*time.Millisecond))
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(context.Background(), time.Second)
	var reqs []idem.Request
	for _, k := range []string{"a1", "b1", "c1"} {
		reqs = append(reqs, idem.Request{Key: "key-" + k, Fingerprint: []byte(k)})
	}
	crashed.Claim(cctx, reqs) // never settled: the sandbox died
	cancel()

	g, err := idem.New(e.store, "review18-wait")
	require.NoError(t, err)
	claimed, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_, _, err := idem.Do(context.Background(), g, idem.Request{Key: "key-d1", Fingerprint: []byte("d1")},
			func(context.Context) (struct{}, error) { // the result type the batch replays
				close(claimed)
				<-release
				return struct{}{}, nil
			})
		assert.NoError(t, err)
	}()
	<-claimed

	eng, err := batch.New(g, batch.Source{}, batch.WithWaitInFlight(true), batch.WithDeadlineMargin(2*time.Second))
	require.NoError(t, err)
	its := []batch.Item{}
	for _, s := range [][2]string{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}, {"c", "c1"}, {"d", "d1"}, {"d", "d2"}} {
		its = append(its, batch.Item{ID: s[1], Group: s[0], Key: "key-" + s[1], Fingerprint: []byte(s[1])})
	}
	var mu sync.Mutex
	var ran []string
	run := func(_ context.Context, i int) error {
		mu.Lock()
		ran = append(ran, its[i].ID)
		mu.Unlock()
		return nil
	}
	ctx, cancelRun := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelRun()
	go func() {
		time.Sleep(300 * time.Millisecond)
		close(release)
	}()
	rep := eng.Process(ctx, its, run, batch.Mode{Ordered: true, RecordBeforeNext: true})
	<-done

	var got []string
	for _, o := range rep.Outcomes {
		if o.Failed() {
			got = append(got, o.ID+":"+string(o.Reason))
		} else {
			got = append(got, o.ID+":"+string(o.Status))
		}
	}
	assert.Equal(t, []string{"a1:ran", "a2:ran", "b1:ran", "c1:ran", "d1:replayed", "d2:ran"}, got, "d1: %v", rep.Outcomes[4].Err)
	assert.ElementsMatch(t, []string{"a1", "a2", "b1", "c1", "d2"}, ran, "each ran once; d1 not at all")
	mu.Lock()
	defer mu.Unlock()
	for i, id := range ran {
		if id == "a2" {
			assert.Contains(t, ran[:i], "a1", "a2 after a1")
		}
	}
	for _, k := range []string{"a1", "a2", "b1", "c1", "d1", "d2"} {
		sk, err := g.StoredKey(idem.Request{Key: "key-" + k})
		require.NoError(t, err)
		rec, err := e.store.Get(context.Background(), sk)
		require.NoError(t, err)
		require.NotNil(t, rec, k)
		assert.Equal(t, idemstore.StatusCompleted, rec.Status, k)
	}
}
