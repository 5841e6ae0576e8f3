// Command idem-bench runs the end-to-end benchmark of BENCHMARKS.md: the workloads of
// ../shared/BENCHMARKS.md against a fresh DynamoDB Local it starts on 127.0.0.1 and stops
// by PID, printing one JSON line per workload. It exits 1 when a workload's invariant does
// not hold.
//
//	go run ./cmd/idem-bench                      # or: make bench-e2e
//	go run ./cmd/idem-bench -table idem_bench    # your own table on AWS: billed
//	go run ./cmd/idem-bench -endpoint http://127.0.0.1:8000
//	go run ./cmd/idem-bench -probe               # or: make bench-probe
//
// -probe runs the write cost probe instead of the workloads (see BENCHMARKS.md): after a
// warmup, 600 rounds of one call of each write request shape (the claim's PutItem, the
// completion's UpdateItem, ClaimMany and CompleteMany of 10 records as PartiQL, a
// TransactWriteItems of 10 conditional puts, a BatchWriteItem of 10 plain puts), all on
// fresh keys, taken in turn. It prints one JSON line per shape with its p50 latency and the
// client's and DynamoDB Local's CPU per call (and the server's per item), then a
// probe_summary line comparing the server CPU per record of an SQS batch on the
// per-message and the batched paths.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
)

func main() {
	var opts setup
	flag.StringVar(&opts.endpoint, "endpoint", "", "DynamoDB endpoint to use instead of starting DynamoDB Local")
	flag.StringVar(&opts.table, "table", defaultTable, "table to create (if missing) and use")
	flag.BoolVar(&opts.batchClaims, "batch-claims", true, "sqs.WithBatchClaims for W4 and W4b; false measures the per-message path for comparison (not the specified workload)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file (it slows the run a little)")
	probe := flag.Bool("probe", false, "run the write cost probe instead of the workloads: the cost of each write request shape, per call and per item")
	flag.Parse()
	// Naming either, even the default table, means the user's own DynamoDB.
	flag.Visit(func(f *flag.Flag) { opts.own = opts.own || f.Name == "endpoint" || f.Name == "table" })
	do := func() int { return run(context.Background(), opts, SpecCounts(), os.Stdout, os.Stderr) }
	if *probe {
		do = func() int { return runProbe(context.Background(), opts, SpecProbeCounts(), os.Stdout, os.Stderr) }
	}
	if *cpuProfile != "" {
		stop, err := startProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		code := do()
		stop()
		os.Exit(code)
	}
	os.Exit(do())
}

// startProfile starts a CPU profile written to path; stop ends it and closes the file.
func startProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("idem-bench: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("idem-bench: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// run sets up, runs every workload, prints the JSON lines to stdout and returns the exit
// code: 1 when setup fails or an invariant does not hold.
func run(ctx context.Context, opts setup, counts Counts, stdout, stderr io.Writer) int {
	if opts.own {
		fmt.Fprintf(stderr, "idem-bench: WARNING: using table %q on %s: the run writes about 17,500 items with "+
			"about 40,000 write requests; on AWS they are billed at your table's prices, and the items stay "+
			"until TTL deletes them (an hour after the run at the earliest)\n", opts.table, opts.where())
	}
	env, err := opts.open(ctx)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer env.close(stderr)
	if !opts.batchClaims {
		fmt.Fprintln(stderr, "idem-bench: -batch-claims=false: W4 and W4b use the per-message SQS path, unlike BENCHMARKS.md")
	}
	b, err := newBench(counts, env.client, opts.table, env.guard, env.cnt, env.pid, opts.batchClaims)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	enc := json.NewEncoder(stdout)
	failed := false
	err = b.run(func(r *Result) {
		if err := enc.Encode(r); err != nil {
			fmt.Fprintln(stderr, err)
			failed = true
		}
		for _, v := range r.violations {
			fmt.Fprintf(stderr, "idem-bench: %s: must hold: %s\n", r.Name, v)
			failed = true
		}
	})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if failed {
		return 1
	}
	return 0
}
