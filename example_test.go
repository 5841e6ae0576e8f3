package idem_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

type receipt struct {
	OrderID string `json:"order_id"`
	Amount  int    `json:"amount"`
}

// A retry with the same key gets the first result back; the handler ran once.
func Example() {
	guard, err := idem.New(memstore.New(), "create-order", idem.WithScope("orders"))
	if err != nil {
		panic(err)
	}
	charges := 0
	charge := func(ctx context.Context) (receipt, error) {
		charges++
		return receipt{OrderID: "o-1", Amount: 4200}, nil
	}
	for range 3 {
		r, replayed, err := idem.Do(context.Background(), guard, idem.Request{Key: "pay-123"}, charge)
		fmt.Println(r.OrderID, r.Amount, replayed, err)
	}
	fmt.Println("charges:", charges)
	// Output:
	// o-1 4200 false <nil>
	// o-1 4200 true <nil>
	// o-1 4200 true <nil>
	// charges: 1
}

func ExampleNew() {
	_, err := idem.New(memstore.New(), "create-order", idem.WithExpiry(-time.Hour))
	fmt.Println(err)
	// Output: idem: invalid option: WithExpiry: must be positive
}

// The fingerprint catches a key reused for a different request.
func ExampleDo() {
	guard, _ := idem.New(memstore.New(), "create-order")
	ok := func(context.Context) (string, error) { return "created", nil }
	ctx := context.Background()
	_, _, err := idem.Do(ctx, guard, idem.Request{Key: "k1", Fingerprint: []byte(`{"qty":1}`)}, ok)
	fmt.Println(err)
	_, _, err = idem.Do(ctx, guard, idem.Request{Key: "k1", Fingerprint: []byte(`{"qty":2}`)}, ok)
	fmt.Println(errors.Is(err, idem.ErrPayloadMismatch))
	// Output:
	// <nil>
	// true
}

// A handler records progress; after a crash, the next owner resumes from it.
func ExampleCheckpoint() {
	guard, _ := idem.New(memstore.New(), "create-order")
	_, _, _ = idem.Do(context.Background(), guard, idem.Request{Key: "k"}, func(ctx context.Context) (string, error) {
		if idem.LastCheckpoint(ctx) != "payment_charged" {
			// charge the card, then remember that it was charged
			if err := idem.Checkpoint(ctx, "payment_charged"); err != nil {
				return "", err
			}
		}
		fmt.Println("checkpoint:", idem.LastCheckpoint(ctx))
		return "shipped", nil
	})
	// Output: checkpoint: payment_charged
}

// A checkpoint that carries what the next step needs. The first run reserves a seat,
// records the reservation, and fails at the carrier; the key is released with the
// checkpoint kept. The retry resumes with the same reservation instead of making another.
func ExampleCheckpointValue() {
	type booking struct {
		ReservationID string `json:"reservation_id"`
	}
	guard, _ := idem.New(memstore.New(), "book-trip")
	reservations, carrierUp := 0, false
	book := func(ctx context.Context) (string, error) {
		step, b, ok, err := idem.LastCheckpointValue[booking](ctx)
		if err != nil {
			return "", err
		}
		if step != "reserved" || !ok {
			reservations++
			b = booking{ReservationID: fmt.Sprintf("r-%d", reservations)}
			if err := idem.CheckpointValue(ctx, "reserved", b); err != nil {
				return "", err
			}
		}
		if !carrierUp {
			return "", errors.New("carrier down")
		}
		return "ticket for " + b.ReservationID, nil
	}
	ctx := context.Background()
	_, _, err := idem.Do(ctx, guard, idem.Request{Key: "trip-7"}, book)
	fmt.Println("first run:", err)
	carrierUp = true
	ticket, _, err := idem.Do(ctx, guard, idem.Request{Key: "trip-7"}, book)
	fmt.Println("retry:", ticket, err)
	fmt.Println("reservations:", reservations)
	// Output:
	// first run: carrier down
	// retry: ticket for r-1 <nil>
	// reservations: 1
}

