// Command consumer-bench measures a broker consumer made idempotent by idem against the
// same consumer doing the usual hand-written dedup, with the same business write on the
// same PostgreSQL, in one run:
//
//	go run ./cmd/consumer-bench -broker kafka   # from lab/; starts its own PostgreSQL
//	go run ./cmd/consumer-bench -url postgres://...
//
// The business write of every record is one INSERT of an order carrying its 256-byte body.
//
//   - idem: the broker's adapter (kafkaconsumer for Kafka) over pgstore, the handler
//     attaching the write with pgstore.Attach, so it commits in the completion's
//     transaction;
//   - processed_events: the hand-written design: per record BEGIN, INSERT ... ON CONFLICT
//     DO NOTHING of the event id into processed_events, the write if it inserted, COMMIT;
//     offsets committed after each poll.
//
// Each consumer reads every record twice, as two consumer groups: "new" (every record
// new) and "redelivered" (the same records again, as after a crash or rebalance: idem
// replays, processed_events skips). Rounds alternate which design runs first. Each line
// of output is one pass as JSON: records per second from the first poll to the last
// commit, and the PostgreSQL statements per record (BEGIN and COMMIT counted; a pipelined
// batch counts its statements) and round trips per record (a pipelined batch is one),
// counted by a pgx tracer on the pool both designs share.
//
// One file per broker: kafka.go runs Kafka (kfake, franz-go's in-process cluster).
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
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/internal/pgserver"
)

// config is the run's shape, shared by every broker.
type config struct {
	records     int // records (messages) produced, each read once per pass
	partitions  int // Kafka partitions
	keys        int // record keys (accounts), spread over the partitions
	concurrency int // records processed at once by each design
	rounds      int
	batch       int // records per poll
	batchClaims bool
}

func main() {
	broker := flag.String("broker", "kafka", "the broker to measure: kafka")
	url := flag.String("url", "", "a running PostgreSQL to use instead of starting one")
	var cfg config
	flag.IntVar(&cfg.records, "records", 20000, "records produced; each pass reads them all")
	flag.IntVar(&cfg.partitions, "partitions", 4, "partitions of the topic")
	flag.IntVar(&cfg.keys, "keys", 100, "record keys (accounts) over the partitions")
	flag.IntVar(&cfg.concurrency, "concurrency", 4, "records processed at once by each design")
	flag.IntVar(&cfg.rounds, "rounds", 3, "rounds, alternating which design runs first")
	flag.IntVar(&cfg.batch, "batch", 500, "records per poll")
	flag.BoolVar(&cfg.batchClaims, "batch-claims", true, "idem: claim and record each poll's keys together")
	flag.Parse()
	if err := run(context.Background(), *broker, *url, cfg, os.Stdout); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func run(ctx context.Context, broker, url string, cfg config, out *os.File) (err error) {
	if url == "" {
		srv, err := pgserver.Start(ctx)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, srv.Close()) }()
		url = srv.URL()
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	calls := &counter{}
	pc.ConnConfig.Tracer = calls
	pc.MaxConns = int32(cfg.concurrency) + 1
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return err
	}
	defer pool.Close()
	pg := &postgres{pool: pool, calls: calls}
	switch broker {
	case "kafka":
		return runKafka(ctx, pg, cfg, json.NewEncoder(out))
	default:
		return fmt.Errorf("consumer-bench: unknown -broker %q", broker)
	}
}

// result is one pass of one design: one JSON line.
type result struct {
	Broker               string  `json:"broker"`
	Design               string  `json:"design"`
	Pass                 string  `json:"pass"`
	Round                int     `json:"round"`
	Records              int     `json:"records"`
	Partitions           int     `json:"partitions"`
	Concurrency          int     `json:"concurrency"`
	Keys                 int     `json:"keys"`
	BatchClaims          bool    `json:"batch_claims"`
	Seconds              float64 `json:"seconds"`
	RecordsPerSecond     float64 `json:"records_per_s"`
	StatementsPerRecord  float64 `json:"statements_per_record"`
	RoundTripsPerRecord  float64 `json:"round_trips_per_record"`
	BusinessWrites       int64   `json:"business_writes"`
	BusinessWritesWanted int     `json:"business_writes_wanted"`
}

// postgres is the server both designs write to, with its statement counter.
type postgres struct {
	pool  *pgxpool.Pool
	calls *counter
}

// tables creates, for one round, the business table and processed_events, with suffix.
func (pg *postgres) tables(ctx context.Context, suffix string) (orders, events string, err error) {
	orders, events = "bench_orders_"+suffix, "processed_events_"+suffix
	_, err = pg.pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (id text PRIMARY KEY, body text NOT NULL);
CREATE TABLE %s (id text PRIMARY KEY, processed_at timestamptz NOT NULL DEFAULT now())`, orders, events),
		pgx.QueryExecModeSimpleProtocol)
	return orders, events, err
}

// count returns the rows of table.
func (pg *postgres) count(ctx context.Context, table string) (int64, error) {
	var n int64
	err := pg.pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n)
	return n, err
}

// processedEvents is the hand-written dedup of one record: in one transaction, insert its
// event id into processed_events unless there, and make the business write if it was not.
func (pg *postgres) processedEvents(ctx context.Context, orders, events, id string, body []byte) error {
	return pgx.BeginFunc(ctx, pg.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO `+events+` (id) VALUES ($1) ON CONFLICT DO NOTHING`, id)
		if err != nil || tag.RowsAffected() == 0 {
			return err // a duplicate: skipped
		}
		_, err = tx.Exec(ctx, `INSERT INTO `+orders+` (id, body) VALUES ($1, $2)`, id, body)
		return err
	})
}

// measure runs one pass and makes its result from the statements counted during it.
func (pg *postgres) measure(r result, orders string, pass func() error) (result, error) {
	ctx := context.Background()
	q0, b0, s0 := pg.calls.load()
	start := time.Now()
	if err := pass(); err != nil {
		return r, fmt.Errorf("%s %s %s: %w", r.Broker, r.Design, r.Pass, err)
	}
	r.Seconds = time.Since(start).Seconds()
	q1, b1, s1 := pg.calls.load()
	r.RecordsPerSecond = float64(r.Records) / r.Seconds
	r.StatementsPerRecord = float64((q1-q0)+(s1-s0)) / float64(r.Records)
	r.RoundTripsPerRecord = float64((q1-q0)+(b1-b0)) / float64(r.Records)
	n, err := pg.count(ctx, orders)
	r.BusinessWrites = n
	return r, err
}

// counter counts the statements sent on the pool's connections: single queries (BEGIN
// and COMMIT included), pipelined batches and the statements in them.
type counter struct {
	queries, batches, batchStatements atomic.Int64
}

func (c *counter) load() (queries, batches, batchStatements int64) {
	return c.queries.Load(), c.batches.Load(), c.batchStatements.Load()
}

// TraceQueryStart counts a statement.
func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.queries.Add(1)
	return ctx
}

// TraceQueryEnd does nothing.
func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart counts a pipelined batch, one round trip.
func (c *counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.batches.Add(1)
	return ctx
}

// TraceBatchQuery counts a statement of a batch.
func (c *counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.batchStatements.Add(1)
}

// TraceBatchEnd does nothing.
func (c *counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// suffix names one round's tables and groups.
func suffix(design string, round int) string {
	return strings.ReplaceAll(design, "_", "") + strconv.Itoa(round) + "_" + strconv.FormatInt(time.Now().UnixNano(), 36)
}
