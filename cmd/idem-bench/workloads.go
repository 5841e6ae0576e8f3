package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqs"
)

// Counts are the sizes of the workloads. [SpecCounts] are those of BENCHMARKS.md; anything
// else makes the figures incomparable and is for tests only.
type Counts struct {
	WarmupInvocations int // sequential new-key invocations
	WarmupW3Rounds    int
	WarmupW4Batches   int
	Invocations       int // W1, W2, X1, X2
	W3Rounds          int
	W3Goroutines      int
	W4Batches         int
	W4bBatches        int
	BatchSize         int
	// InterleavedPairs is the number of pairs of W1_X1_interleaved and W2_X2_interleaved,
	// run after the workloads; 0 (as in SpecCounts) leaves them out. -interleaved sets it
	// to [InterleavedPairs].
	InterleavedPairs int
}

// SpecCounts returns the workload sizes of BENCHMARKS.md.
func SpecCounts() Counts {
	return Counts{
		WarmupInvocations: 10000,
		WarmupW3Rounds:    10,
		WarmupW4Batches:   100,
		Invocations:       2000,
		W3Rounds:          20,
		W3Goroutines:      50,
		W4Batches:         200,
		W4bBatches:        50,
		BatchSize:         10,
	}
}

// Library settings of BENCHMARKS.md: the deadline set on every invocation's context (as the
// Lambda runtime would) makes the lease, and records are kept for expiry.
const (
	deadline = 30 * time.Second
	expiry   = time.Hour
	scope    = "bench"
)

// preclaimed are the positions (0-based) of the W4b records held by blocked invocations.
var preclaimed = []int{2, 5, 8}

// bench holds what every workload shares: one client, one guard, one SQS handler.
type bench struct {
	counts Counts
	client *dynamodb.Client
	table  string
	guard  *idem.Guard
	sqs    *sqs.Handler
	cnt    *counters
	pid    int // DynamoDB Local's JVM, or 0 for a remote endpoint

	executions atomic.Int64
	raw        []rawKey // the keys of X1, again in X2
}

// newBench prepares the workloads. batchClaims is passed to sqs.WithBatchClaims: true (the
// default, and what BENCHMARKS.md measures) or false to measure the per-message path for
// comparison.
func newBench(counts Counts, client *dynamodb.Client, table string, guard *idem.Guard, cnt *counters, pid int, batchClaims bool) (*bench, error) {
	b := &bench{counts: counts, client: client, table: table, guard: guard, cnt: cnt, pid: pid}
	h, err := b.newSQSHandler(batchClaims)
	if err != nil {
		return nil, err
	}
	b.sqs = h
	return b, nil
}

// newSQSHandler returns an SQS handler of b's guard that runs b.handleMessage, without
// payload validation; batchClaims is passed to sqs.WithBatchClaims.
func (b *bench) newSQSHandler(batchClaims bool) (*sqs.Handler, error) {
	noValidation := func(events.SQSMessage) ([]byte, error) { return nil, nil }
	return sqs.New(b.guard, b.handleMessage, sqs.WithFingerprint(noValidation), sqs.WithBatchClaims(batchClaims))
}

// handler is the guarded function of W1–W3: no I/O, no sleep.
func (b *bench) handler(ev event) func(context.Context) (response, error) {
	return func(context.Context) (response, error) {
		b.executions.Add(1)
		return response{OK: true, ID: ev.ID}, nil
	}
}

func (b *bench) handleMessage(context.Context, events.SQSMessage) error {
	b.executions.Add(1)
	return nil
}

// line is one JSON line of a run: it reports its name and the invariants it broke.
type line interface {
	broken() (name string, violations []string)
}

func (r *Result) broken() (string, []string) { return r.Name, r.violations }

// run runs the warmup and every workload in order, then the interleaved check if
// counts.InterleavedPairs > 0, calling emit with each result.
func (b *bench) run(emit func(line)) error {
	runtime.GC()
	if err := b.warmup(); err != nil {
		return err
	}
	evs := newEvents(b.counts.Invocations)
	steps := []func() *Result{
		func() *Result { return b.newKeys("W1_new_keys", evs) },
		func() *Result { return b.replays(evs) },
		func() *Result { return b.contention("W3_contention", b.counts.W3Rounds) },
		func() *Result { return b.sqsBatches("W4_sqs_batch", b.counts.W4Batches) },
		b.sqsInProgress,
		b.rawPutUpdate,
		b.rawPutConflict,
	}
	for _, step := range steps {
		runtime.GC()
		emit(step())
	}
	if n := b.counts.InterleavedPairs; n > 0 {
		runtime.GC()
		r, evs, keys := b.interleavedNewKeys(n)
		emit(r)
		runtime.GC()
		emit(b.interleavedReplays(evs, keys))
	}
	return nil
}

