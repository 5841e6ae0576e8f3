// Command idem-bench runs the end-to-end benchmark of BENCHMARKS.md: the workloads W1 to
// W4b through idem and the raw-SDK floor X1 and X2, against a fresh DynamoDB Local that it
// starts on 127.0.0.1 and stops by PID, printing one JSON line per workload. It exits 1
// when a workload's "must hold" condition fails.
//
//	go run ./cmd/idem-bench                      # or: make bench-e2e
//	go run ./cmd/idem-bench -short               # a tenth of the sizes: does it work?
//	go run ./cmd/idem-bench -cpu-share 0.072     # as root: a 128 MB Lambda's CPU share
//	go run ./cmd/idem-bench -endpoint http://127.0.0.1:8000   # a running DynamoDB Local
//
// -cpu-share F confines idem-bench, and not DynamoDB Local, to F of one CPU after the
// warmup, as BENCHMARKS.md describes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/sqs"
)

func main() {
	var o options
	flag.StringVar(&o.endpoint, "endpoint", "", "a running DynamoDB Local to use instead of starting one (its CPU is then not measured)")
	flag.BoolVar(&o.batchClaims, "batch-claims", true, "sqs.WithBatchClaims for W4 and W4b; false measures the per-message path (not the specified workload)")
	flag.Float64Var(&o.cpuShare, "cpu-share", 0, "confine idem-bench (not DynamoDB Local) to this share of one CPU after the warmup, in [0.01, 2]; needs root")
	short := flag.Bool("short", false, "run a tenth of the specified sizes, to check that the benchmark works (the figures are not comparable)")
	flag.Parse()
	if o.cpuShare != 0 {
		if _, err := quotaUS(o.cpuShare); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		o.confine = confine
	}
	c := specCounts
	if *short {
		c = shortCounts
	}
	os.Exit(run(context.Background(), o, c, os.Stdout, os.Stderr))
}

