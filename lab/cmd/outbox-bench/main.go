// Command outbox-bench measures an outbox: commit-to-publish latency, and a relay's
// sustained throughput draining a backlog. -store postgres (the default) measures pgstore
// with pgoutbox woken by LISTEN/NOTIFY; -store dynamo measures dynamo.Store with its outbox
// table's stream drained into ddbrelay on DynamoDB Local.
//
//	go run ./cmd/outbox-bench                # from lab/; starts its own PostgreSQL
//	go run ./cmd/outbox-bench -url postgres://...
//	go run ./cmd/outbox-bench -store dynamo  # starts its own DynamoDB Local
//
// On DynamoDB the stream is read by internal/esm, Lambda's event source mapping emulated,
// every -poll (Lambda polls each shard four times a second), and the relay runs in process
// through the Lambda handler's JSON; only the call-returned-to-publish latency is
// reported (a stream record's ApproximateCreationDateTime has whole seconds).
//
// Latency: producers complete guarded runs at a steady rate, each recording one event
// (pgstore, the event in the completion's transaction); one relay runs with the default
// options (wake-ups, 1 s polling fallback) and an in-process publisher that notes when
// each event reaches it. Two latencies are reported per event: from its row's INSERT
// (committed_at, the last statement before COMMIT: an upper bound of commit-to-publish)
// to that moment, and from the moment the producer's guarded call returned (the commit
// acknowledged; an event published before that counts as 0).
//
// Throughput: a backlog of events is committed with no relay running; then relays
// (-relays) start, and the events published per second until the backlog is gone are
// reported.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgserver"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/pgoutbox"
)

func main() {
	store := flag.String("store", "postgres", "the outbox's store: postgres or dynamo")
	url := flag.String("url", "", "a running PostgreSQL (or DynamoDB endpoint, with -store dynamo) to use instead of starting one")
	poll := flag.Duration("poll", 250*time.Millisecond, "dynamo: how often the emulated event source mapping reads the stream")
	relayStore := flag.String("relay-store", "dynamo", "dynamo: where the relay keeps its records: dynamo (the idempotency table, as deployed) or memory")
	events := flag.Int("events", 2000, "latency: events to commit")
	rate := flag.Int("rate", 200, "latency: events committed per second")
	backlog := flag.Int("backlog", 20000, "throughput: events committed before the relays start")
	relays := flag.Int("relays", 1, "throughput: relays draining the backlog (postgres)")
	batch := flag.Int("batch", pgoutbox.DefaultBatchSize, "the relays' batch size (dynamo: the event source mapping's BatchSize)")
	keys := flag.Int("keys", 100, "distinct ordering keys")
	flag.Parse()
	var err error
	switch *store {
	case "postgres":
		err = run(*url, *events, *rate, *backlog, *relays, *batch, *keys)
	case "dynamo":
		err = runDynamo(*url, *events, *rate, *backlog, *batch, *keys, *poll, *relayStore)
	default:
		err = fmt.Errorf("outbox-bench: -store %q: postgres or dynamo", *store)
	}
	if err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

// sink is the publisher: it notes when each event reaches it.
type sink struct {
	mu   sync.Mutex
	at   map[string]time.Time
	done chan struct{}
	want int
}

func (s *sink) Publish(_ context.Context, msgs []outbox.Message) []error {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		if _, ok := s.at[m.ID]; !ok {
			s.at[m.ID] = now
		}
	}
	if len(s.at) >= s.want && s.done != nil {
		close(s.done)
		s.done = nil
	}
	return nil
}

func run(url string, events, rate, backlog, relays, batch, keys int) (err error) {
	ctx := context.Background()
	if url == "" {
		srv, err := pgserver.Start(ctx)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, srv.Close()) }()
		url = srv.URL()
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	fmt.Printf("outbox-bench: PostgreSQL %s, batch %d, %d ordering keys\n", serverVersion(ctx, pool), batch, keys)
	if err := latency(ctx, pool, events, rate, batch, keys); err != nil {
		return err
	}
	return throughput(ctx, pool, backlog, relays, batch, keys)
}

// setup creates a records table and its outbox, and a guard over them.
func setup(ctx context.Context, pool *pgxpool.Pool) (*idem.Guard, *pgstore.Store, error) {
	table := "outbox_bench_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := pgstore.CreateTable(ctx, pool, table); err != nil {
		return nil, nil, err
	}
	s, err := pgstore.New(pool, table)
	if err != nil {
		return nil, nil, err
	}
	if err := pgstore.CreateOutboxTable(ctx, pool, s.OutboxTable()); err != nil {
		return nil, nil, err
	}
	g, err := idem.New(s, "bench")
	return g, s, err
}

// produce completes the guarded run of key n, recording one event.
func produce(ctx context.Context, g *idem.Guard, n, keys int) (string, error) {
	var id string
	_, _, err := idem.Do(ctx, g, idem.Request{Key: "req-" + strconv.Itoa(n)}, func(ctx context.Context) (int, error) {
		var err error
		id, err = outbox.Record(ctx, outbox.Event{Destination: "q", OrderingKey: "acct-" + strconv.Itoa(n%keys), Type: "Placed", Payload: []byte(`{"amount":1}`)})
		return n, err
	})
	return id, err
}

