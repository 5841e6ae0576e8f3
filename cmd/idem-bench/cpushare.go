package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem/sqs"
)

// The CPU share comparison (-cpu-share) measures which SQS path, batched claims or
// per-message, is faster when the client gets only a share of one CPU, as a Lambda function
// does in proportion to its memory (1,769 MB is one vCPU), while DynamoDB Local keeps the
// whole machine. Unthrottled, both paths are bounded by DynamoDB Local's CPU and take about
// the same time per batch; the per-message path costs the client several times the CPU,
// which a small share turns into wall time.

// CPUShareCounts are the sizes of the CPU share comparison: Share is the client's share of
// one CPU (its CFS quota per period), WarmupBatches the unthrottled batches of each path
// and Batches the throttled ones, of BatchSize fresh messages each.
type CPUShareCounts struct {
	Share         float64
	WarmupBatches int
	Batches       int
	BatchSize     int
}

// Default sizes of -cpu-share: the defaults of -cpu-share-warmup and -cpu-share-batches.
// The warmup is long because DynamoDB Local's JVM is still compiling after 100 batches of
// each path: its CPU per batch then is about twice what it is after 1,000, and the paths'
// unthrottled latencies swap places.
const (
	CPUShareWarmupBatches = 1000
	CPUShareBatches       = 60
)

// CPUShareResult is one JSON line of the comparison: one SQS path's throttled batches.
// Latencies are nearest-rank percentiles, as in [Result]; the CPU times are sums of the
// deltas around each batch divided by the batches (the server's from /proc/<pid>/stat, in
// 10 ms ticks, so only their sum over many batches means anything).
type CPUShareResult struct {
	Name                      string           `json:"name"`
	CPUShare                  float64          `json:"cpu_share"`
	BatchClaims               bool             `json:"batch_claims"`
	N                         int              `json:"n"`
	Unit                      string           `json:"unit"` // "batch"
	Order                     string           `json:"order"`
	P50US                     float64          `json:"p50_us"`
	P99US                     float64          `json:"p99_us"`
	MeanUS                    float64          `json:"mean_us"`
	MaxUS                     float64          `json:"max_us"`
	DDBCallsPerBatch          float64          `json:"ddb_calls_per_batch"`
	DDBCallsByOp              map[string]int64 `json:"ddb_calls_by_op"`
	HandlerExecutions         int64            `json:"handler_executions"`
	ClientCPUUSPerBatch       float64          `json:"client_cpu_us_per_batch"`
	ServerCPUUSPerBatch       float64          `json:"server_cpu_us_per_batch"`
	GOMAXPROCS                int              `json:"gomaxprocs"`
	ThrottledPeriods          int64            `json:"throttled_periods"`              // of the cgroup, both paths together
	ThrottledMS               float64          `json:"throttled_ms"`                   // of the cgroup, both paths together
	WarmupP50US               float64          `json:"warmup_p50_us"`                  // the same path unthrottled
	WarmupClientCPUUSPerBatch float64          `json:"warmup_client_cpu_us_per_batch"` // the same path unthrottled

	// violations lists the "must hold" conditions that failed; not printed.
	violations []string
}

// CPUShareSummary is the comparison's last JSON line: batched over per-message.
type CPUShareSummary struct {
	Name           string  `json:"name"`
	CPUShare       float64 `json:"cpu_share"`
	N              int     `json:"n"`
	P50Ratio       float64 `json:"p50_ratio"`        // batched p50 / per-message p50
	MeanRatio      float64 `json:"mean_ratio"`       // batched mean / per-message mean
	ClientCPURatio float64 `json:"client_cpu_ratio"` // batched / per-message client CPU per batch
}

func (r *CPUShareResult) broken() (string, []string) { return r.Name, r.violations }

func (r *CPUShareSummary) broken() (string, []string) { return r.Name, nil }

// check records a violated invariant when ok is false.
func (r *CPUShareResult) check(ok bool, format string, args ...any) {
	if !ok {
		r.violations = append(r.violations, fmt.Sprintf(format, args...))
	}
}

// throttleFunc confines this process to share of one CPU, checking that the server (its
// pid, 0 for none) stays outside the confinement.
type throttleFunc func(share float64, serverPID int) (q cpuQuota, err error)

// cpuQuota is a confinement of this process: String says what it is, stats reports the
// CFS throttling so far, release undoes it.
type cpuQuota interface {
	String() string
	stats() (periods int64, throttledMS float64)
	release() error
}

