// Command rabbit-bench measures a RabbitMQ consumer on PostgreSQL two ways, the same work
// in the same run: through rabbitconsumer (idem's records on pgstore, the business row
// attached to the completion with pgstore.Attach), and as the usual hand-written consumer
// that dedups with a processed_events table (BEGIN; INSERT ... ON CONFLICT DO NOTHING of
// the message ID; the business row if it inserted; COMMIT; then the ack).
//
//	go run ./cmd/rabbit-bench                # from lab/; starts its own broker and PostgreSQL
//	go run ./cmd/rabbit-bench -short         # a tenth of the size: does it work?
//	go run ./cmd/rabbit-bench -amqp amqp://... -pg postgres://...
//
// rabbitconsumer runs twice: as configured by default (R1, each outcome recorded as its
// handler returns) and with rabbitconsumer.WithBatchDeadline (R3, the outcomes of the
// deliveries in hand recorded together, in one transaction with their business rows).
// Each design consumes a backlog of -messages new messages (each a 256-byte body and a
// message ID) from a durable queue with the same prefetch, then the same messages
// published again (every one a redelivery: it replays, or is skipped). It prints one JSON
// line per step: messages per second from the consumer's start to the last outcome (for
// rabbitconsumer, as its OnBatch hook reports it, just before the acks are sent; for the
// hand-written consumer, once the ack is sent), and the PostgreSQL statements sent per
// message (counted by a pgx tracer on the shared pool, BEGIN and COMMIT included), of
// which one per new message is the business INSERT: the rest is what deduplication costs.
// Each step fails unless every message has exactly one business row.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgserver"
	"github.com/idemkit/idem/internal/rabbitserver"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/rabbitconsumer"
)

func main() {
	var o options
	flag.StringVar(&o.amqpURL, "amqp", "", "a running RabbitMQ to use instead of starting one (amqp://...)")
	flag.StringVar(&o.pgURL, "pg", "", "a running PostgreSQL to use instead of starting one (postgres://...)")
	flag.IntVar(&o.messages, "messages", 20000, "messages per step")
	flag.IntVar(&o.prefetch, "prefetch", 50, "the consumers' prefetch")
	flag.IntVar(&o.conns, "conns", 16, "the PostgreSQL pool's connections")
	short := flag.Bool("short", false, "a tenth of -messages")
	flag.Parse()
	if *short {
		o.messages /= 10
	}
	if err := run(context.Background(), o, os.Stdout); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

type options struct {
	amqpURL, pgURL            string
	messages, prefetch, conns int
}

// result is one step's JSON line.
type result struct {
	Name              string  `json:"name"`
	Messages          int     `json:"messages"`
	Seconds           float64 `json:"seconds"`
	PerSecond         float64 `json:"messages_per_s"`
	Statements        float64 `json:"statements_per_message"`
	DedupStatements   float64 `json:"dedup_statements_per_message"`
	BusinessRows      int     `json:"business_rows"`
	Prefetch          int     `json:"prefetch"`
	PostgreSQLVersion string  `json:"postgresql"`
}

// counter counts the statements the pool sends (pgx calls a QueryTracer for every Exec,
// Query and QueryRow, BEGIN and COMMIT included).
type counter struct{ n atomic.Int64 }

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func run(ctx context.Context, o options, out *os.File) (err error) {
	if o.amqpURL == "" {
		b, err := rabbitserver.Start(ctx)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, b.Stop()) }()
		o.amqpURL = b.URL()
	}
	if o.pgURL == "" {
		s, err := pgserver.Start(ctx)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, s.Close()) }()
		o.pgURL = s.URL()
	}
	cfg, err := pgxpool.ParseConfig(o.pgURL)
	if err != nil {
		return err
	}
	cfg.MaxConns = int32(o.conns)
	stmts := &counter{}
	cfg.ConnConfig.Tracer = stmts
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	var version string
	if err := pool.QueryRow(ctx, `SHOW server_version`).Scan(&version); err != nil {
		return err
	}
	conn, err := amqp.Dial(o.amqpURL)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()

	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	b := &bench{o: o, pool: pool, stmts: stmts, conn: conn, version: version, out: json.NewEncoder(out)}
	if err := b.idem(ctx, suffix, "R1", 0); err != nil {
		return err
	}
	if err := b.idem(ctx, suffix+"d", "R3", time.Minute); err != nil {
		return err
	}
	return b.handWritten(ctx, suffix)
}

