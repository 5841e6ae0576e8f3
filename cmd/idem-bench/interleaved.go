package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/idemkit/idem"
)

// The interleaved overhead check (-interleaved) measures idem's overhead against the
// raw-SDK floor without the drift between workloads run minutes apart: DynamoDB Local's JVM
// keeps getting faster during a run, so X1, run last, looks faster than W1 for byte-identical
// requests. Here each pair of operations runs one invocation through the library and the
// same requests straight from the SDK back to back, in ABBA order, so that drift and
// position within the pair fall on both sides alike.

// InterleavedPairs is the number of pairs of each interleaved line with -interleaved.
const InterleavedPairs = 2000

// InterleavedResult is one JSON line of the interleaved check: the two sides' latencies
// and calls, their ratios, and the CPU of the whole region (both sides together).
type InterleavedResult struct {
	Name        string          `json:"name"`
	N           int             `json:"n"`    // pairs; each side runs n operations
	Unit        string          `json:"unit"` // "pair"
	Order       string          `json:"order"`
	P50Ratio    float64         `json:"p50_ratio"`  // library p50 / raw p50
	MeanRatio   float64         `json:"mean_ratio"` // library mean / raw mean
	Library     InterleavedSide `json:"library"`
	Raw         InterleavedSide `json:"raw"`
	WallMS      float64         `json:"wall_ms"`
	ClientCPUMS float64         `json:"client_cpu_ms"`
	ServerCPUMS float64         `json:"server_cpu_ms"`
	OtherCPUMS  float64         `json:"other_cpu_ms"`

	// violations lists the "must hold" conditions that failed; not printed.
	violations []string
}

// InterleavedSide is one side of an interleaved line: the workload it repeats, its
// latencies (nearest-rank percentiles, as in [Result]) and the DynamoDB calls it made.
type InterleavedSide struct {
	Like                   string           `json:"like"` // the spec workload whose operation it runs
	P50US                  float64          `json:"p50_us"`
	P99US                  float64          `json:"p99_us"`
	MeanUS                 float64          `json:"mean_us"`
	MaxUS                  float64          `json:"max_us"`
	DDBCallsPerOp          float64          `json:"ddb_calls_per_op"`
	DDBCallsByOp           map[string]int64 `json:"ddb_calls_by_op"`
	ConditionalCheckFailed int64            `json:"conditional_check_failed"`
	ReqBytesPerOp          float64          `json:"req_bytes_per_op"`
	HandlerExecutions      int64            `json:"handler_executions"`
}

func (r *InterleavedResult) broken() (string, []string) { return r.Name, r.violations }

// check records a violated invariant when ok is false.
func (r *InterleavedResult) check(ok bool, format string, args ...any) {
	if !ok {
		r.violations = append(r.violations, fmt.Sprintf(format, args...))
	}
}

// libraryFirst says whether pair i runs the library's side first: ABBA, so pairs 0 and 3
// of every four do.
func libraryFirst(i int) bool { return i%4 == 0 || i%4 == 3 }

// side accumulates one side's operations over the pairs.
type side struct {
	like       string
	op         func(ctx context.Context, i int) bool
	lat        []time.Duration
	calls      callCounts
	executions int64
	failed     int
	// With cpu set, client and server are the CPU times (ms) of the client and of DynamoDB
	// Local around each op, summed: the server's in 10 ms ticks, so only sums over many ops
	// mean anything. Off for the interleaved lines, whose region CPU would count the reads.
	cpu            bool
	client, server float64
}

// time runs op(i) once with a fresh deadline on its context, as [bench.sequential] does,
// and adds its latency, the calls it made, the handler executions and (with s.cpu) the
// CPU times to s. The counters are read outside the timed call; the server's CPU outermost
// and the client's innermost, so that neither counts the reading of the other.
func (s *side) time(b *bench, i int) {
	c0, e0 := b.cnt.snapshot(), b.executions.Load()
	var s0, u0 cpuTimes
	if s.cpu {
		s0, u0 = processCPU(b.pid), selfCPU()
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	start := time.Now()
	ok := s.op(ctx, i)
	s.lat = append(s.lat, time.Since(start))
	cancel()
	if s.cpu {
		u1 := selfCPU()
		s.server += processCPU(b.pid).sub(s0).total
		s.client += u1.sub(u0).total
	}
	c1, e1 := b.cnt.snapshot(), b.executions.Load()
	if !ok {
		s.failed++
	}
	s.executions += e1 - e0
	s.calls.calls += c1.calls - c0.calls
	s.calls.tries += c1.tries - c0.tries
	s.calls.ccf += c1.ccf - c0.ccf
	s.calls.reqLen += c1.reqLen - c0.reqLen
	for op, n := range c1.byOp {
		if d := n - c0.byOp[op]; d > 0 {
			s.calls.byOp[op] += d
		}
	}
}

// abba empties a and z, then runs n pairs of their operations, a's first when
// libraryFirst(i), else z's.
func (b *bench) abba(n int, a, z *side) {
	a.reset(n)
	z.reset(n)
	for i := range n {
		first, second := z, a
		if libraryFirst(i) {
			first, second = a, z
		}
		first.time(b, i)
		second.time(b, i)
	}
}

// reset empties s for n operations.
func (s *side) reset(n int) {
	s.lat = make([]time.Duration, 0, n)
	s.calls = callCounts{byOp: map[string]int64{}}
	s.executions, s.failed, s.client, s.server = 0, 0, 0, 0
}

func (s *side) result() InterleavedSide {
	r := InterleavedSide{
		Like:                   s.like,
		DDBCallsByOp:           s.calls.byOp,
		ConditionalCheckFailed: s.calls.ccf,
		HandlerExecutions:      s.executions,
	}
	n := len(s.lat)
	if n == 0 {
		return r
	}
	sorted := slices.Clone(s.lat)
	slices.Sort(sorted)
	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}
	r.P50US = us(percentile(sorted, 50))
	r.P99US = us(percentile(sorted, 99))
	r.MeanUS = round(float64(sum.Nanoseconds())/float64(n)/1e3, 1)
	r.MaxUS = us(sorted[n-1])
	r.DDBCallsPerOp = round(float64(s.calls.calls)/float64(n), 3)
	r.ReqBytesPerOp = round(float64(s.calls.reqLen)/float64(n), 1)
	return r
}