// warmup settles the JVM and the client's connections on keys of its own.
func (b *bench) warmup() error {
	var bad []string
	for _, r := range []*Result{
		b.newKeys("warmup_new_keys", newEvents(b.counts.WarmupInvocations)),
		b.contention("warmup_contention", b.counts.WarmupW3Rounds),
		b.sqsBatches("warmup_sqs_batch", b.counts.WarmupW4Batches),
	} {
		for _, v := range r.violations {
			bad = append(bad, r.Name+": "+v)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("idem-bench: warmup failed: %v", bad)
	}
	return nil
}

// sequential runs op for i in [0, n), one after another, each with a fresh deadline on its
// context, as one measured region; op reports whether its call went as the workload wants.
// It returns the region's result (without checks) and how many calls did not.
func (b *bench) sequential(name, unit string, n int, op func(ctx context.Context, i int) bool) (*Result, int) {
	lat := make([]time.Duration, n)
	var failed int
	m := newMeter(b.cnt, b.pid)
	exec0 := b.executions.Load()
	k := m.begin()
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		ok := op(ctx, i)
		lat[i] = time.Since(start)
		cancel()
		if !ok {
			failed++
		}
	}
	m.end(k)
	return m.result(name, unit, lat, b.executions.Load()-exec0), failed
}

// newKeys is W1: one sequential invocation per fresh key.
func (b *bench) newKeys(name string, evs []event) *Result {
	r, failed := b.sequential(name, "invocation", len(evs), func(ctx context.Context, i int) bool {
		_, _, err := idem.Do(ctx, b.guard, idem.Request{Key: evs[i].ID}, b.handler(evs[i]))
		return err == nil
	})
	r.check(failed == 0, "%d invocations failed", failed)
	r.check(r.HandlerExecutions == int64(len(evs)), "%d executions, want %d", r.HandlerExecutions, len(evs))
	return r
}

// replays is W2: the W1 events again, in order.
func (b *bench) replays(evs []event) *Result {
	r, failed := b.sequential("W2_replays", "invocation", len(evs), func(ctx context.Context, i int) bool {
		res, replayed, err := idem.Do(ctx, b.guard, idem.Request{Key: evs[i].ID}, b.handler(evs[i]))
		return err == nil && replayed && res.OK && res.ID == evs[i].ID
	})
	r.check(r.HandlerExecutions == 0, "%d executions, want 0", r.HandlerExecutions)
	r.check(failed == 0, "%d replays failed or returned another key's result", failed)
	return r
}

// contention is W3: rounds of goroutines released together on one fresh key each.
func (b *bench) contention(name string, rounds int) *Result {
	g := b.counts.W3Goroutines
	evs := newEvents(rounds)
	lat := make([]time.Duration, 0, rounds*g)
	roundWall := make([]time.Duration, 0, rounds)
	var inProgress, replays, otherErrs, badRounds int64
	m := newMeter(b.cnt, b.pid)
	exec0 := b.executions.Load()
	k := m.begin()
	for _, ev := range evs {
		before := b.executions.Load()
		wall, rl, ip, rp, other := b.round(ev, g)
		if b.executions.Load()-before != 1 {
			badRounds++
		}
		roundWall = append(roundWall, wall)
		lat = append(lat, rl...)
		inProgress, replays, otherErrs = inProgress+ip, replays+rp, otherErrs+other
	}
	m.end(k)
	execs := b.executions.Load() - exec0
	r := m.result(name, "invocation", lat, execs)
	slices.Sort(roundWall)
	perKey := float64(execs) / float64(max(rounds, 1))
	p50, p99 := us(percentile(roundWall, 50)), us(percentile(roundWall, 99))
	r.InProgressErrors, r.CompletedReplays = &inProgress, &replays
	r.HandlerExecutionsPerKey, r.RoundWallP50US, r.RoundWallP99US = &perKey, &p50, &p99
	r.check(badRounds == 0, "%d keys did not run exactly once", badRounds)
	r.check(otherErrs == 0, "%d errors other than in-progress", otherErrs)
	return r
}

// round starts g goroutines on ev behind a barrier and waits for all of them.
func (b *bench) round(ev event, g int) (wall time.Duration, lat []time.Duration, inProgress, replays, other int64) {
	lat = make([]time.Duration, g)
	var ready, done sync.WaitGroup
	var ip, rp, ot atomic.Int64
	start := make(chan struct{})
	for i := range g {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			fn := b.handler(ev)
			ready.Done()
			<-start
			t0 := time.Now()
			res, replayed, err := idem.Do(ctx, b.guard, idem.Request{Key: ev.ID}, fn)
			lat[i] = time.Since(t0)
			switch {
			case errors.Is(err, idem.ErrInProgress):
				ip.Add(1)
			case err != nil || res.ID != ev.ID:
				ot.Add(1)
			case replayed:
				rp.Add(1)
			}
		}()
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	done.Wait()
	return time.Since(t0), lat, ip.Load(), rp.Load(), ot.Load()
}