// A handler moving from string checkpoints to values: a key whose checkpoint an earlier
// release wrote as "reserved:<id>" reads back as that step with no value (ok false), and
// the handler parses it once.
func ExampleLastCheckpointValue() {
	type booking struct {
		ReservationID string `json:"reservation_id"`
	}
	guard, _ := idem.New(memstore.New(), "book-trip")
	ctx := context.Background()
	_, _, _ = idem.Do(ctx, guard, idem.Request{Key: "trip-8"}, func(ctx context.Context) (string, error) {
		_ = idem.Checkpoint(ctx, "reserved:r-42") // as the earlier release did
		return "", errors.New("carrier down")
	})
	ticket, _, err := idem.Do(ctx, guard, idem.Request{Key: "trip-8"}, func(ctx context.Context) (string, error) {
		step, b, ok, err := idem.LastCheckpointValue[booking](ctx)
		if err != nil {
			return "", err
		}
		if id, old := strings.CutPrefix(step, "reserved:"); old && !ok {
			step, b = "reserved", booking{ReservationID: id}
		}
		if step != "reserved" {
			return "", errors.New("not reserved yet")
		}
		return "ticket for " + b.ReservationID, nil
	})
	fmt.Println(ticket, err)
	// Output: ticket for r-42 <nil>
}

// Writes attached to the completion commit with it or not at all.
func ExampleAttach() {
	guard, _ := idem.New(memstore.New(), "create-order")
	balance := 0
	credit := func(ctx context.Context) (int, error) {
		err := idem.Attach(ctx, func() error { balance += 100; return nil })
		return 100, err
	}
	for range 2 {
		_, _, _ = idem.Do(context.Background(), guard, idem.Request{Key: "credit-1"}, credit)
	}
	fmt.Println("balance:", balance)
	// Output: balance: 100
}

// Checkpoints and attached writes together, across a crash. A checkpoint is durable at
// once, so it marks effects outside the completion (the card charged); an attached write
// lands only when the handler completes, so every owner attaches it, and no checkpoint
// ever says it was written. Here the first owner charges, checkpoints, attaches the row
// and stalls past its lease; the next owner resumes after the charge, attaches the row
// again, and completes: one charge, one row. The stalled owner's row never lands.
func ExampleAttach_withCheckpoint() {
	ctx := context.Background()
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var elapsed atomic.Int64 // moved on to end the first owner's lease
	clock := idem.ClockFunc(func() time.Time { return start.Add(time.Duration(elapsed.Load())) })
	guard, _ := idem.New(memstore.New(), "pay", idem.WithClock(clock), idem.WithLease(time.Minute))

	charges := 0
	var rows []string
	pay := func(ctx context.Context) (string, error) {
		if idem.LastCheckpoint(ctx) != "charged" {
			charges++ // the payment provider, called with a key derived from idem.StoredKey(ctx)
			if err := idem.Checkpoint(ctx, "charged"); err != nil {
				return "", err
			}
		}
		// Attached by every owner: a crash loses it, the checkpoint does not mark it.
		err := idem.Attach(ctx, func() error { rows = append(rows, "payment-7"); return nil })
		return "paid", err
	}

	stalled, resume, first := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		_, _, err := idem.Do(ctx, guard, idem.Request{Key: "order-7"}, func(ctx context.Context) (string, error) {
			v, err := pay(ctx)
			close(stalled)
			<-resume // stalled past its lease: a crash, as far as the key is concerned
			return v, err
		})
		first <- err
	}()
	<-stalled
	elapsed.Store(int64(2 * time.Minute))

	v, replayed, err := idem.Do(ctx, guard, idem.Request{Key: "order-7"}, pay)
	fmt.Println("next owner:", v, replayed, err)
	close(resume)
	fmt.Println("stalled owner lost its lease:", errors.Is(<-first, idem.ErrLeaseLost))
	fmt.Println("charges:", charges, "rows:", rows)
	// Output:
	// next owner: paid false <nil>
	// stalled owner lost its lease: true
	// charges: 1 rows: [payment-7]
}

