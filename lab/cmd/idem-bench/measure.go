package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// meter measures one workload: while on (between begin and end) it counts what the
// DynamoDB client sends, through middleware on every call, and it sums the wall time and
// CPU of its measured regions.
type meter struct {
	serverPID int // DynamoDB Local's JVM, or 0 when it is not ours
	mu        sync.Mutex
	on        bool
	t, start  tally // the sums, and the CPU times at the start of the current region
	at        time.Time
}

// tally is what a meter sums over its regions; CPU times are in milliseconds.
type tally struct {
	calls, tries, ccf, reqBytes int64
	byOp                        map[string]int64
	wall                        time.Duration
	client, server              cpuTimes
	busy                        float64 // the whole machine's
}

// cpuTimes are CPU times in milliseconds: total (user and system) and system alone.
type cpuTimes struct{ total, sys float64 }

func (a cpuTimes) add(end, start cpuTimes) cpuTimes {
	return cpuTimes{a.total + end.total - start.total, a.sys + end.sys - start.sys}
}

func (m *meter) cpu() tally {
	return tally{client: selfCPU(), server: processCPU(m.serverPID), busy: machineBusy()}
}

// reset empties the tally for the next workload.
func (m *meter) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.t = tally{byOp: map[string]int64{}}
}

// begin starts a measured region.
func (m *meter) begin() {
	start := m.cpu()
	m.mu.Lock()
	m.on, m.start = true, start
	m.mu.Unlock()
	m.at = time.Now() // last, so the reads above are not timed
}

// end ends the region begun last and adds it to the tally.
func (m *meter) end() {
	wall, end := time.Since(m.at), m.cpu()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.on = false
	m.t.wall += wall
	m.t.client = m.t.client.add(end.client, m.start.client)
	m.t.server = m.t.server.add(end.server, m.start.server)
	m.t.busy += end.busy - m.start.busy
}

// count applies f to the tally while the meter is on.
func (m *meter) count(f func(t *tally)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.on {
		f(&m.t)
	}
}

// apiOption adds the counting middleware to a client's stack: in front of the retry
// middleware it sees each call once, with its serialized body and its final outcome; the
// Deserialize step sees every HTTP attempt.
func (m *meter) apiOption(stack *middleware.Stack) error {
	return errors.Join(
		stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("idemBenchCalls", m.countCall), "Retry", middleware.Before),
		stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("idemBenchAttempts", m.countAttempt), middleware.Before),
	)
}

// countCall counts a call, its bytes and its failed conditions: a
// ConditionalCheckFailedException, or the statements of a BatchExecuteStatement that failed
// with ConditionalCheckFailed or DuplicateItem (how a PartiQL INSERT reports its key taken).
func (m *meter) countCall(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	var n int64
	if req, ok := in.Request.(*smithyhttp.Request); ok {
		if n = req.ContentLength; n <= 0 {
			n, _, _ = req.StreamLength()
		}
	}
	m.count(func(t *tally) { t.calls++; t.byOp[awsmiddleware.GetOperationName(ctx)]++; t.reqBytes += max(n, 0) })
	out, md, err := next.HandleFinalize(ctx, in)
	var failed int64
	if ccf := (*types.ConditionalCheckFailedException)(nil); errors.As(err, &ccf) {
		failed++
	}
	if batch, ok := out.Result.(*dynamodb.BatchExecuteStatementOutput); ok && batch != nil {
		for _, r := range batch.Responses {
			if r.Error != nil && (r.Error.Code == types.BatchStatementErrorCodeEnumConditionalCheckFailed ||
				r.Error.Code == types.BatchStatementErrorCodeEnumDuplicateItem) {
				failed++
			}
		}
	}
	m.count(func(t *tally) { t.ccf += failed })
	return out, md, err
}

func (m *meter) countAttempt(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	m.count(func(t *tally) { t.tries++ })
	return next.HandleDeserialize(ctx, in)
}

// selfCPU is this process's CPU time, from getrusage.
func selfCPU() cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTimes{}
	}
	ms := func(tv syscall.Timeval) float64 { return float64(tv.Sec)*1e3 + float64(tv.Usec)/1e3 }
	return cpuTimes{total: ms(ru.Utime) + ms(ru.Stime), sys: ms(ru.Stime)}
}

// processCPU reads utime and stime of pid from /proc/<pid>/stat (fields 14 and 15 of
// proc(5), after the command name, which may hold spaces); zero when pid is 0.
func processCPU(pid int) cpuTimes {
	if pid == 0 {
		return cpuTimes{}
	}
	f := procNumbers("/proc/"+strconv.Itoa(pid)+"/stat", ")", 13)
	return cpuTimes{total: (f[11] + f[12]) * 1e3 / clockTicks, sys: f[12] * 1e3 / clockTicks}
}

// machineBusy returns the busy CPU time of the whole machine from /proc/stat, in
// milliseconds: user, nice, system, irq, softirq and steal (guest time is in user and nice).
func machineBusy() float64 {
	f := procNumbers("/proc/stat", "cpu ", 8)
	return (f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) * 1e3 / clockTicks
}

