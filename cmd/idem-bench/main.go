// Command idem-bench runs the end-to-end benchmark of BENCHMARKS.md: the workloads of
// ../shared/BENCHMARKS.md against a fresh DynamoDB Local it starts on 127.0.0.1 and stops
// by PID, printing one JSON line per workload. It exits 1 when a workload's invariant does
// not hold.
//
//	go run ./cmd/idem-bench                      # or: make bench-e2e
//	go run ./cmd/idem-bench -table idem_bench    # your own table on AWS: billed
//	go run ./cmd/idem-bench -endpoint http://127.0.0.1:8000
//	go run ./cmd/idem-bench -probe               # or: make bench-probe
//	go run ./cmd/idem-bench -interleaved
//	go run ./cmd/idem-bench -cpu-share 0.072     # as root: a 128 MB Lambda's CPU
//
// -probe runs the write cost probe instead of the workloads (see BENCHMARKS.md): after a
// warmup, 600 rounds of one call of each write request shape (the claim's PutItem, the
// completion's UpdateItem, ClaimMany and CompleteMany of 10 records as PartiQL, a
// TransactWriteItems of 10 conditional puts, a BatchWriteItem of 10 plain puts), all on
// fresh keys, taken in turn. It prints one JSON line per shape with its p50 latency and the
// client's and DynamoDB Local's CPU per call (and the server's per item), then a
// probe_summary line comparing the server CPU per record of an SQS batch on the
// per-message and the batched paths.
//
// -interleaved (off by default; the workloads and their lines are the same with it) adds,
// after the workloads, an overhead check without the drift of DynamoDB Local's JVM, which
// keeps getting faster over a run and so favours X1 and X2, run last, over W1 and W2. The
// W1_X1_interleaved line runs 2,000 pairs of one W1 invocation (through the library, on a
// fresh key) and one X1 put and update (straight from the SDK, on another fresh key), in
// ABBA order: pair i runs the library first when i%4 is 0 or 3. W2_X2_interleaved then
// pairs a replay of each of those W1 keys with X2's failing put on each of those X1 keys,
// in the same order. Each line has both sides' p50_us, p99_us, mean_us and DynamoDB calls
// per operation, p50_ratio and mean_ratio (library / raw), and the client's and DynamoDB
// Local's CPU over the whole interleaved region. It adds about 15 to 30 seconds.
//
// -cpu-share F runs, instead of the workloads, a comparison of the two SQS paths (batched
// claims, and per-message with sqs.WithBatchClaims(false)) when the client gets F of one
// CPU, as a Lambda function does in proportion to its memory (1,769 MB is one vCPU, 128 MB
// about 0.072), while DynamoDB Local does not. After -cpu-share-warmup (1,000) unthrottled
// batches of each path, it moves itself (every thread) into a new cpu cgroup,
// idem-bench-<pid>, a child of its own, with a CFS quota of F × 100 ms per 100 ms period;
// DynamoDB Local, started before as a child, stays in the parent, which it checks. It then
// runs -cpu-share-batches (60) batches of 10 fresh messages on each path, alternately in
// ABBA order (pair i runs the batched path first when i%4 is 0 or 3), moves back and
// removes the cgroup. It prints a W4_throttled_batched and a W4_throttled_per_message line
// (the path's p50_us, p99_us and mean_us per batch, DynamoDB calls, the client's and
// DynamoDB Local's CPU per batch, the cgroup's throttled_periods and throttled_ms, and the
// path's unthrottled warmup p50 and client CPU) and a W4_throttled_summary line with
// p50_ratio and mean_ratio (batched / per-message). It needs root and a writable cgroup v1
// cpu hierarchy (or cgroup v2 with the cpu controller); F is in (0, 2]. It takes about a
// minute.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
)