func ExampleInProgressError() {
	store := memstore.New()
	guard, _ := idem.New(store, "create-order", idem.WithLease(30*time.Second))
	release := make(chan struct{})
	started := make(chan struct{})
	go func() {
		_, _, _ = idem.Do(context.Background(), guard, idem.Request{Key: "k"}, func(context.Context) (int, error) {
			close(started)
			<-release
			return 1, nil
		})
	}()
	<-started
	_, _, err := idem.Do(context.Background(), guard, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 2, nil })
	var ip *idem.InProgressError
	if errors.As(err, &ip) {
		fmt.Println("in progress; retry after at most", ip.RetryAfter)
	}
	close(release)
	// Without a deadline the lease is WithLease plus the lease margin (2 s by default).
	// Output: in progress; retry after at most 32s
}

func ExampleWithExpiry() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	guard, _ := idem.New(memstore.New(), "create-order", idem.WithExpiry(time.Hour), idem.WithClock(idem.ClockFunc(func() time.Time { return now })))
	runs := 0
	fn := func(context.Context) (int, error) { runs++; return runs, nil }
	_, _, _ = idem.Do(context.Background(), guard, idem.Request{Key: "k"}, fn)
	now = now.Add(2 * time.Hour)
	v, replayed, _ := idem.Do(context.Background(), guard, idem.Request{Key: "k"}, fn)
	fmt.Println(v, replayed)
	// Output: 2 false
}

func ExampleWithLease() {
	_, err := idem.New(memstore.New(), "create-order", idem.WithLease(5*time.Minute))
	fmt.Println(err)
	// Output: <nil>
}

func ExampleWithLeaseMargin() {
	_, err := idem.New(memstore.New(), "create-order", idem.WithLeaseMargin(5*time.Second))
	fmt.Println(err)
	// Output: <nil>
}

func ExampleWithMaxLease() {
	_, err := idem.New(memstore.New(), "create-order", idem.WithMaxLease(0))
	fmt.Println(err)
	// Output: idem: invalid option: WithMaxLease: must be positive
}

func ExampleWithScope() {
	guard, _ := idem.New(memstore.New(), "create-order", idem.WithScope("checkout"))
	key, _ := guard.StoredKey(idem.Request{Key: "abc"})
	fmt.Println(key[:len("checkout.create-order#")], len(key))
	// Output: checkout.create-order# 86
}

func ExampleWithCache() {
	guard, _ := idem.New(memstore.New(), "create-order", idem.WithCache(10_000))
	_, _, _ = idem.Do(context.Background(), guard, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 1, nil })
	v, replayed, _ := idem.Do(context.Background(), guard, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 2, nil })
	fmt.Println(v, replayed) // served from the local cache: no store round trip
	// Output: 1 true
}

func ExampleWithWait() {
	guard, _ := idem.New(memstore.New(), "create-order", idem.WithWait(5*time.Second, 10*time.Millisecond))
	started := make(chan struct{})
	go func() {
		_, _, _ = idem.Do(context.Background(), guard, idem.Request{Key: "k"}, func(context.Context) (string, error) {
			close(started)
			time.Sleep(30 * time.Millisecond)
			return "first", nil
		})
	}()
	<-started
	v, replayed, err := idem.Do(context.Background(), guard, idem.Request{Key: "k"}, func(context.Context) (string, error) { return "second", nil })
	fmt.Println(v, replayed, err)
	// Output: first true <nil>
}

func ExampleWithRememberFailures() {
	errDeclined := errors.New("card declined")
	guard, _ := idem.New(memstore.New(), "create-order", idem.WithRememberFailures(func(err error) bool { return errors.Is(err, errDeclined) }))
	fn := func(context.Context) (int, error) { return 0, errDeclined }
	_, _, err := idem.Do(context.Background(), guard, idem.Request{Key: "k"}, fn)
	fmt.Println(err)
	_, _, err = idem.Do(context.Background(), guard, idem.Request{Key: "k"}, fn)
	fmt.Println(err)
	// Output:
	// card declined
	// idem: request failed before: card declined
}

func ExampleWithHeartbeat() {
	_, err := idem.New(memstore.New(), "create-order", idem.WithLease(time.Minute), idem.WithHeartbeat(20*time.Second))
	fmt.Println(err)
	// Output: <nil>
}