// procNumbers returns the first n fields after the last sep on the first line of a /proc
// file, as numbers; zeros when it cannot be read.
func procNumbers(path, sep string, n int) []float64 {
	nums := make([]float64, n)
	b, _ := os.ReadFile(path)
	line, _, _ := strings.Cut(string(b), "\n")
	i := strings.LastIndex(line, sep)
	if i < 0 {
		return nums
	}
	fields := strings.Fields(line[i+len(sep):])
	for j := range min(n, len(fields)) {
		nums[j], _ = strconv.ParseFloat(fields[j], 64)
	}
	return nums
}

// result is one JSON line: the fields of BENCHMARKS.md, in its order.
type result struct {
	Name                   string           `json:"name"`
	N                      int              `json:"n"`
	Unit                   string           `json:"unit"`
	WallMS                 float64          `json:"wall_ms"`
	P50US                  float64          `json:"p50_us"`
	P99US                  float64          `json:"p99_us"`
	MeanUS                 float64          `json:"mean_us"`
	MaxUS                  float64          `json:"max_us"`
	OpsPerS                float64          `json:"ops_per_s"`
	DDBCalls               int64            `json:"ddb_calls"`
	DDBCallsPerOp          float64          `json:"ddb_calls_per_op"`
	DDBCallsByOp           map[string]int64 `json:"ddb_calls_by_op"`
	HTTPAttempts           int64            `json:"http_attempts"`
	ConditionalCheckFailed int64            `json:"conditional_check_failed"`
	ReqBytesPerOp          float64          `json:"req_bytes_per_op"`
	HandlerExecutions      int64            `json:"handler_executions"`
	ClientCPUMS            float64          `json:"client_cpu_ms"`
	ClientSysMS            float64          `json:"client_sys_ms"`
	ServerCPUMS            float64          `json:"server_cpu_ms"`
	ServerSysMS            float64          `json:"server_sys_ms"`
	OtherCPUMS             float64          `json:"other_cpu_ms"`

	// W3 only.
	InProgressErrors        *int64   `json:"in_progress_errors,omitempty"`
	CompletedReplays        *int64   `json:"completed_replays,omitempty"`
	HandlerExecutionsPerKey *float64 `json:"handler_executions_per_key,omitempty"`
	RoundWallP50US          *float64 `json:"round_wall_p50_us,omitempty"`
	RoundWallP99US          *float64 `json:"round_wall_p99_us,omitempty"`
	// W4 only.
	RecordsPerS *float64 `json:"records_per_s,omitempty"`
	// W4b only.
	BatchesReportingExactlyPreclaimed *int64 `json:"batches_reporting_exactly_preclaimed,omitempty"`
	// With -cpu-share.
	CPUShare float64 `json:"cpu_share,omitempty"`

	violations []string // the "must hold" conditions that failed; not printed
}

// result turns the tally and the latencies into a result. other_cpu_ms is the machine's
// busy time less the client's and the server's, so noise from everything else on the box;
// it is not clamped: /proc/stat counts in 10 ms ticks and getrusage does not, so on a quiet
// machine it can come out slightly negative.
func (m *meter) result(name, unit string, latencies []time.Duration, executions int64) *result {
	t, n := m.t, len(latencies)
	r := &result{
		Name: name, N: n, Unit: unit,
		WallMS:   round(float64(t.wall.Microseconds())/1e3, 3),
		DDBCalls: t.calls, DDBCallsByOp: t.byOp, HTTPAttempts: t.tries, ConditionalCheckFailed: t.ccf,
		HandlerExecutions: executions,
		ClientCPUMS:       round(t.client.total, 1), ClientSysMS: round(t.client.sys, 1),
		ServerCPUMS: round(t.server.total, 1), ServerSysMS: round(t.server.sys, 1),
		OtherCPUMS: round(t.busy-t.client.total-t.server.total, 1),
	}
	if n == 0 {
		return r
	}
	sorted := slices.Clone(latencies)
	slices.Sort(sorted)
	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}
	r.P50US, r.P99US, r.MaxUS = us(percentile(sorted, 50)), us(percentile(sorted, 99)), us(sorted[n-1])
	r.MeanUS = round(float64(sum.Nanoseconds())/float64(n)/1e3, 1)
	if t.wall > 0 {
		r.OpsPerS = round(float64(n)/t.wall.Seconds(), 1)
	}
	r.DDBCallsPerOp = round(float64(t.calls)/float64(n), 3)
	r.ReqBytesPerOp = round(float64(t.reqBytes)/float64(n), 1)
	return r
}

// check records a violated condition when ok is false.
func (r *result) check(ok bool, format string, args ...any) {
	if !ok {
		r.violations = append(r.violations, fmt.Sprintf(format, args...))
	}
}

// percentile is the nearest-rank percentile of sorted: sorted[ceil(p/100·n) − 1].
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func us(d time.Duration) float64 { return round(float64(d.Nanoseconds())/1e3, 1) }

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}