// interleave runs n pairs of lib and raw in ABBA order as one measured region and returns
// its line (without checks) and the two sides.
func (b *bench) interleave(name string, n int, lib, raw *side) *InterleavedResult {
	m := newMeter(b.cnt, b.pid)
	k := m.begin()
	b.abba(n, lib, raw)
	m.end(k)
	r := &InterleavedResult{
		Name:        name,
		N:           n,
		Unit:        "pair",
		Order:       "ABBA",
		Library:     lib.result(),
		Raw:         raw.result(),
		WallMS:      round(float64(m.wall.Microseconds())/1e3, 3),
		ClientCPUMS: round(m.client.total, 1),
		ServerCPUMS: round(m.server.total, 1),
		OtherCPUMS:  round(m.busy-m.client.total-m.server.total, 1),
	}
	if r.Raw.P50US > 0 {
		r.P50Ratio = round(r.Library.P50US/r.Raw.P50US, 3)
	}
	if r.Raw.MeanUS > 0 {
		r.MeanRatio = round(r.Library.MeanUS/r.Raw.MeanUS, 3)
	}
	return r
}

// interleavedNewKeys is W1_X1_interleaved: per pair, a W1 invocation on a fresh key and
// X1's put and update on another fresh key. It returns the line and the keys of both
// sides, for the replays.
func (b *bench) interleavedNewKeys(n int) (*InterleavedResult, []event, []rawKey) {
	evs := newEvents(n)
	keys := make([]rawKey, n)
	for i := range keys {
		keys[i] = b.newRawKey()
	}
	lib := &side{like: "W1_new_keys", op: func(ctx context.Context, i int) bool {
		_, _, err := idem.Do(ctx, b.guard, idem.Request{Key: evs[i].ID}, b.handler(evs[i]))
		return err == nil
	}}
	raw := &side{like: "X1_raw_sdk_put_update", op: func(ctx context.Context, i int) bool {
		return b.rawPutUpdateOne(ctx, keys[i])
	}}
	r := b.interleave("W1_X1_interleaved", n, lib, raw)
	r.check(lib.failed == 0, "%d library invocations failed", lib.failed)
	r.check(r.Library.HandlerExecutions == int64(n), "%d library executions, want %d", r.Library.HandlerExecutions, n)
	r.check(raw.failed == 0, "%d raw put/update pairs failed", raw.failed)
	r.check(r.Raw.HandlerExecutions == 0, "%d executions during raw calls, want 0", r.Raw.HandlerExecutions)
	return r, evs, keys
}

// interleavedReplays is W2_X2_interleaved: per pair, a replay of a W1-side event of
// W1_X1_interleaved and X2's conflicting put on an X1-side key.
func (b *bench) interleavedReplays(evs []event, keys []rawKey) *InterleavedResult {
	n := min(len(evs), len(keys))
	lib := &side{like: "W2_replays", op: func(ctx context.Context, i int) bool {
		res, replayed, err := idem.Do(ctx, b.guard, idem.Request{Key: evs[i].ID}, b.handler(evs[i]))
		return err == nil && replayed && res.OK && res.ID == evs[i].ID
	}}
	raw := &side{like: "X2_raw_sdk_put_conflict", op: func(ctx context.Context, i int) bool {
		return b.rawPutConflictOne(ctx, keys[i])
	}}
	r := b.interleave("W2_X2_interleaved", n, lib, raw)
	r.check(r.Library.HandlerExecutions == 0, "%d library executions, want 0", r.Library.HandlerExecutions)
	r.check(lib.failed == 0, "%d replays failed or returned another key's result", lib.failed)
	r.check(raw.failed == 0, "%d raw puts did not fail their condition with the old item", raw.failed)
	r.check(r.Raw.HandlerExecutions == 0, "%d executions during raw calls, want 0", r.Raw.HandlerExecutions)
	return r
}
