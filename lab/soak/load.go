package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
)

// rawKey is the caller's key number i; the table must never hold it.
func rawKey(i int) string { return fmt.Sprintf("soak-payment-%06d", i) }

func (r *run) storedKeys() (map[string]int, error) {
	ids := make(map[string]int, len(r.keys))
	for i := range r.keys {
		id, err := r.guard.StoredKey(idem.Request{Key: rawKey(i)})
		if err != nil {
			return nil, err
		}
		ids[id] = i
	}
	return ids, nil
}

func (r *run) stateOf(id string) *keyState {
	i, ok := r.ids[id]
	if !ok {
		return nil
	}
	return r.keys[i]
}

// load runs the invocations from the workers, until they are done or MaxDuration ends.
func (r *run) load(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.MaxDuration)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range r.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(r.cfg.Seed, uint64(w)+1))
			for next.Add(1) <= int64(r.cfg.Invocations) && ctx.Err() == nil {
				r.invoke(ctx, rnd)
			}
		}()
	}
	wg.Wait()
}

// invoke makes one call. Keys are drawn with a skew towards a hot set, so that new keys,
// replays and in-flight duplicates all occur.
func (r *run) invoke(ctx context.Context, rnd *rand.Rand) {
	i := rnd.IntN(len(r.keys))
	if rnd.IntN(4) == 0 {
		i = rnd.IntN(max(len(r.keys)/10, 1)) // the hot tenth
	}
	k := r.keys[i]
	fail := rnd.Float64() < r.cfg.ErrorRate
	work := time.Duration(rnd.IntN(3)) * time.Millisecond

	ctx, cancel := context.WithTimeout(ctx, r.cfg.Deadline)
	defer cancel()
	got, replayed, err := idem.Do(ctx, r.guard, idem.Request{Key: rawKey(i)}, func(context.Context) (string, error) {
		k.mu.Lock()
		k.live++
		k.runs++
		n, live, done := k.runs, k.live, k.result != ""
		k.mu.Unlock()
		if live > 1 {
			r.violate("key %d: %d runs at once", i, live)
		}
		if done {
			r.violate("key %d: ran again after its result was stored", i)
		}
		time.Sleep(work)
		k.mu.Lock()
		k.live--
		k.mu.Unlock()
		if fail {
			return "", errHandler
		}
		return fmt.Sprintf("key %d run %d", i, n), nil
	})
	r.count(i, k, got, replayed, err)
}

// count files the outcome of one call and checks that every caller who gets a result gets
// the same one.
func (r *run) count(i int, k *keyState, got string, replayed bool, err error) {
	r.mu.Lock()
	r.report.Invocations++
	switch {
	case err == nil && replayed:
		r.report.Replays++
	case err == nil:
		r.report.Fresh++
	case errors.Is(err, errHandler):
		r.report.HandlerErrors++
	case errors.Is(err, idem.ErrInProgress):
		r.report.InProgress++
	case errors.Is(err, idem.ErrLeaseLost):
		r.report.LeaseLost++
	case errors.Is(err, idem.ErrStore):
		r.report.StoreErrors++
	default:
		r.mu.Unlock()
		r.violate("key %d: unexpected error %v", i, err)
		return
	}
	r.mu.Unlock()
	if err != nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.result == "":
		k.result, k.resultAt = got, k.runs
	case k.result != got:
		r.violate("key %d: result %q, but %q before", i, got, k.result)
	}
}
