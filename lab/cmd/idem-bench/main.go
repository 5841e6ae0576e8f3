// Command idem-bench runs the end-to-end benchmark of BENCHMARKS.md on one store, printing
// one JSON line per workload; it exits 1 when a workload's "must hold" condition fails.
//
//   - -store dynamo (the default): the workloads W1 to W4b, B1 and B1b through idem and
//     the raw-SDK floor X1 and X2, against a fresh DynamoDB Local.
//   - -store postgres: the same on the PostgreSQL store, the floor two plain SQL
//     statements, against a fresh PostgreSQL 15+ (fsync off, synchronous commit on), with
//     pgx in -mode exec (QueryExecModeExec, what pgstore's docs recommend behind RDS Proxy)
//     or cache (pgx's default); then P1 and P2, idem with an attached business write,
//     beside H1 and H1r (a processed_events insert-or-skip) and H2 and H2r (a Stripe-style
//     idempotency_keys table with the stored response), the same write on the same server
//     (see pghand.go).
//   - -store redis: the same on the Redis store, the floor two plain commands, against a
//     fresh redis-server without persistence.
//   - -store memory: W1 to W4b, B1 and B1b on the in-memory store, no server.
//
// B1 and B1b are batches of a hundred records through the guard's batch claims, as a
// stream's ordered shard is consumed (lab/bench's GuardBatchSteps).
//
// Each server is started on 127.0.0.1 and stopped by process id at the end; -url names a
// running one instead (its CPU is then not measured). The measurement is package
// lab/bench's, the same for every store. From the lab directory:
//
//	go run ./cmd/idem-bench                          # or: make bench-e2e
//	go run ./cmd/idem-bench -short                   # a tenth of the sizes: does it work?
//	go run ./cmd/idem-bench -store postgres -mode cache
//	go run ./cmd/idem-bench -cpu-share 0.072         # as root: a 128 MB Lambda's CPU share
//	go run ./cmd/idem-bench -url http://127.0.0.1:8000   # a running DynamoDB Local
//	go run ./cmd/idem-bench -streams                 # and W5 to W6b, after X2
//
// make bench-stores runs it on every store, one after the other. -cpu-share F confines
// idem-bench, and not the server, to F of one CPU after the warmup, as BENCHMARKS.md
// describes.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/lab/bench"
	"github.com/idemkit/idem/memstore"
)

func main() {
	var o options
	flag.StringVar(&o.store, "store", "dynamo", "the store: dynamo, postgres, redis or memory")
	flag.StringVar(&o.mode, "mode", "", "postgres: pgx's query exec mode, exec (the default) or cache")
	flag.StringVar(&o.url, "url", "", "a running server to use instead of starting one: a DynamoDB endpoint, a postgres:// or redis:// URL (its CPU is then not measured)")
	flag.BoolVar(&o.batchClaims, "batch-claims", true, "dynamo: sqs.WithBatchClaims for W4 and W4b; false measures the per-message path (not the specified workload)")
	flag.BoolVar(&o.streams, "streams", false, "add the stream workloads W5 to W6b (Kinesis, DynamoDB Streams) after the others")
	flag.Float64Var(&o.cpuShare, "cpu-share", 0, "confine idem-bench (not the server) to this share of one CPU after the warmup, in [0.01, 2]; needs root")
	short := flag.Bool("short", false, "run a tenth of the specified sizes, to check that the benchmark works (the figures are not comparable)")
	flag.Parse()
	if o.cpuShare != 0 {
		if _, err := quotaUS(o.cpuShare); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		o.confine = confine
	}
	c := bench.Spec()
	if *short {
		c = bench.Short()
	}
	os.Exit(run(context.Background(), o, c, os.Stdout, os.Stderr))
}

// options say which store the benchmark runs on, and how.
type options struct {
	store, mode string
	url         string // a running server, or "" to start one
	batchClaims bool   // passed to sqs.WithBatchClaims
	streams     bool   // adds W5 to W6b
	cpuShare    float64
	// confine, when set, confines this process to cpuShare of one CPU after the warmup;
	// undo ends the confinement.
	confine func(share float64) (undo func() error, err error)
}

// target is one store ready for the benchmark.
type target struct {
	store idemstore.Store
	meter *bench.Meter
	// sqs adds W4 and W4b; extra returns workloads run after the others (X1 and X2).
	sqs   bool
	extra func(b *bench.Bench) []bench.Step
	// close stops what open started.
	close func() error
}

// open starts the store's server unless o names one, and builds the store on one client
// whose requests the target's meter counts.
func open(ctx context.Context, o options) (*target, error) {
	if o.mode != "" && o.store != "postgres" {
		return nil, fmt.Errorf("idem-bench: -mode is for -store postgres")
	}
	switch o.store {
	case "dynamo":
		return openDynamo(ctx, o)
	case "postgres":
		return openPostgres(ctx, o)
	case "redis":
		return openRedis(ctx, o)
	case "memory":
		return &target{store: memstore.New(), meter: &bench.Meter{}, sqs: true, close: func() error { return nil }}, nil
	}
	return nil, fmt.Errorf("idem-bench: -store %q: want dynamo, postgres, redis or memory", o.store)
}

// run opens the store, runs the warmup and then (confined with -cpu-share) every workload
// in the order of BENCHMARKS.md, prints a JSON line each to stdout and returns the exit
// code: 1 when setup or the warmup fails or a condition does not hold.
func run(ctx context.Context, o options, c bench.Counts, stdout, stderr io.Writer) (code int) {
	// A failed write to stderr has nowhere else to go.
	fail := func(err error) int {
		_, _ = fmt.Fprintln(stderr, err)
		return 1
	}
	if !o.batchClaims {
		_, _ = fmt.Fprintln(stderr, "idem-bench: -batch-claims=false: W4 and W4b use the per-message SQS path, unlike BENCHMARKS.md")
	}
	t, err := open(ctx, o)
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err := t.close(); err != nil {
			code = fail(err)
		}
	}()
	mode := o.mode
	if o.store == "postgres" && mode == "" {
		mode = "exec"
	}
	b, err := bench.New(t.store, t.meter, bench.Config{Store: o.store, Mode: mode, Counts: c,
		SQS: t.sqs, BatchClaims: o.batchClaims, Streams: o.streams, CPUShare: o.cpuShare})
	if err != nil {
		return fail(err)
	}
	if err := b.Warmup(); err != nil {
		return fail(err)
	}
	if o.confine != nil {
		undo, err := o.confine(o.cpuShare)
		if err != nil {
			return fail(err)
		}
		defer func() {
			if err := undo(); err != nil {
				code = fail(err)
			}
		}()
	}
	steps := append(b.Workloads(), b.GuardBatchSteps()...)
	if t.extra != nil {
		steps = append(steps, t.extra(b)...)
	}
	return b.Print(stdout, stderr, steps...)
}

// pairSteps returns W1_X1_pairs and W2_X2_pairs (see [bench.Bench.Pairs]): on fresh keys,
// idem's new key beside the floor's (newKey, X1's operation on its own keys), then their
// replays beside the floor's (replay, X2's).
func pairSteps(b *bench.Bench, newKey, replay func(ctx context.Context, i int) bool) []bench.Step {
	n := b.Counts().Invocations
	evs := bench.NewEvents(n)
	return []bench.Step{
		func() *bench.Result { return b.Pairs("W1_X1_pairs", n, b.NewKeyOp(evs), newKey, int64(n)) },
		func() *bench.Result { return b.Pairs("W2_X2_pairs", n, b.ReplayOp(evs), replay, 0) },
	}
}
