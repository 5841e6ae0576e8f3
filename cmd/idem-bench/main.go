// Command idem-bench runs the end-to-end benchmark of BENCHMARKS.md: the workloads of
// ../shared/BENCHMARKS.md against a fresh DynamoDB Local it starts on 127.0.0.1 and stops
// by PID, printing one JSON line per workload. It exits 1 when a workload's invariant does
// not hold.
//
//	go run ./cmd/idem-bench                      # or: make bench-e2e
//	go run ./cmd/idem-bench -table idem_bench    # your own table on AWS: billed
//	go run ./cmd/idem-bench -endpoint http://127.0.0.1:8000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	var opts setup
	flag.StringVar(&opts.endpoint, "endpoint", "", "DynamoDB endpoint to use instead of starting DynamoDB Local")
	flag.StringVar(&opts.table, "table", defaultTable, "table to create (if missing) and use")
	flag.BoolVar(&opts.batchClaims, "batch-claims", true, "sqs.WithBatchClaims for W4 and W4b; false measures the per-message path for comparison (not the specified workload)")
	flag.Parse()
	opts.own = opts.endpoint != "" || opts.table != defaultTable
	os.Exit(run(context.Background(), opts, SpecCounts(), os.Stdout, os.Stderr))
}

// run sets up, runs every workload, prints the JSON lines to stdout and returns the exit
// code: 1 when setup fails or an invariant does not hold.
func run(ctx context.Context, opts setup, counts Counts, stdout, stderr io.Writer) int {
	if opts.own {
		fmt.Fprintf(stderr, "idem-bench: WARNING: using table %q on %s: the run writes about 45,000 items and "+
			"makes about 60,000 requests; on AWS they are billed at your table's prices\n", opts.table, opts.where())
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
