package bench

import (
	"context"
	"slices"
	"time"

	"github.com/idemkit/idem"
)

// NewKeyOp returns W1's operation on evs[i]: one invocation on its fresh key.
func (b *Bench) NewKeyOp(evs []Event) func(ctx context.Context, i int) bool {
	return func(ctx context.Context, i int) bool {
		_, _, err := idem.Do(ctx, b.Guard, idem.Request{Key: evs[i].ID}, b.handler(evs[i]))
		return err == nil
	}
}

// ReplayOp returns W2's operation on evs[i]: the invocation again, which must replay its
// own key's result.
func (b *Bench) ReplayOp(evs []Event) func(ctx context.Context, i int) bool {
	return func(ctx context.Context, i int) bool {
		res, replayed, err := idem.Do(ctx, b.Guard, idem.Request{Key: evs[i].ID}, b.handler(evs[i]))
		return err == nil && replayed && res.OK && res.ID == evs[i].ID
	}
}

// libraryFirst says whether pair i runs idem's side first: ABBA, so pairs 0 and 3 of
// every four do.
func libraryFirst(i int) bool { return i%4 == 0 || i%4 == 3 }

// Pairs runs n pairs, each idem's operation lib(i) and the floor's floor(i) back to back, in
// ABBA order (see libraryFirst), each with a fresh deadline on its context, as one measured
// region: drift (DynamoDB Local's JVM, a server's caches) and the load of everything else on
// the machine fall on both sides alike, which workloads run minutes apart cannot promise.
// The line's latencies are idem's side, with floor_p50_us and floor_mean_us the floor's,
// and p50_ratio and mean_ratio idem's over the floor's; calls, CPU and wall time count both
// sides, per pair. It must hold that every operation went as its workload wants and that
// the handler ran wantExec times.
func (b *Bench) Pairs(name string, n int, lib, floor func(ctx context.Context, i int) bool, wantExec int64) *Result {
	libLat, floorLat := make([]time.Duration, n), make([]time.Duration, n)
	failed := 0
	timed := func(op func(context.Context, int) bool, i int) time.Duration {
		ctx, cancel := context.WithTimeout(context.Background(), Deadline)
		defer cancel()
		start := time.Now()
		ok := op(ctx, i)
		d := time.Since(start)
		if !ok {
			failed++
		}
		return d
	}
	exec0 := b.executions.Load()
	b.m.reset()
	b.m.begin()
	for i := range n {
		if libraryFirst(i) {
			libLat[i] = timed(lib, i)
			floorLat[i] = timed(floor, i)
		} else {
			floorLat[i] = timed(floor, i)
			libLat[i] = timed(lib, i)
		}
	}
	b.m.end()
	r := b.result(name, "pair", libLat, b.executions.Load()-exec0)
	r.Check(failed == 0, "%d operations failed", failed)
	r.Check(r.HandlerExecutions == wantExec, "%d executions, want %d", r.HandlerExecutions, wantExec)
	if n == 0 {
		return r
	}
	sorted := slices.Clone(floorLat)
	slices.Sort(sorted)
	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}
	fp50, fmean := us(percentile(sorted, 50)), round(float64(sum.Nanoseconds())/float64(n)/1e3, 1)
	r.FloorP50US, r.FloorMeanUS = &fp50, &fmean
	if fp50 > 0 && fmean > 0 {
		p, m := round(r.P50US/fp50, 3), round(r.MeanUS/fmean, 3)
		r.P50Ratio, r.MeanRatio = &p, &m
	}
	return r
}
