package bench

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
)

// NewKeys is W1: one invocation per fresh key, one after another.
func (b *Bench) NewKeys(name string, evs []Event) *Result {
	r, failed := b.Sequential(name, "invocation", len(evs), b.NewKeyOp(evs))
	r.Check(failed == 0, "%d invocations failed", failed)
	r.Check(r.HandlerExecutions == int64(len(evs)), "%d executions, want %d", r.HandlerExecutions, len(evs))
	return r
}

// Replays is W2: the W1 events again, in order.
func (b *Bench) Replays(evs []Event) *Result {
	r, failed := b.Sequential("W2_replays", "invocation", len(evs), b.ReplayOp(evs))
	r.Check(r.HandlerExecutions == 0, "%d executions, want 0", r.HandlerExecutions)
	r.Check(failed == 0, "%d replays failed or returned another key's result", failed)
	return r
}

// Contention is W3: rounds of [W3Goroutines] goroutines released together on one fresh key
// each.
func (b *Bench) Contention(name string, rounds int) *Result {
	g := W3Goroutines
	evs := NewEvents(rounds)
	lat := make([]time.Duration, rounds*g)
	roundWall := make([]time.Duration, rounds)
	var inProgress, replays, others atomic.Int64
	badRounds := 0
	exec0 := b.executions.Load()
	b.m.reset()
	b.m.begin()
	for r, ev := range evs {
		before := b.executions.Load()
		var ready, done sync.WaitGroup
		start := make(chan struct{})
		for i := range g {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				ctx, cancel := context.WithTimeout(context.Background(), Deadline)
				defer cancel()
				fn := b.handler(ev)
				ready.Done()
				<-start
				t0 := time.Now()
				res, replayed, err := idem.Do(ctx, b.Guard, idem.Request{Key: ev.ID}, fn)
				lat[r*g+i] = time.Since(t0)
				switch {
				case errors.Is(err, idem.ErrInProgress):
					inProgress.Add(1)
				case err != nil || res.ID != ev.ID:
					others.Add(1)
				case replayed:
					replays.Add(1)
				}
			}()
		}
		ready.Wait()
		t0 := time.Now()
		close(start)
		done.Wait()
		roundWall[r] = time.Since(t0)
		if b.executions.Load()-before != 1 {
			badRounds++
		}
	}
	b.m.end()
	execs := b.executions.Load() - exec0
	res := b.result(name, "invocation", lat, execs)
	slices.Sort(roundWall)
	ip, rp := inProgress.Load(), replays.Load()
	perKey := round(float64(execs)/float64(max(rounds, 1)), 3)
	p50, p99 := us(percentile(roundWall, 50)), us(percentile(roundWall, 99))
	res.InProgressErrors, res.CompletedReplays = &ip, &rp
	res.HandlerExecutionsPerKey, res.RoundWallP50US, res.RoundWallP99US = &perKey, &p50, &p99
	res.Check(badRounds == 0, "%d keys did not run exactly once", badRounds)
	res.Check(others.Load() == 0, "%d errors other than in-progress", others.Load())
	return res
}