// commitAtRate completes events guarded runs (produce), rate per second, each on its own
// goroutine, and returns the moment each one's call returned, by event id.
func commitAtRate(ctx context.Context, g *idem.Guard, events, rate, keys int) (map[string]time.Time, error) {
	committed := make(map[string]time.Time, events)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, events)
	for n := range events {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := produce(ctx, g, n, keys)
			at := time.Now()
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			committed[id] = at
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	return committed, <-errs
}

// fillBacklog completes backlog guarded runs (produce) from 8 producers.
func fillBacklog(ctx context.Context, g *idem.Guard, backlog, keys int) error {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := w; n < backlog; n += 8 {
				if _, err := produce(ctx, g, n, keys); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// sinceAck returns, sorted, each committed event's time from its producer's call returning
// to its publish, 0 for those published earlier, and how many were.
func (s *sink) sinceAck(committed map[string]time.Time) ([]time.Duration, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]time.Duration, 0, len(committed))
	early := 0
	for id, c := range committed {
		d := s.at[id].Sub(c)
		if d < 0 {
			early++
		}
		out = append(out, max(d, 0))
	}
	slices.Sort(out)
	return out, early
}

func latency(ctx context.Context, pool *pgxpool.Pool, events, rate, batch, keys int) error {
	g, s, err := setup(ctx, pool)
	if err != nil {
		return err
	}
	snk := &sink{at: map[string]time.Time{}, want: events, done: make(chan struct{})}
	done := snk.done
	r, err := pgoutbox.New(pool, s.OutboxTable(), snk, pgoutbox.WithBatchSize(batch))
	if err != nil {
		return err
	}
	rctx, stop := context.WithCancel(ctx)
	relayDone := make(chan error, 1)
	go func() { relayDone <- r.Run(rctx) }()
	time.Sleep(200 * time.Millisecond) // the relay's LISTEN is up
	committed, err := commitAtRate(ctx, g, events, rate, keys)
	if err != nil {
		stop()
		return err
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		stop()
		return fmt.Errorf("latency: not every event was published within a minute")
	}
	stop()
	if err := <-relayDone; !errors.Is(err, context.Canceled) {
		return err
	}
	inserted, err := insertTimes(ctx, pool, s.OutboxTable())
	if err != nil {
		return err
	}
	fromInsert := make([]time.Duration, 0, events)
	snk.mu.Lock()
	for id := range committed {
		fromInsert = append(fromInsert, snk.at[id].Sub(inserted[id]))
	}
	snk.mu.Unlock()
	slices.Sort(fromInsert)
	fromAck, early := snk.sinceAck(committed)
	fmt.Printf("latency: %d events at %d/s, 1 relay (LISTEN/NOTIFY, poll %s)\n", events, rate, pgoutbox.DefaultPollInterval)
	fmt.Printf("  from the row's insert (clock_timestamp, just before COMMIT) to publish: p50 %s, p90 %s, p99 %s, max %s\n",
		pct(fromInsert, 50), pct(fromInsert, 90), pct(fromInsert, 99), fromInsert[len(fromInsert)-1])
	fmt.Printf("  from the producer's guarded call returning to publish (0 if earlier: %d of %d): p50 %s, p90 %s, p99 %s, max %s\n",
		early, events, pct(fromAck, 50), pct(fromAck, 90), pct(fromAck, 99), fromAck[len(fromAck)-1])
	return nil
}

func throughput(ctx context.Context, pool *pgxpool.Pool, backlog, relays, batch, keys int) error {
	g, s, err := setup(ctx, pool)
	if err != nil {
		return err
	}
	if err := fillBacklog(ctx, g, backlog, keys); err != nil {
		return err
	}
	snk := &sink{at: map[string]time.Time{}, want: backlog, done: make(chan struct{})}
	done := snk.done
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	start := time.Now()
	var rwg sync.WaitGroup
	for range relays {
		r, err := pgoutbox.New(pool, s.OutboxTable(), snk, pgoutbox.WithBatchSize(batch))
		if err != nil {
			return err
		}
		rwg.Add(1)
		go func() { defer rwg.Done(); _ = r.Run(rctx) }()
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("throughput: the backlog was not drained within 5 minutes")
	}
	elapsed := time.Since(start)
	stop()
	rwg.Wait()
	fmt.Printf("throughput: backlog of %d events, %d relay(s): drained in %s, %.0f events/s\n",
		backlog, relays, elapsed.Round(time.Millisecond), float64(backlog)/elapsed.Seconds())
	return nil
}

// insertTimes returns each event's committed_at: the database clock at its INSERT, the
// last statement before its transaction's COMMIT (same host, same clock as ours).
func insertTimes(ctx context.Context, pool *pgxpool.Pool, table string) (map[string]time.Time, error) {
	rows, err := pool.Query(ctx, `SELECT id, committed_at FROM "`+table+`"`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var id string
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			return nil, err
		}
		out[id] = at
	}
	return out, rows.Err()
}

func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[max(min(i, len(sorted))-1, 0)].Round(10 * time.Microsecond)
}

func serverVersion(ctx context.Context, pool *pgxpool.Pool) string {
	var v string
	if err := pool.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "?"
	}
	return v
}
