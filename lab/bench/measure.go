package bench

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// Meter measures one workload at a time: while on (between begin and end) it counts the
// requests the store client reports, and it sums the wall time and CPU of its measured
// regions. The counting methods are safe for concurrent use.
type Meter struct {
	// ServerPID is the store server's process, whose CPU (with its children's, such as
	// PostgreSQL's backends) is measured; 0 when the server is not ours.
	ServerPID int
	// Wire, when set, adds the counts only a DynamoDB client reports (HTTP attempts,
	// failed conditions, request bytes) to every result.
	Wire bool
	// Commands, when set, adds the commands counted apart from the calls (the Redis
	// commands of a pipeline, which is one call) to every result.
	Commands bool

	mu       sync.Mutex
	on       bool
	t, start tally // the sums, and the CPU times at the start of the current region
	at       time.Time
}

// tally is what a meter sums over its regions; CPU times are in milliseconds.
type tally struct {
	calls, tries, ccf, reqBytes, cmds int64
	byOp                              map[string]int64
	wall                              time.Duration
	client, server                    cpuTimes
	busy                              float64 // the whole machine's
}

// cpuTimes are CPU times in milliseconds: total (user and system) and system alone.
type cpuTimes struct{ total, sys float64 }

func (a cpuTimes) add(end, start cpuTimes) cpuTimes {
	return cpuTimes{a.total + end.total - start.total, a.sys + end.sys - start.sys}
}

// cpu reads the CPU times. The client's is read last at the start of a region and first at
// its end, so that reading /proc is not counted as the client's.
func (m *Meter) cpu(atStart bool) tally {
	var t tally
	if !atStart {
		t.client = selfCPU()
	}
	t.server, t.busy = processTreeCPU(m.ServerPID), machineBusy()
	if atStart {
		t.client = selfCPU()
	}
	return t
}

// reset empties the tally for the next workload.
func (m *Meter) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.t = tally{byOp: map[string]int64{}}
}

// begin starts a measured region.
func (m *Meter) begin() {
	start := m.cpu(true)
	m.mu.Lock()
	m.on, m.start = true, start
	m.mu.Unlock()
	m.at = time.Now() // last, so the reads above are not timed
}

// end ends the region begun last and adds it to the tally.
func (m *Meter) end() {
	wall, end := time.Since(m.at), m.cpu(false)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.on = false
	m.t.wall += wall
	m.t.client = m.t.client.add(end.client, m.start.client)
	m.t.server = m.t.server.add(end.server, m.start.server)
	m.t.busy += end.busy - m.start.busy
}

// count applies f to the tally while the meter is on.
func (m *Meter) count(f func(t *tally)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.on {
		f(&m.t)
	}
}

// Call counts one request of operation op (a DynamoDB operation, a SQL method, a Redis
// command), before any retry, with the bytes of its serialized body (0 when unknown).
func (m *Meter) Call(op string, reqBytes int64) {
	m.count(func(t *tally) { t.calls++; t.byOp[op]++; t.reqBytes += max(reqBytes, 0) })
}

// Command counts n commands carried by the calls (a Redis pipeline is one call of many
// commands).
func (m *Meter) Command(n int64) { m.count(func(t *tally) { t.cmds += n }) }

// Attempt counts one attempt of a request on the wire (a DynamoDB HTTP attempt).
func (m *Meter) Attempt() { m.count(func(t *tally) { t.tries++ }) }

// ConditionFailed counts n requests or statements that failed their condition.
func (m *Meter) ConditionFailed(n int64) { m.count(func(t *tally) { t.ccf += n }) }

// selfCPU is this process's CPU time, from getrusage.
func selfCPU() cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTimes{}
	}
	ms := func(tv syscall.Timeval) float64 { return float64(tv.Sec)*1e3 + float64(tv.Usec)/1e3 }
	return cpuTimes{total: ms(ru.Utime) + ms(ru.Stime), sys: ms(ru.Stime)}
}

// processTreeCPU sums utime and stime of pid and of its children (fields 14 and 15 of
// proc(5)'s stat, after the command name, which may hold spaces; the parent is field 4);
// zero when pid is 0. A child that exited between two reads takes its time with it: the
// figures are for servers whose workers live as long as the run, as PostgreSQL's backends
// of a pool do.
func processTreeCPU(pid int) cpuTimes {
	if pid == 0 {
		return cpuTimes{}
	}
	var c cpuTimes
	add := func(f []float64) {
		c.total += (f[11] + f[12]) * 1e3 / clockTicks
		c.sys += f[12] * 1e3 / clockTicks
	}
	add(procNumbers("/proc/"+strconv.Itoa(pid)+"/stat", ")", 13))
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == strconv.Itoa(pid) {
			continue
		}
		f := procNumbers("/proc/"+e.Name()+"/stat", ")", 13)
		if int(f[1]) == pid {
			add(f)
		}
	}
	return c
}

// machineBusy returns the busy CPU time of the whole machine from /proc/stat, in
// milliseconds: user, nice, system, irq, softirq and steal (guest time is in user and nice).
func machineBusy() float64 {
	f := procNumbers("/proc/stat", "cpu ", 8)
	return (f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) * 1e3 / clockTicks
}