func main() {
	var opts setup
	flag.StringVar(&opts.endpoint, "endpoint", "", "DynamoDB endpoint to use instead of starting DynamoDB Local")
	flag.StringVar(&opts.table, "table", defaultTable, "table to create (if missing) and use")
	flag.BoolVar(&opts.batchClaims, "batch-claims", true, "sqs.WithBatchClaims for W4 and W4b; false measures the per-message path for comparison (not the specified workload)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file (it slows the run a little)")
	probe := flag.Bool("probe", false, "run the write cost probe instead of the workloads: the cost of each write request shape, per call and per item")
	interleaved := flag.Bool("interleaved", false, fmt.Sprintf("after the workloads, measure W1 against X1 and W2 against X2 again in %d interleaved (ABBA) pairs each: two more JSON lines", InterleavedPairs))
	cpuShare := flag.Float64("cpu-share", 0, "run the SQS path comparison instead of the workloads: batched against per-message batches, in ABBA order, with idem-bench confined to this share of one CPU (a CFS quota cgroup, as root; 0.072 is a 128 MB Lambda, 1 is 1,769 MB) and DynamoDB Local not")
	cpuShareBatches := flag.Int("cpu-share-batches", CPUShareBatches, "with -cpu-share: the throttled batches of each path")
	cpuShareWarmup := flag.Int("cpu-share-warmup", CPUShareWarmupBatches, "with -cpu-share: the unthrottled warmup batches of each path")
	flag.Parse()
	if *interleaved && *probe {
		fmt.Fprintln(os.Stderr, "idem-bench: -interleaved adds to the workloads; it does not combine with -probe")
		os.Exit(2)
	}
	shareSet := false
	flag.Visit(func(f *flag.Flag) { shareSet = shareSet || strings.HasPrefix(f.Name, "cpu-share") })
	if shareSet {
		if code := checkCPUShare(*cpuShare, *cpuShareBatches, *cpuShareWarmup, *probe, *interleaved); code != 0 {
			os.Exit(code)
		}
	}
	// Naming either, even the default table, means the user's own DynamoDB.
	flag.Visit(func(f *flag.Flag) { opts.own = opts.own || f.Name == "endpoint" || f.Name == "table" })
	counts := SpecCounts()
	if *interleaved {
		counts.InterleavedPairs = InterleavedPairs
	}
	do := func() int { return run(context.Background(), opts, counts, os.Stdout, os.Stderr) }
	if *probe {
		do = func() int { return runProbe(context.Background(), opts, SpecProbeCounts(), os.Stdout, os.Stderr) }
	}
	if shareSet {
		counts := CPUShareCounts{Share: *cpuShare, WarmupBatches: *cpuShareWarmup, Batches: *cpuShareBatches, BatchSize: 10}
		do = func() int {
			return runCPUShare(context.Background(), opts, counts, enterCPUQuota, os.Stdout, os.Stderr)
		}
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

// checkCPUShare checks the -cpu-share flags and returns 2 (after saying why) when they
// are wrong, or 0.
func checkCPUShare(share float64, batches, warmup int, probe, interleaved bool) int {
	var msg string
	switch {
	case probe || interleaved:
		msg = "-cpu-share runs its own comparison instead of the workloads; it does not combine with -probe or -interleaved"
	case !(share > 0 && share <= 2): // also NaN
		msg = fmt.Sprintf("-cpu-share %g: want a share of one CPU in (0, 2]", share)
	case share*cfsPeriodUS < minQuotaUS:
		msg = fmt.Sprintf("-cpu-share %g: below the kernel's minimum CFS quota of %d µs per %d µs", share, minQuotaUS, cfsPeriodUS)
	case batches < 1:
		msg = fmt.Sprintf("-cpu-share-batches %d: want at least 1", batches)
	case warmup < 0:
		msg = fmt.Sprintf("-cpu-share-warmup %d: want at least 0", warmup)
	}
	if msg == "" {
		return 0
	}
	fmt.Fprintln(os.Stderr, "idem-bench: "+msg)
	return 2
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
		if n := counts.InterleavedPairs; n > 0 {
			fmt.Fprintf(stderr, "idem-bench: WARNING: -interleaved adds about %d items and %d write requests\n", 2*n, 6*n)
		}
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
	w := newLineWriter(stdout, stderr)
	if err := b.run(w.emit); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if w.failed {
		return 1
	}
	return 0
}

// lineWriter prints lines as JSON to stdout and the invariants they broke to stderr;
// failed says whether there were any, or a line could not be written.
type lineWriter struct {
	enc    *json.Encoder
	stderr io.Writer
	failed bool
}

func newLineWriter(stdout, stderr io.Writer) *lineWriter {
	return &lineWriter{enc: json.NewEncoder(stdout), stderr: stderr}
}

func (w *lineWriter) emit(r line) {
	if err := w.enc.Encode(r); err != nil {
		fmt.Fprintln(w.stderr, err)
		w.failed = true
	}
	name, violations := r.broken()
	for _, v := range violations {
		fmt.Fprintf(w.stderr, "idem-bench: %s: must hold: %s\n", name, v)
		w.failed = true
	}
}