func ExampleWithCodec() {
	_, err := idem.New(memstore.New(), "create-order", idem.WithCodec(idem.JSONCodec{}))
	fmt.Println(err)
	// Output: <nil>
}

func ExampleWithCompression() {
	_, err := idem.New(memstore.New(), "create-order", idem.WithCompression(4096))
	fmt.Println(err)
	// Output: <nil>
}

func ExampleWithMaxResultSize() {
	guard, _ := idem.New(memstore.New(), "create-order", idem.WithMaxResultSize(16), idem.WithCompression(1<<20))
	big := func(context.Context) (string, error) { return "a result longer than sixteen bytes", nil }
	_, _, err := idem.Do(context.Background(), guard, idem.Request{Key: "k"}, big)
	fmt.Println(err)
	_, _, err = idem.Do(context.Background(), guard, idem.Request{Key: "k"}, big)
	fmt.Println(errors.Is(err, idem.ErrResultNotStored))
	// Output:
	// <nil>
	// true
}

func ExampleWithFailOpen() {
	_, err := idem.New(memstore.New(), "create-order", idem.WithFailOpen(true))
	fmt.Println(err)
	// Output: <nil>
}

func ExampleWithClock() {
	fixed := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := idem.New(memstore.New(), "create-order", idem.WithClock(idem.ClockFunc(func() time.Time { return fixed })))
	fmt.Println(err)
	// Output: <nil>
}

func ExampleWithLogger() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	_, err := idem.New(memstore.New(), "create-order", idem.WithLogger(logger))
	fmt.Println(err)
	// Output: <nil>
}

func ExampleWithHooks() {
	replays := 0
	guard, _ := idem.New(memstore.New(), "create-order", idem.WithHooks(idem.Hooks{
		OnReplayed: func(context.Context, idem.Event) { replays++ },
	}))
	for range 3 {
		_, _, _ = idem.Do(context.Background(), guard, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 1, nil })
	}
	fmt.Println("replays:", replays)
	// Output: replays: 2
}

// Metrics and traces together: each gets every event. OnRun's context is the handler's, so
// a tracer's run span is the parent of the spans the handler starts.
func ExampleJoinHooks() {
	type runKey struct{}
	counted := idem.Hooks{OnCompleted: func(context.Context, idem.Event) { fmt.Println("metrics: completed") }}
	traced := idem.Hooks{
		OnRun: func(ctx context.Context, _ idem.Event) context.Context {
			fmt.Println("traces: run started")
			return context.WithValue(ctx, runKey{}, "span-1")
		},
		OnRunEnd: func(ctx context.Context, _ idem.Event) { fmt.Println("traces: run ended,", ctx.Value(runKey{})) },
	}
	guard, _ := idem.New(memstore.New(), "create-order", idem.WithHooks(idem.JoinHooks(counted, traced)))
	_, _, _ = idem.Do(context.Background(), guard, idem.Request{Key: "k"}, func(ctx context.Context) (int, error) {
		fmt.Println("handler runs under", ctx.Value(runKey{}))
		return 1, nil
	})
	// Output:
	// traces: run started
	// handler runs under span-1
	// metrics: completed
	// traces: run ended, span-1
}

// A batch consumer claims all its requests at once, runs them, then records every
// outcome together: on a batch-capable store, two round trips for the whole batch. A
// duplicate in the batch (the second m1) does not run: it replays the first's result.
func ExampleGuard_Claim() {
	guard, _ := idem.New(memstore.New(), "create-order")
	ctx := context.Background()
	reqs := []idem.Request{{Key: "m1"}, {Key: "m2"}, {Key: "m1"}}
	batch := guard.Claim(ctx, reqs)
	for i := range reqs {
		v, replayed, err := idem.DoClaimed(ctx, batch, i, func(context.Context) (string, error) {
			return "done " + reqs[i].Key, nil
		})
		fmt.Println(v, replayed, err)
	}
	fmt.Println(batch.Settle(ctx))
	// Output:
	// done m1 false <nil>
	// done m2 false <nil>
	// done m1 true <nil>
	// [<nil> <nil> <nil>]
}