// procNumbers returns the first n fields after the last sep on the first line of a /proc
// file, as numbers (a field that is not one reads 0); zeros when it cannot be read.
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

// Result is one JSON line: the fields of BENCHMARKS.md, in its order. Latencies are in µs
// and rounded to 0.1 µs, times and CPU in ms rounded to 0.1 ms (wall_ms to 1 µs), rates to
// 0.1 per second, per-operation counts to 0.001.
type Result struct {
	Name       string           `json:"name"`
	Store      string           `json:"store"`
	Mode       string           `json:"mode,omitempty"`
	N          int              `json:"n"`
	Unit       string           `json:"unit"`
	WallMS     float64          `json:"wall_ms"`
	P50US      float64          `json:"p50_us"`
	P99US      float64          `json:"p99_us"`
	MeanUS     float64          `json:"mean_us"`
	MaxUS      float64          `json:"max_us"`
	OpsPerS    float64          `json:"ops_per_s"`
	Calls      int64            `json:"calls"`
	CallsPerOp float64          `json:"calls_per_op"`
	CallsByOp  map[string]int64 `json:"calls_by_op"`
	// With Meter.Wire (DynamoDB) only.
	HTTPAttempts           *int64   `json:"http_attempts,omitempty"`
	ConditionalCheckFailed *int64   `json:"conditional_check_failed,omitempty"`
	ReqBytesPerOp          *float64 `json:"req_bytes_per_op,omitempty"`
	// With Meter.Commands (Redis) only: the commands, a pipeline's each counted.
	Commands      *int64   `json:"commands,omitempty"`
	CommandsPerOp *float64 `json:"commands_per_op,omitempty"`

	HandlerExecutions int64   `json:"handler_executions"`
	ClientCPUMS       float64 `json:"client_cpu_ms"`
	ClientSysMS       float64 `json:"client_sys_ms"`
	ServerCPUMS       float64 `json:"server_cpu_ms"`
	ServerSysMS       float64 `json:"server_sys_ms"`
	OtherCPUMS        float64 `json:"other_cpu_ms"`

	// W3 only.
	InProgressErrors        *int64   `json:"in_progress_errors,omitempty"`
	CompletedReplays        *int64   `json:"completed_replays,omitempty"`
	HandlerExecutionsPerKey *float64 `json:"handler_executions_per_key,omitempty"`
	RoundWallP50US          *float64 `json:"round_wall_p50_us,omitempty"`
	RoundWallP99US          *float64 `json:"round_wall_p99_us,omitempty"`
	// W1_X1_pairs and W2_X2_pairs only (Bench.Pairs): the floor's side, and idem's p50 and
	// mean over the floor's.
	FloorP50US  *float64 `json:"floor_p50_us,omitempty"`
	FloorMeanUS *float64 `json:"floor_mean_us,omitempty"`
	P50Ratio    *float64 `json:"p50_ratio,omitempty"`
	MeanRatio   *float64 `json:"mean_ratio,omitempty"`
	// W4 only.
	RecordsPerS *float64 `json:"records_per_s,omitempty"`
	// W4b only.
	BatchesReportingExactlyPreclaimed *int64 `json:"batches_reporting_exactly_preclaimed,omitempty"`
	// With a CPU share (idem-bench -cpu-share).
	CPUShare float64 `json:"cpu_share,omitempty"`

	// Violations are the "must hold" conditions that failed; not printed.
	Violations []string `json:"-"`
}

// result turns the tally and the latencies into a result. other_cpu_ms is the machine's
// busy time less the client's and the server's, so noise from everything else on the box;
// it is not clamped: /proc/stat counts in 10 ms ticks and getrusage does not, so on a quiet
// machine it can come out slightly negative.
func (m *Meter) result(name, unit string, latencies []time.Duration, executions int64) *Result {
	t, n := m.t, len(latencies)
	r := &Result{
		Name: name, N: n, Unit: unit,
		WallMS: round(float64(t.wall.Microseconds())/1e3, 3),
		Calls:  t.calls, CallsByOp: t.byOp,
		HandlerExecutions: executions,
		ClientCPUMS:       round(t.client.total, 1), ClientSysMS: round(t.client.sys, 1),
		ServerCPUMS: round(t.server.total, 1), ServerSysMS: round(t.server.sys, 1),
		OtherCPUMS: round(t.busy-t.client.total-t.server.total, 1),
	}
	if m.Wire {
		tries, ccf := t.tries, t.ccf
		r.HTTPAttempts, r.ConditionalCheckFailed = &tries, &ccf
	}
	if m.Commands {
		cmds := t.cmds
		r.Commands = &cmds
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
	r.CallsPerOp = round(float64(t.calls)/float64(n), 3)
	if m.Commands {
		c := round(float64(t.cmds)/float64(n), 3)
		r.CommandsPerOp = &c
	}
	if m.Wire {
		b := round(float64(t.reqBytes)/float64(n), 1)
		r.ReqBytesPerOp = &b
	}
	return r
}

// Check records a violated condition when ok is false.
func (r *Result) Check(ok bool, format string, args ...any) {
	if !ok {
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
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