// runCPUShare runs the CPU share comparison instead of the workloads, printing a line per
// path and the summary; it returns 1 when setup, the throttle or an invariant fails.
func runCPUShare(ctx context.Context, opts setup, counts CPUShareCounts, throttle throttleFunc, stdout, stderr io.Writer) int {
	if opts.own {
		n := 2 * (counts.WarmupBatches + counts.Batches) * counts.BatchSize
		fmt.Fprintf(stderr, "idem-bench: WARNING: using table %q on %s: the comparison writes about %d items "+
			"with about %d write requests; on AWS they are billed at your table's prices\n", opts.table, opts.where(), n, 2*n)
	}
	env, err := opts.open(ctx)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer env.close(stderr)
	b, err := newBench(Counts{BatchSize: counts.BatchSize}, env.client, opts.table, env.guard, env.cnt, env.pid, true)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	perMessage, err := b.newSQSHandler(false)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	batched, perMsg := newSQSPath(b.sqs), newSQSPath(perMessage)

	b.comparePaths(counts.WarmupBatches, batched, perMsg)
	if batched.failed+perMsg.failed > 0 {
		fmt.Fprintf(stderr, "idem-bench: -cpu-share warmup: %d batched and %d per-message batches failed\n", batched.failed, perMsg.failed)
		return 1
	}
	warm := [2]InterleavedSide{batched.result(), perMsg.result()}
	warmCPU := [2]float64{batched.client, perMsg.client}

	runtime.GC()
	q, err := throttle(counts.Share, env.pid)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	released := false
	defer func() { // on a panic
		if !released {
			_ = q.release()
		}
	}()
	fmt.Fprintf(stderr, "idem-bench: -cpu-share %g: %v\n", counts.Share, q)
	b.comparePaths(counts.Batches, batched, perMsg)
	periods, throttled := q.stats()
	released = true
	if err := q.release(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}

	var lines [2]*CPUShareResult
	for i, p := range []*sqsPath{batched, perMsg} {
		name := "W4_throttled_batched"
		if i == 1 {
			name = "W4_throttled_per_message"
		}
		r := b.cpuShareResult(name, i == 0, counts, &p.side)
		r.ThrottledPeriods, r.ThrottledMS = periods, round(throttled, 1)
		r.WarmupP50US = warm[i].P50US
		if counts.WarmupBatches > 0 {
			r.WarmupClientCPUUSPerBatch = round(warmCPU[i]*1e3/float64(counts.WarmupBatches), 1)
		}
		lines[i] = r
	}
	sum := &CPUShareSummary{Name: "W4_throttled_summary", CPUShare: counts.Share, N: counts.Batches}
	if p := lines[1]; p.P50US > 0 && p.MeanUS > 0 && p.ClientCPUUSPerBatch > 0 {
		sum.P50Ratio = round(lines[0].P50US/p.P50US, 3)
		sum.MeanRatio = round(lines[0].MeanUS/p.MeanUS, 3)
		sum.ClientCPURatio = round(lines[0].ClientCPUUSPerBatch/p.ClientCPUUSPerBatch, 3)
	}
	w := newLineWriter(stdout, stderr)
	for _, l := range []line{lines[0], lines[1], sum} {
		w.emit(l)
	}
	if w.failed {
		return 1
	}
	return 0
}

// sqsPath is one SQS path of the comparison: a side whose op i handles the i-th of its
// batches of fresh messages (made by comparePaths) with its handler.
type sqsPath struct {
	side
	batches []events.SQSEvent
}

func newSQSPath(h *sqs.Handler) *sqsPath {
	p := &sqsPath{side: side{like: "W4_sqs_batch", cpu: true}}
	p.op = func(ctx context.Context, i int) bool {
		resp, err := h.Handle(ctx, p.batches[i])
		return err == nil && len(resp.BatchItemFailures) == 0
	}
	return p
}

// comparePaths makes n fresh batches for each side, then runs them alternately in ABBA
// order (the batched side first when libraryFirst(i)), each side's results reset first.
func (b *bench) comparePaths(n int, batched, perMessage *sqsPath) {
	batched.batches = newSQSEvents(n, b.counts.BatchSize)
	perMessage.batches = newSQSEvents(n, b.counts.BatchSize)
	b.abba(n, &batched.side, &perMessage.side)
}

// cpuShareResult is the line of one side after comparePaths, with its checks: no batch
// failed and every message ran once.
func (b *bench) cpuShareResult(name string, batchClaims bool, counts CPUShareCounts, s *side) *CPUShareResult {
	res := s.result()
	n := len(s.lat)
	r := &CPUShareResult{
		Name:              name,
		CPUShare:          counts.Share,
		BatchClaims:       batchClaims,
		N:                 n,
		Unit:              "batch",
		Order:             "ABBA",
		P50US:             res.P50US,
		P99US:             res.P99US,
		MeanUS:            res.MeanUS,
		MaxUS:             res.MaxUS,
		DDBCallsPerBatch:  res.DDBCallsPerOp,
		DDBCallsByOp:      res.DDBCallsByOp,
		HandlerExecutions: res.HandlerExecutions,
		GOMAXPROCS:        runtime.GOMAXPROCS(0),
	}
	if n > 0 {
		r.ClientCPUUSPerBatch = round(s.client*1e3/float64(n), 1)
		r.ServerCPUUSPerBatch = round(s.server*1e3/float64(n), 1)
	}
	want := int64(n * b.counts.BatchSize)
	r.check(n == counts.Batches, "%d batches, want %d", n, counts.Batches)
	r.check(s.failed == 0, "%d batches reported failures or an error", s.failed)
	r.check(r.HandlerExecutions == want, "%d executions, want %d", r.HandlerExecutions, want)
	return r
}