type bench struct {
	o       options
	pool    *pgxpool.Pool
	stmts   *counter
	conn    *amqp.Connection
	version string
	out     *json.Encoder
}

// publish publishes the messages 0 to n-1 (IDs prefixed by prefix) to queue, persistent,
// with publisher confirms.
func (b *bench) publish(ctx context.Context, queue, prefix string) error {
	ch, err := b.conn.Channel()
	if err != nil {
		return err
	}
	defer func() { _ = ch.Close() }()
	if err := ch.Confirm(false); err != nil {
		return err
	}
	body := make([]byte, 256)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	var pending []*amqp.DeferredConfirmation
	wait := func() error {
		for _, dc := range pending {
			ok, err := dc.WaitContext(ctx)
			if err != nil {
				return err
			}
			if !ok {
				return errors.New("rabbit-bench: publish nacked")
			}
		}
		pending = pending[:0]
		return nil
	}
	for i := range b.o.messages {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false, amqp.Publishing{
			MessageId: prefix + strconv.Itoa(i), DeliveryMode: amqp.Persistent, Body: body,
		})
		if err != nil {
			return err
		}
		if pending = append(pending, dc); len(pending) == 1000 {
			if err := wait(); err != nil {
				return err
			}
		}
	}
	return wait()
}

// declare declares a durable queue named name.
func (b *bench) declare(name string) error {
	ch, err := b.conn.Channel()
	if err != nil {
		return err
	}
	defer func() { _ = ch.Close() }()
	_, err = ch.QueueDeclare(name, true, false, false, false, nil)
	return err
}

// step publishes the backlog, then runs consume until acked reaches the number of
// messages, and reports.
func (b *bench) step(ctx context.Context, name, queue, prefix, orders string, fresh bool,
	consume func(ctx context.Context, acked *atomic.Int64) error) error {
	if err := b.publish(ctx, queue, prefix); err != nil {
		return err
	}
	var acked atomic.Int64
	before := b.stmts.n.Load()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- consume(runCtx, &acked) }()
	timeout := time.After(10 * time.Minute)
	for acked.Load() < int64(b.o.messages) {
		select {
		case err := <-done:
			stop()
			return fmt.Errorf("%s: the consumer stopped: %w", name, err)
		case <-timeout:
			stop()
			return fmt.Errorf("%s: %d of %d acknowledged after 10 minutes", name, acked.Load(), b.o.messages)
		case <-time.After(time.Millisecond):
		}
	}
	elapsed := time.Since(start)
	sent := b.stmts.n.Load() - before
	stop()
	if err := <-done; err != nil {
		return err
	}
	var rows int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM `+orders).Scan(&rows); err != nil {
		return err
	}
	if rows != b.o.messages {
		return fmt.Errorf("%s: %d business rows for %d messages: a message was lost or ran twice", name, rows, b.o.messages)
	}
	n := float64(b.o.messages)
	business := 0.0
	if fresh {
		business = n
	}
	return b.out.Encode(result{
		Name: name, Messages: b.o.messages, Seconds: elapsed.Seconds(), PerSecond: n / elapsed.Seconds(),
		Statements: float64(sent) / n, DedupStatements: (float64(sent) - business) / n,
		BusinessRows: rows, Prefetch: b.o.prefetch, PostgreSQLVersion: b.version,
	})
}

// idem runs <step> (new messages) and <step>r (the same again) through rabbitconsumer on
// pgstore, with the batch deadline d (rabbitconsumer.WithBatchDeadline; 0: none).
func (b *bench) idem(ctx context.Context, suffix, step string, d time.Duration) error {
	table, orders, queue := "idem_"+suffix, "orders_idem_"+suffix, "bench-idem-"+suffix
	if err := pgstore.CreateTable(ctx, b.pool, table); err != nil {
		return err
	}
	if _, err := b.pool.Exec(ctx, `CREATE TABLE `+orders+` (id text NOT NULL, body bytea NOT NULL)`); err != nil {
		return err
	}
	if err := b.declare(queue); err != nil {
		return err
	}
	store, err := pgstore.New(b.pool, table)
	if err != nil {
		return err
	}
	var acked *atomic.Int64 // the step's counter, set before each step's consumer starts
	var mu sync.Mutex
	hooks := idem.Hooks{OnBatch: func(_ context.Context, ev idem.BatchEvent) {
		mu.Lock()
		defer mu.Unlock()
		acked.Add(int64(len(ev.Items) - ev.Failed))
	}}
	guard, err := idem.New(store, "bench", idem.WithHooks(hooks))
	if err != nil {
		return err
	}
	c, err := rabbitconsumer.New(guard, queue, func(ctx context.Context, d amqp.Delivery) error {
		return pgstore.Attach(ctx, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO `+orders+` (id, body) VALUES ($1, $2)`, d.MessageId, d.Body)
			return err
		})
	}, rabbitconsumer.WithPrefetch(b.o.prefetch), rabbitconsumer.WithBatchDeadline(d))
	if err != nil {
		return err
	}
	consume := func(ctx context.Context, a *atomic.Int64) error {
		mu.Lock()
		acked = a
		mu.Unlock()
		return c.Run(ctx, b.o.amqpURL)
	}
	name := step + "_rabbitconsumer_pgstore"
	if d > 0 {
		name += "_batch_deadline"
	}
	if err := b.step(ctx, name+"_new", queue, "m-", orders, true, consume); err != nil {
		return err
	}
	return b.step(ctx, strings.Replace(name, step, step+"r", 1)+"_redelivered", queue, "m-", orders, false, consume)
}

