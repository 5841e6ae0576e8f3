package bench

import (
	"context"
	"runtime"

	"github.com/idemkit/idem"
)

// GuardBatchSize is the records per batch of the stream batch workloads (B1, B1b): a
// batch of a stream shard, as Lambda delivers up to 100 records by default.
const GuardBatchSize = 100

// guardBatchWarmup is how many batches, on keys of their own and untimed, come before B1.
const guardBatchWarmup = 10

// GuardBatchCount returns the batches of B1 and B1b for counts c: a quarter of W4's, so
// that B1 runs 2.5 times W4's records (50 batches of 100 at [Spec]'s sizes).
func GuardBatchCount(c Counts) int { return max(c.W4Batches/4, 1) }

// GuardBatchSteps returns B1 (batches of [GuardBatchSize] fresh records, each claimed with
// one idem.Guard.Claim, run in order with DoClaimed and settled once, as a stream
// consumer's ordered shard does) and B1b (the same batches again: every record replays).
// They measure the store's batch calls for a batch of a hundred on any store, without a
// stream source's adapter. Before B1 an untimed warmup runs batches of its own.
func (b *Bench) GuardBatchSteps() []Step {
	n := GuardBatchCount(b.cfg.Counts)
	batches := newGuardBatches(n)
	return []Step{
		func() *Result {
			if r := b.GuardBatches("warmup_batch_100", newGuardBatches(guardBatchWarmup), guardBatchWarmup*GuardBatchSize); len(r.Violations) > 0 {
				return r
			}
			runtime.GC()
			return b.GuardBatches("B1_batch_100_new", batches, int64(n*GuardBatchSize))
		},
		func() *Result { return b.GuardBatches("B1b_batch_100_redelivered", batches, 0) },
	}
}

// newGuardBatches returns n batches of [GuardBatchSize] requests on fresh keys.
func newGuardBatches(n int) [][]idem.Request {
	batches := make([][]idem.Request, n)
	for i := range batches {
		reqs := make([]idem.Request, GuardBatchSize)
		for j := range reqs {
			reqs[j] = idem.Request{Key: UUID4()}
		}
		batches[i] = reqs
	}
	return batches
}

// GuardBatches runs batches one after another, each claimed together, its records run in
// order and settled once; want is the handler executions that must result (0 for a
// redelivery, whose every record must replay).
func (b *Bench) GuardBatches(name string, batches [][]idem.Request, want int64) *Result {
	r, failed := b.Sequential(name, "batch", len(batches), func(ctx context.Context, i int) bool {
		reqs := batches[i]
		batch := b.Guard.Claim(ctx, reqs)
		ok := true
		for j := range reqs {
			res, replayed, err := idem.DoClaimed(ctx, batch, j, b.handler(Event{ID: reqs[j].Key}))
			if err != nil || res.ID != reqs[j].Key || replayed != (want == 0) {
				ok = false
			}
		}
		for _, err := range batch.Settle(ctx) {
			if err != nil {
				ok = false
			}
		}
		return ok
	})
	records := len(batches) * GuardBatchSize
	if r.WallMS > 0 {
		rps := round(float64(records)/(r.WallMS/1e3), 1)
		r.RecordsPerS = &rps
	}
	r.Check(failed == 0, "%d batches had a record that failed, or ran when it should replay, or replayed when new", failed)
	r.Check(r.HandlerExecutions == want, "%d executions, want %d", r.HandlerExecutions, want)
	return r
}
