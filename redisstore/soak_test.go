package redisstore_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

var soakInvocations = flag.Int("redis-soak", 3000, "invocations of TestSoak")

// errSoakHandler is the soak handler's own failure.
var errSoakHandler = errors.New("soak: handler failed")

// errSoakFault is a store failure the soak injects.
var errSoakFault = errors.New("soak: injected store fault")

// flaky fails a share of a store's calls, before or after they take effect (a lost
// answer), at random.
type flaky struct {
	idemstore.Store
	mu   sync.Mutex
	rnd  *rand.Rand
	rate float64
}

// fault decides the fate of one call: err to return, and whether the call is applied.
func (f *flaky) fault() (err error, apply bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rnd.Float64() >= f.rate {
		return nil, true
	}
	return errSoakFault, f.rnd.IntN(2) == 0
}

func (f *flaky) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	err, apply := f.fault()
	if !apply {
		return nil, false, err
	}
	prev, claimed, cerr := f.Store.Claim(ctx, rec, now)
	if err != nil {
		return nil, false, err
	}
	return prev, claimed, cerr
}

func (f *flaky) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	return f.do(func() error { return f.Store.Complete(ctx, rec, attached) })
}

func (f *flaky) Release(ctx context.Context, key, token string, now time.Time) error {
	return f.do(func() error { return f.Store.Release(ctx, key, token, now) })
}

func (f *flaky) Extend(ctx context.Context, key, token string, end time.Time) error {
	return f.do(func() error { return f.Store.Extend(ctx, key, token, end) })
}

func (f *flaky) do(call func() error) error {
	err, apply := f.fault()
	if !apply {
		return err
	}
	if cerr := call(); err == nil {
		return cerr
	}
	return err
}

// soakKey is the side-effect log of one key.
type soakKey struct {
	mu     sync.Mutex
	live   int    // runs in progress now
	runs   int    // runs in all
	claims int    // leases granted
	result string // the result a caller saw, once one did
}

// TestSoak drives the guard on the Redis store from many goroutines, over few keys, with
// short leases, handler failures and store faults (some applied with their answer lost),
// then settles every key and checks: never two runs of a key at once, never more runs
// than leases, no run after a caller saw the key's result, every caller saw the same
// result, and the stored record holds it. -redis-soak=N sets the invocations.
func TestSoak(t *testing.T) {
	const keys, workers = 120, 16
	rnd := rand.New(rand.NewPCG(1, 2))
	store := &flaky{Store: newStore(t, env.Client(t)), rnd: rand.New(rand.NewPCG(3, 4)), rate: 0.03}
	states := make([]*soakKey, keys)
	ids := map[string]int{}
	for i := range states {
		states[i] = &soakKey{}
	}
	var violations []string
	var vmu sync.Mutex
	violate := func(format string, args ...any) {
		vmu.Lock()
		violations = append(violations, fmt.Sprintf(format, args...))
		vmu.Unlock()
	}
	g, err := idem.New(store, "soak", idem.WithScope("soak"), idem.WithLeaseMargin(100*time.Millisecond),
		idem.WithHooks(idem.Hooks{OnClaimed: func(_ context.Context, e idem.Event) {
			k := states[ids[e.Key]]
			k.mu.Lock()
			k.claims++
			k.mu.Unlock()
		}}))
	require.NoError(t, err)
	for i := range keys {
		sk, err := g.StoredKey(idem.Request{Key: fmt.Sprint(i)})
		require.NoError(t, err)
		ids[sk] = i
	}
	call := func(i int, fail bool) (string, error) {
		k := states[i]
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		got, _, err := idem.Do(ctx, g, idem.Request{Key: fmt.Sprint(i)}, func(context.Context) (string, error) {
			k.mu.Lock()
			k.live++
			k.runs++
			n, live, seen := k.runs, k.live, k.result != ""
			k.mu.Unlock()
			if live > 1 {
				violate("key %d: %d runs at once", i, live)
			}
			if seen {
				violate("key %d: ran again after a caller saw its result", i)
			}
			time.Sleep(time.Millisecond)
			k.mu.Lock()
			k.live--
			k.mu.Unlock()
			if fail {
				return "", errSoakHandler
			}
			return fmt.Sprintf("key %d run %d", i, n), nil
		})
		if err == nil {
			k.mu.Lock()
			if k.result == "" {
				k.result = got
			} else if k.result != got {
				violate("key %d: result %q, but %q before", i, got, k.result)
			}
			k.mu.Unlock()
		}
		return got, err
	}

	counts := map[string]int{}
	var cmu sync.Mutex
	jobs := make(chan [2]int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				_, err := call(j[0], j[1] == 1)
				outcome := "ok"
				switch {
				case err == nil:
				case errors.Is(err, errSoakHandler):
					outcome = "handler-error"
				case errors.Is(err, idem.ErrInProgress):
					outcome = "in-progress"
				case errors.Is(err, idem.ErrLeaseLost):
					outcome = "lease-lost"
				case errors.Is(err, idem.ErrStore):
					outcome = "store-error"
				default:
					violate("key %d: unexpected error %v", j[0], err)
				}
				cmu.Lock()
				counts[outcome]++
				cmu.Unlock()
			}
		}()
	}
	for range *soakInvocations {
		i := rnd.IntN(keys)
		if rnd.IntN(4) == 0 {
			i = rnd.IntN(keys / 10) // a hot tenth
		}
		fail := 0
		if rnd.Float64() < 0.05 {
			fail = 1
		}
		jobs <- [2]int{i, fail}
	}
	close(jobs)
	wg.Wait()

	// Settle: faults off, every key called until it has its result (a lease left by a lost
	// answer ends within a second or so).
	store.mu.Lock()
	store.rate = 0
	store.mu.Unlock()
	ctx := context.Background()
	for i, k := range states {
		var err error
		for attempt := 0; attempt < 100; attempt++ {
			if _, err = call(i, false); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		require.NoError(t, err, "key %d did not settle", i)
		sk, err := g.StoredKey(idem.Request{Key: fmt.Sprint(i)})
		require.NoError(t, err)
		rec, err := store.Get(ctx, sk)
		require.NoError(t, err)
		require.NotNil(t, rec)
		assert.Equal(t, idemstore.StatusCompleted, rec.Status, "key %d", i)
		assert.Equal(t, fmt.Sprintf("%q", k.result), string(rec.Data), "key %d: stored and seen differ", i)
		assert.LessOrEqual(t, k.runs, k.claims, "key %d: runs without a lease", i)
	}
	assert.Empty(t, violations)
	t.Logf("invocations=%d outcomes=%v", *soakInvocations, counts)
}
