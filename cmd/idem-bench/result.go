package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Result is one JSON line: the fields of BENCHMARKS.md, in its order.
type Result struct {
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

	// violations lists the "must hold" conditions that failed; not printed.
	violations []string
}

// result turns the meter and the latencies into a Result. other_cpu_ms is machine busy
// time less the client and the server, so it is noise from everything else on the box. It
// is not clamped: /proc/stat counts in 10 ms ticks and getrusage does not, so on a quiet
// machine it can come out slightly negative.
func (m *meter) result(name, unit string, latencies []time.Duration, executions int64) *Result {
	n := len(latencies)
	r := &Result{
		Name:                   name,
		N:                      n,
		Unit:                   unit,
		WallMS:                 round(float64(m.wall.Microseconds())/1e3, 3),
		DDBCalls:               m.calls.calls,
		DDBCallsByOp:           m.calls.byOp,
		HTTPAttempts:           m.calls.tries,
		ConditionalCheckFailed: m.calls.ccf,
		HandlerExecutions:      executions,
		ClientCPUMS:            round(m.client.total, 1),
		ClientSysMS:            round(m.client.sys, 1),
		ServerCPUMS:            round(m.server.total, 1),
		ServerSysMS:            round(m.server.sys, 1),
		OtherCPUMS:             round(m.busy-m.client.total-m.server.total, 1),
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
	r.P50US = us(percentile(sorted, 50))
	r.P99US = us(percentile(sorted, 99))
	r.MeanUS = round(float64(sum.Nanoseconds())/float64(n)/1e3, 1)
	r.MaxUS = us(sorted[n-1])
	if m.wall > 0 {
		r.OpsPerS = round(float64(n)/m.wall.Seconds(), 1)
	}
	r.DDBCallsPerOp = round(float64(m.calls.calls)/float64(n), 3)
	r.ReqBytesPerOp = round(float64(m.calls.reqLen)/float64(n), 1)
	return r
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

// check records a violated invariant when ok is false.
func (r *Result) check(ok bool, format string, args ...any) {
	if !ok {
		r.violations = append(r.violations, fmt.Sprintf(format, args...))
	}
}