// run sets up, runs the warmup and then (confined with -cpu-share) every workload in the
// order of BENCHMARKS.md, prints a JSON line each to stdout and returns the exit code: 1
// when setup or the warmup fails or a condition does not hold.
func run(ctx context.Context, o options, c counts, stdout, stderr io.Writer) (code int) {
	fail := func(err error) int {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if !o.batchClaims {
		fmt.Fprintln(stderr, "idem-bench: -batch-claims=false: W4 and W4b use the per-message SQS path, unlike BENCHMARKS.md")
	}
	b, err := open(ctx, o, c)
	if err != nil {
		return fail(err)
	}
	defer b.close(stderr)
	runtime.GC()
	// The warmup settles the JVM and the client's connections, on keys of its own.
	for _, r := range []*result{
		b.newKeys("warmup_new_keys", newEvents(c.warmupInvocations)),
		b.contention("warmup_contention", c.warmupW3Rounds),
		b.sqsBatches("warmup_sqs_batch", c.warmupW4Batches),
	} {
		if len(r.violations) > 0 {
			return fail(fmt.Errorf("idem-bench: warmup: %s: %v", r.Name, r.violations))
		}
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
	evs, keys := newEvents(c.invocations), b.newRawKeys(c.invocations)
	enc := json.NewEncoder(stdout)
	for _, step := range []func() *result{
		func() *result { return b.newKeys("W1_new_keys", evs) },
		func() *result { return b.replays(evs) },
		func() *result { return b.contention("W3_contention", c.w3Rounds) },
		func() *result { return b.sqsBatches("W4_sqs_batch", c.w4Batches) },
		b.sqsInProgress,
		func() *result { return b.rawPutUpdate(keys) },
		func() *result { return b.rawPutConflict(keys) },
	} {
		runtime.GC()
		r := step()
		r.CPUShare = o.cpuShare
		if err := enc.Encode(r); err != nil {
			code = fail(err)
		}
		for _, v := range r.violations {
			fmt.Fprintf(stderr, "idem-bench: %s: must hold: %s\n", r.Name, v)
			code = 1
		}
	}
	return code
}

// Settings of BENCHMARKS.md: the deadline set on every invocation's context (as the Lambda
// runtime would) makes the lease, and records are kept for expiry.
const (
	table    = "idem_bench"
	deadline = 30 * time.Second
	expiry   = time.Hour
	scope    = "bench"
	// W3's goroutines per key and the messages per SQS batch, at every size.
	w3Goroutines, batchSize = 50, 10
)

// counts are the sizes of the workloads.
type counts struct {
	warmupInvocations, warmupW3Rounds, warmupW4Batches int
	invocations                                        int // W1, W2, X1, X2
	w3Rounds, w4Batches, w4bBatches                    int
}

var (
	// specCounts are the sizes of BENCHMARKS.md; any other makes the figures incomparable.
	specCounts = counts{10000, 10, 100, 2000, 20, 200, 50}
	// shortCounts are a tenth of them (-short), to check that the benchmark runs.
	shortCounts = counts{1000, 2, 10, 200, 2, 20, 5}
)

// options say where the benchmark runs and how.
type options struct {
	endpoint    string // a running DynamoDB Local, or "" to start one
	batchClaims bool   // passed to sqs.WithBatchClaims
	cpuShare    float64
	// confine, when set, confines this process to cpuShare of one CPU after the warmup;
	// undo ends the confinement.
	confine func(share float64) (undo func() error, err error)
}

// bench holds what every workload shares: one client, one guard, one SQS handler.
type bench struct {
	counts
	server     *ddblocal.Server // nil on the user's DynamoDB
	client     *dynamodb.Client
	guard      *idem.Guard
	sqs        *sqs.Handler
	m          *meter
	executions atomic.Int64
}

// open starts DynamoDB Local unless o names an endpoint, and builds the one client
// (counted by b.m), the table, the guard and the SQS handler.
func open(ctx context.Context, o options, c counts) (b *bench, err error) {
	b = &bench{counts: c, m: &meter{}}
	endpoint := o.endpoint
	if endpoint == "" {
		if b.server, err = ddblocal.Start(ctx); err != nil {
			return nil, err
		}
		b.m.serverPID, endpoint = b.server.PID(), b.server.Endpoint()
	}
	defer func() {
		if err != nil {
			b.close(io.Discard)
		}
	}()
	// ddblocal's client keeps enough idle connections for W3 and uses the SDK's default
	// retries. DynamoDB Local sends a CRC32 header of 0 on some error responses, which the
	// SDK would log as a warning on every failed condition: the logs are dropped.
	b.client = dynamodb.New(ddblocal.NewClient(endpoint).Options(), func(opt *dynamodb.Options) {
		opt.APIOptions = append(opt.APIOptions, b.m.apiOption)
		opt.Logger = logging.Nop{}
	})
	if err := dynamo.CreateTable(ctx, b.client, table); err != nil {
		return nil, err
	}
	store, err := dynamo.New(b.client, table)
	if err != nil {
		return nil, err
	}
	// Cache and payload validation stay off (their defaults); the lease is the remaining
	// time of each context's deadline, without margin.
	if b.guard, err = idem.New(store, "bench", idem.WithExpiry(expiry), idem.WithScope(scope), idem.WithLeaseMargin(0)); err != nil {
		return nil, err
	}
	noValidation := func(events.SQSMessage) ([]byte, error) { return nil, nil }
	b.sqs, err = sqs.New(b.guard, b.handleMessage, sqs.WithFingerprint(noValidation), sqs.WithBatchClaims(o.batchClaims))
	return b, err
}

// close stops DynamoDB Local if this run started it.
func (b *bench) close(stderr io.Writer) {
	if b.server != nil {
		if err := b.server.Stop(); err != nil {
			fmt.Fprintln(stderr, err)
		}
	}
}

// The quota cgroup of -cpu-share: a quota of share × cfsPeriodUS per period, at least the
// kernel's minimum, in a cgroup at the root of cgroup v1's cpu hierarchy if it is mounted,
// else of cgroup v2's.
const (
	cfsPeriodUS = 100000
	minQuotaUS  = 1000
	cgroupV1    = "/sys/fs/cgroup/cpu"
	cgroupV2    = "/sys/fs/cgroup"
)

// errNoCgroup is returned when no quota cgroup can be made.
var errNoCgroup = errors.New("idem-bench: -cpu-share needs a writable cpu cgroup (root)")

// quotaUS returns the CFS quota of share, or an error if the kernel would refuse it or the
// share is above 2 CPUs.
func quotaUS(share float64) (int, error) {
	if !(share*cfsPeriodUS >= minQuotaUS && share <= 2) { // also NaN
		return 0, fmt.Errorf("idem-bench: -cpu-share %g: want a share of one CPU in [%g, 2]", share, float64(minQuotaUS)/cfsPeriodUS)
	}
	return int(math.Round(share * cfsPeriodUS)), nil
}

// confine moves this process (all its threads) into a new cgroup, idem-bench-<pid>, whose
// CFS quota is share of one CPU per 100 ms period. Processes started before, such as
// DynamoDB Local, stay where they are. undo moves this process to the hierarchy's root
// cgroup and removes the new one.
func confine(share float64) (undo func() error, err error) {
	quota, err := quotaUS(share)
	if err != nil {
		return nil, err
	}
	root := cgroupV1
	limits := [][2]string{{"cpu.cfs_period_us", strconv.Itoa(cfsPeriodUS)}, {"cpu.cfs_quota_us", strconv.Itoa(quota)}}
	if _, err := os.Stat(filepath.Join(cgroupV1, "cpu.cfs_quota_us")); err != nil {
		root, limits = cgroupV2, [][2]string{{"cpu.max", fmt.Sprintf("%d %d", quota, cfsPeriodUS)}}
		if err := write(root, "cgroup.subtree_control", "+cpu"); err != nil {
			return nil, fmt.Errorf("%w: %v", errNoCgroup, err)
		}
	}
	pid := strconv.Itoa(os.Getpid())
	dir := filepath.Join(root, "idem-bench-"+pid)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", errNoCgroup, err)
	}
	undo = func() error {
		return errors.Join(write(root, "cgroup.procs", pid), os.Remove(dir))
	}
	for _, l := range append(limits, [2]string{"cgroup.procs", pid}) {
		if err := write(dir, l[0], l[1]); err != nil {
			return nil, errors.Join(err, undo())
		}
	}
	return undo, nil
}

func write(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("idem-bench: write %q to %s: %w", value, file, err)
	}
	return nil
}
