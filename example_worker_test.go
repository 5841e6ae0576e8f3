package idem_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// A job worker outside Lambda: a service consuming a queue that delivers a job again until
// it is acknowledged (a Redis list or stream, a PostgreSQL jobs table, SQS polled by a
// container). Its context has no deadline, so a claim's lease is WithLease plus
// WithLeaseMargin, 62 s by default, on any store. A worker that dies mid-job holds the job
// that long; a worker that meets it meanwhile gets an *idem.InProgressError saying how long
// is left, puts the job back for that long, and then takes it over and runs it. WithLease
// shortens the wait after a crash (12 s with 10 s), and WithHeartbeat keeps the lease of
// a job that runs longer than that alive while its worker lives. (The clock here is the
// example's: the waits take no time, and the dead worker's timers never fire, as a dead
// process's do not.)
func Example_worker() {
	ctx := context.Background() // a worker's context: no deadline
	clock := pausedClock{storetest.NewSettableClock()}
	store := memstore.New()
	sendInvoice := func(ctx context.Context) (string, error) { return "invoice sent", nil }

	// deliver is one delivery of a job to a worker. It returns how long to put the job back
	// for, or 0 once the job is done (acknowledge it).
	deliver := func(guard *idem.Guard, job string) time.Duration {
		result, replayed, err := idem.Do(ctx, guard, idem.Request{Key: job}, sendInvoice)
		var busy *idem.InProgressError
		if errors.As(err, &busy) {
			// Another worker holds the job, or held it and died: back off until its lease ends.
			fmt.Printf("%s: in progress elsewhere, retry after %v\n", job, busy.RetryAfter)
			return busy.RetryAfter
		}
		fmt.Printf("%s: %s, replayed %t, error %v\n", job, result, replayed, err)
		return 0
	}

	// The defaults: a worker that dies holds its job WithLease (1 min) + WithLeaseMargin (2 s).
	guard, err := idem.New(store, "send-invoice", idem.WithClock(clock))
	if err != nil {
		panic(err)
	}
	stop := crashMidJob(ctx, guard, "job-1") // the first worker dies holding job-1
	clock.Advance(deliver(guard, "job-1"))   // the queue delivers it again after that long
	deliver(guard, "job-1")
	stop()

	// A shorter lease, and a heartbeat for the jobs that run longer.
	worker := []idem.Option{
		idem.WithLease(10 * time.Second),    // a dead worker holds its job 10 s + 2 s
		idem.WithHeartbeat(3 * time.Second), // a live worker's job keeps its lease, 3 s at a time
	}
	guard, err = idem.New(store, "send-invoice", append(worker, idem.WithClock(clock))...)
	if err != nil {
		panic(err)
	}
	stop = crashMidJob(ctx, guard, "job-2")
	clock.Advance(deliver(guard, "job-2"))
	deliver(guard, "job-2")
	stop()
	// Output:
	// job-1: in progress elsewhere, retry after 1m2s
	// job-1: invoice sent, replayed false, error <nil>
	// job-2: in progress elsewhere, retry after 12s
	// job-2: invoice sent, replayed false, error <nil>
}

// crashMidJob stands for a worker that claimed job and died: its handler does not return
// until stop is called, and its lease stays in the store. stop ends it and waits for it.
func crashMidJob(ctx context.Context, guard *idem.Guard, job string) (stop func()) {
	started, dead, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = idem.Do(ctx, guard, idem.Request{Key: job}, func(ctx context.Context) (string, error) {
			close(started)
			<-dead
			return "", errors.New("the worker died")
		})
	}()
	<-started
	return func() { close(dead); <-done }
}

// pausedClock is the example's time: it moves only when told, and its timers never fire,
// so the dead worker neither beats nor sees its lease end.
type pausedClock struct{ *storetest.SettableClock }

// After returns a channel that never receives.
func (pausedClock) After(time.Duration) <-chan time.Time { return nil }
