package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
)

// sqsBatches is W4: batches of fresh messages, one after another.
func (b *bench) sqsBatches(name string, batches int) *Result {
	evs := newSQSEvents(batches, b.counts.BatchSize)
	r, failed := b.sequential(name, "batch", batches, func(ctx context.Context, i int) bool {
		resp, err := b.sqs.Handle(ctx, evs[i])
		return err == nil && len(resp.BatchItemFailures) == 0
	})
	want := int64(batches * b.counts.BatchSize)
	if r.WallMS > 0 {
		rps := round(float64(want)/(r.WallMS/1e3), 1)
		r.RecordsPerS = &rps
	}
	r.check(failed == 0, "%d batches reported failures or an error", failed)
	r.check(r.HandlerExecutions == want, "%d executions, want %d", r.HandlerExecutions, want)
	return r
}

// sqsInProgress is W4b: batches in which three records are held by other invocations.
func (b *bench) sqsInProgress() *Result {
	batches := b.counts.W4bBatches
	evs := newSQSEvents(batches, b.counts.BatchSize)
	lat := make([]time.Duration, batches)
	var exact, blockerErrs int64
	m := newMeter(b.cnt, b.pid)
	var execs int64
	for i, ev := range evs {
		release, wait := b.block(ev, &blockerErrs)
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		exec0 := b.executions.Load()
		k := m.begin()
		start := time.Now()
		resp, err := b.sqs.Handle(ctx, ev)
		lat[i] = time.Since(start)
		m.end(k)
		cancel()
		execs += b.executions.Load() - exec0
		close(release)
		wait()
		if err == nil && reportsExactly(resp, ev, preclaimed) {
			exact++
		}
	}
	r := m.result("W4b_sqs_batch_3_inprogress", "batch", lat, execs)
	r.BatchesReportingExactlyPreclaimed = &exact
	want := int64(batches * (b.counts.BatchSize - len(preclaimed)))
	r.check(exact == int64(batches), "%d of %d batches reported exactly the preclaimed records", exact, batches)
	r.check(execs == want, "%d executions, want %d", execs, want)
	r.check(blockerErrs == 0, "%d blocking invocations failed", blockerErrs)
	return r
}

// block claims the preclaimed records of ev with invocations of the same guard that hold
// them until release is closed; it returns once all hold their claim. wait waits for them
// to complete.
func (b *bench) block(ev events.SQSEvent, errs *int64) (release chan struct{}, wait func()) {
	release = make(chan struct{})
	var claimed, done sync.WaitGroup
	for _, pos := range preclaimed {
		id := ev.Records[pos].MessageId
		claimed.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			ran := false
			_, _, err := idem.Do(ctx, b.guard, idem.Request{Key: id}, func(context.Context) (response, error) {
				ran = true
				claimed.Done()
				<-release
				return response{OK: true, ID: id}, nil
			})
			if !ran {
				claimed.Done()
			}
			if err != nil || !ran {
				atomic.AddInt64(errs, 1)
			}
		}()
	}
	claimed.Wait()
	return release, done.Wait
}

// reportsExactly reports whether resp lists as failures exactly the records of ev at
// positions.
func reportsExactly(resp events.SQSEventResponse, ev events.SQSEvent, positions []int) bool {
	if len(resp.BatchItemFailures) != len(positions) {
		return false
	}
	want := make(map[string]bool, len(positions))
	for _, p := range positions {
		want[ev.Records[p].MessageId] = true
	}
	for _, f := range resp.BatchItemFailures {
		if !want[f.ItemIdentifier] {
			return false
		}
		delete(want, f.ItemIdentifier)
	}
	return len(want) == 0
}