// handWritten runs R2 (new messages) and R2r (the same again) through a plain amqp091-go
// consumer deduplicating with processed_events in the business transaction.
func (b *bench) handWritten(ctx context.Context, suffix string) error {
	events, orders, queue := "processed_events_"+suffix, "orders_hand_"+suffix, "bench-hand-"+suffix
	if _, err := b.pool.Exec(ctx, `CREATE TABLE `+events+` (id text PRIMARY KEY, processed_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return err
	}
	if _, err := b.pool.Exec(ctx, `CREATE TABLE `+orders+` (id text NOT NULL, body bytea NOT NULL)`); err != nil {
		return err
	}
	if err := b.declare(queue); err != nil {
		return err
	}
	handle := func(ctx context.Context, d amqp.Delivery) error {
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `INSERT INTO `+events+` (id) VALUES ($1) ON CONFLICT DO NOTHING`, d.MessageId)
			if err != nil || tag.RowsAffected() == 0 {
				return err // a duplicate: skipped
			}
			_, err = tx.Exec(ctx, `INSERT INTO `+orders+` (id, body) VALUES ($1, $2)`, d.MessageId, d.Body)
			return err
		})
	}
	consume := func(ctx context.Context, acked *atomic.Int64) error {
		ch, err := b.conn.Channel()
		if err != nil {
			return err
		}
		defer func() { _ = ch.Close() }()
		if err := ch.Qos(b.o.prefetch, 0, false); err != nil {
			return err
		}
		deliveries, err := ch.ConsumeWithContext(ctx, queue, "", false, false, false, false, nil)
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		defer wg.Wait()
		for d := range deliveries { // the prefetch bounds the goroutines
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := handle(context.WithoutCancel(ctx), d); err != nil {
					_ = d.Nack(false, true)
					return
				}
				if d.Ack(false) == nil {
					acked.Add(1)
				}
			}()
		}
		return nil
	}
	if err := b.step(ctx, "R2_processed_events_new", queue, "m-", orders, true, consume); err != nil {
		return err
	}
	return b.step(ctx, "R2r_processed_events_redelivered", queue, "m-", orders, false, consume)
}
