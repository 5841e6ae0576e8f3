package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/ddblocal"
)

// fields are the keys every JSON line must have (BENCHMARKS.md), and extra those of single
// workloads.
var (
	fields = []string{"name", "n", "unit", "wall_ms", "p50_us", "p99_us", "mean_us", "max_us",
		"ops_per_s", "ddb_calls", "ddb_calls_per_op", "ddb_calls_by_op", "http_attempts",
		"conditional_check_failed", "req_bytes_per_op", "handler_executions", "client_cpu_ms",
		"client_sys_ms", "server_cpu_ms", "server_sys_ms", "other_cpu_ms"}
	extra = map[string][]string{
		"W3_contention": {"in_progress_errors", "completed_replays", "handler_executions_per_key",
			"round_wall_p50_us", "round_wall_p99_us"},
		"W4_sqs_batch":               {"records_per_s"},
		"W4b_sqs_batch_3_inprogress": {"batches_reporting_exactly_preclaimed"},
	}
	order = []string{"W1_new_keys", "W2_replays", "W3_contention", "W4_sqs_batch",
		"W4b_sqs_batch_3_inprogress", "X1_raw_sdk_put_update", "X2_raw_sdk_put_conflict"}
)

// TestRun runs every workload end to end on DynamoDB Local with tiny counts, on the
// batched SQS path and on the per-message one: the invariants hold (run returns 0), every
// line has its fields, and the raw-SDK floor sends the library's requests (same bytes, same
// round trips).
func TestRun(t *testing.T) {
	ddblocal.SkipShort(t)
	for _, tc := range []struct {
		name        string
		batchClaims bool
		pairs       int // Counts.InterleavedPairs
	}{
		{"batch-claims-interleaved", true, 8},
		{"per-message", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) { testRun(t, tc.batchClaims, tc.pairs) })
	}
}

// testSetup is where the tests run: a DynamoDB Local of their own, or the endpoint in
// $DYNAMODB_ENDPOINT (ddblocal.EnvEndpoint) with a table of their own.
func testSetup() setup {
	if ep := os.Getenv(ddblocal.EnvEndpoint); ep != "" {
		return setup{endpoint: ep, table: "idem_bench_test_" + strings.ReplaceAll(uuid4(), "-", ""), own: true}
	}
	return setup{table: defaultTable}
}

func testRun(t *testing.T, batchClaims bool, pairs int) {
	opts := testSetup()
	opts.batchClaims = batchClaims
	counts := Counts{
		WarmupInvocations: 20, WarmupW3Rounds: 2, WarmupW4Batches: 2,
		Invocations: 30, W3Rounds: 3, W3Goroutines: 8, W4Batches: 3, W4bBatches: 2, BatchSize: 10,
		InterleavedPairs: pairs,
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), opts, counts, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr:\n%s", stderr.String())

	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	want := len(order)
	if pairs > 0 {
		want += len(interleavedOrder)
	}
	require.Len(t, lines, want)
	if pairs > 0 {
		checkInterleaved(t, lines[len(order):], pairs)
		lines = lines[:len(order)]
	}
	got := map[string]map[string]any{}
	for i, line := range lines {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		name, _ := m["name"].(string)
		assert.Equal(t, order[i], name)
		for _, f := range append(fields, extra[name]...) {
			assert.Contains(t, m, f, "%s lacks %s", name, f)
		}
		got[name] = m
	}

	for _, tc := range []struct{ lib, raw string }{
		{"W1_new_keys", "X1_raw_sdk_put_update"},
		{"W2_replays", "X2_raw_sdk_put_conflict"},
	} {
		assert.Equal(t, got[tc.raw]["req_bytes_per_op"], got[tc.lib]["req_bytes_per_op"], "%s sends other requests than %s", tc.raw, tc.lib)
		assert.Equal(t, got[tc.raw]["ddb_calls_per_op"], got[tc.lib]["ddb_calls_per_op"], "%s round trips", tc.raw)
	}
	assert.EqualValues(t, 2, got["W1_new_keys"]["ddb_calls_per_op"])
	assert.EqualValues(t, 1, got["W2_replays"]["ddb_calls_per_op"])
	assert.EqualValues(t, counts.Invocations, got["X2_raw_sdk_put_conflict"]["conditional_check_failed"])
	// Each preclaimed record meets a failed condition, on the single-item path (PutItem) or
	// the batched one (a PartiQL INSERT's DuplicateItem).
	assert.GreaterOrEqual(t, got["W4b_sqs_batch_3_inprogress"]["conditional_check_failed"],
		float64(len(preclaimed)*counts.W4bBatches))
}

// interleavedOrder are the lines -interleaved adds after the workloads.
var interleavedOrder = []string{"W1_X1_interleaved", "W2_X2_interleaved"}

// checkInterleaved checks the interleaved lines of a run of pairs pairs: their fields are
// there and numeric, each side ran pairs operations with the calls, bytes and executions
// of the workload it repeats, and the raw side sent the library's requests. Not timings.
func checkInterleaved(t *testing.T, lines []string, pairs int) {
	t.Helper()
	type side struct {
		like              string
		callsPerOp        float64
		handlerExecutions int
		ccf               int
	}
	for i, tc := range []struct{ lib, raw side }{
		{side{"W1_new_keys", 2, pairs, 0}, side{"X1_raw_sdk_put_update", 2, 0, 0}},
		{side{"W2_replays", 1, 0, pairs}, side{"X2_raw_sdk_put_conflict", 1, 0, pairs}},
	} {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[i]), &m), lines[i])
		name := interleavedOrder[i]
		assert.Equal(t, name, m["name"])
		assert.EqualValues(t, pairs, m["n"], name)
		assert.Equal(t, "pair", m["unit"], name)
		assert.Equal(t, "ABBA", m["order"], name)
		for _, f := range []string{"p50_ratio", "mean_ratio", "wall_ms", "client_cpu_ms", "server_cpu_ms", "other_cpu_ms"} {
			assert.IsType(t, float64(0), m[f], "%s: %s", name, f)
		}
		assert.Positive(t, m["p50_ratio"], name)
		assert.Positive(t, m["mean_ratio"], name)
		sides := map[string]map[string]any{}
		for key, want := range map[string]side{"library": tc.lib, "raw": tc.raw} {
			s, ok := m[key].(map[string]any)
			require.True(t, ok, "%s: %s is not an object", name, key)
			sides[key] = s
			assert.Equal(t, want.like, s["like"], "%s.%s", name, key)
			for _, f := range []string{"p50_us", "p99_us", "mean_us", "max_us", "ddb_calls_per_op", "req_bytes_per_op",
				"conditional_check_failed", "handler_executions"} {
				assert.IsType(t, float64(0), s[f], "%s.%s: %s", name, key, f)
			}
			assert.Positive(t, s["p50_us"], "%s.%s", name, key)
			assert.GreaterOrEqual(t, s["p99_us"], s["p50_us"], "%s.%s", name, key)
			assert.GreaterOrEqual(t, s["max_us"], s["p99_us"], "%s.%s", name, key)
			assert.Equal(t, want.callsPerOp, s["ddb_calls_per_op"], "%s.%s", name, key)
			assert.EqualValues(t, want.handlerExecutions, s["handler_executions"], "%s.%s", name, key)
			assert.EqualValues(t, want.ccf, s["conditional_check_failed"], "%s.%s", name, key)
			byOp, ok := s["ddb_calls_by_op"].(map[string]any)
			require.True(t, ok, "%s.%s: ddb_calls_by_op", name, key)
			var calls float64
			for _, c := range byOp {
				calls += c.(float64)
			}
			assert.Equal(t, want.callsPerOp*float64(pairs), calls, "%s.%s: ddb_calls_by_op %v", name, key, byOp)
		}
		assert.Equal(t, sides["library"]["ddb_calls_by_op"], sides["raw"]["ddb_calls_by_op"], "%s: calls", name)
		assert.Equal(t, sides["library"]["req_bytes_per_op"], sides["raw"]["req_bytes_per_op"], "%s: request bytes", name)
	}
}

// TestLibraryFirst checks the ABBA order of the interleaved pairs.
func TestLibraryFirst(t *testing.T) {
	var got []bool
	for i := range 8 {
		got = append(got, libraryFirst(i))
	}
	assert.Equal(t, []bool{true, false, false, true, true, false, false, true}, got)
}

// TestProbe runs the write cost probe with a few rounds: every shape's line and the summary
// come out in order with their fields, and the counts (not the timings) are right.
func TestProbe(t *testing.T) {
	ddblocal.SkipShort(t)
	opts := testSetup()
	counts := ProbeCounts{WarmupRounds: 2, Rounds: 4, BatchSize: 10}
	var stdout, stderr bytes.Buffer
	code := runProbe(context.Background(), opts, counts, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr:\n%s", stderr.String())

	shapes := []struct {
		name  string
		items float64
	}{
		{"put_item", 1}, {"update_item", 1}, {"partiql_insert_10", 10}, {"partiql_update_10", 10},
		{"transact_put_10", 10}, {"batch_write_10", 10},
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Len(t, lines, len(shapes)+1)
	for i, sh := range shapes {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[i]), &m), lines[i])
		assert.Equal(t, sh.name, m["name"])
		for _, f := range []string{"wall_p50_us", "server_cpu_us_per_call", "server_cpu_us_per_item", "client_cpu_us_per_call"} {
			assert.IsType(t, float64(0), m[f], "%s: %s", sh.name, f)
		}
		assert.EqualValues(t, counts.Rounds, m["calls"], sh.name)
		assert.Equal(t, sh.items, m["items_per_call"], sh.name)
		if sh.name == "batch_write_10" {
			assert.Contains(t, m["note"], "not usable for claims")
		} else {
			assert.NotContains(t, m, "note", sh.name)
		}
	}
	var sum map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(shapes)]), &sum), lines[len(shapes)])
	assert.Equal(t, "probe_summary", sum["name"])
	assert.EqualValues(t, 10, sum["batch_size"])
	for _, f := range []string{"per_message_server_cpu_us_per_record", "batched_server_cpu_us_per_record",
		"batched_vs_per_message_server_cpu", "per_message_wall_us_per_record", "batched_wall_us_per_record"} {
		assert.IsType(t, float64(0), sum[f], f)
	}
}

// noThrottle is a throttleFunc that confines nothing, to test the CPU share comparison
// without a cgroup; the cgroup itself is TestEnterCPUQuota's.
func noThrottle(float64, int) (cpuQuota, error) { return noQuota{}, nil }

type noQuota struct{}

func (noQuota) String() string          { return "no throttle" }
func (noQuota) stats() (int64, float64) { return 0, 0 }
func (noQuota) release() error          { return nil }

// TestCPUShare runs the CPU share comparison with a few batches and no throttle: both
// paths' lines and the summary come out in order with their fields, and the counts (not
// the timings) are right: 2 calls per batch batched, 20 per-message, 10 executions each.
func TestCPUShare(t *testing.T) {
	ddblocal.SkipShort(t)
	opts := testSetup()
	counts := CPUShareCounts{Share: 0.5, WarmupBatches: 2, Batches: 6, BatchSize: 10}
	throttled := 0
	throttle := func(share float64, pid int) (cpuQuota, error) {
		throttled++
		assert.InDelta(t, 0.5, share, 0)
		if opts.endpoint == "" {
			assert.Positive(t, pid, "DynamoDB Local's pid")
		}
		return noThrottle(share, pid)
	}
	var stdout, stderr bytes.Buffer
	code := runCPUShare(context.Background(), opts, counts, throttle, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr:\n%s", stderr.String())
	assert.Equal(t, 1, throttled)

	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Len(t, lines, 3)
	for i, tc := range []struct {
		name        string
		batchClaims bool
		callsPer    float64
		byOp        map[string]any
	}{
		{"W4_throttled_batched", true, 2, map[string]any{"BatchExecuteStatement": float64(2 * counts.Batches)}},
		{"W4_throttled_per_message", false, 20, map[string]any{
			"PutItem": float64(10 * counts.Batches), "UpdateItem": float64(10 * counts.Batches)}},
	} {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[i]), &m), lines[i])
		assert.Equal(t, tc.name, m["name"])
		assert.Equal(t, tc.batchClaims, m["batch_claims"], tc.name)
		assert.InDelta(t, 0.5, m["cpu_share"], 0, tc.name)
		assert.EqualValues(t, counts.Batches, m["n"], tc.name)
		assert.Equal(t, "batch", m["unit"], tc.name)
		assert.Equal(t, "ABBA", m["order"], tc.name)
		for _, f := range []string{"p50_us", "p99_us", "mean_us", "max_us", "client_cpu_us_per_batch",
			"server_cpu_us_per_batch", "gomaxprocs", "throttled_periods", "throttled_ms", "warmup_p50_us",
			"warmup_client_cpu_us_per_batch"} {
			assert.IsType(t, float64(0), m[f], "%s: %s", tc.name, f)
		}
		assert.Positive(t, m["p50_us"], tc.name)
		assert.Positive(t, m["warmup_p50_us"], tc.name)
		assert.GreaterOrEqual(t, m["p99_us"], m["p50_us"], tc.name)
		assert.Equal(t, tc.callsPer, m["ddb_calls_per_batch"], tc.name)
		assert.Equal(t, tc.byOp, m["ddb_calls_by_op"], tc.name)
		assert.EqualValues(t, 10*counts.Batches, m["handler_executions"], tc.name)
		assert.EqualValues(t, 0, m["throttled_periods"], tc.name)
	}
	var sum map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[2]), &sum), lines[2])
	assert.Equal(t, "W4_throttled_summary", sum["name"])
	assert.EqualValues(t, counts.Batches, sum["n"])
	for _, f := range []string{"p50_ratio", "mean_ratio", "client_cpu_ratio"} {
		assert.Positive(t, sum[f], f)
	}
}

// TestEnterCPUQuota confines the test binary to 1.5 CPUs in a cgroup of its own and back,
// with a child started before as the server. It needs root and a writable cpu cgroup, like
// -cpu-share: on a machine without them it is skipped, saying so, since what it tests is a
// measurement tool's privileged setup, not the library; any other error fails it. A server
// that moved with the process fails the placement check, and is undone.
func TestEnterCPUQuota(t *testing.T) {
	before, err := selfCgroup(false)
	v2 := err != nil
	if v2 {
		before, err = selfCgroup(true)
	}
	require.NoError(t, err)
	server := exec.Command("sleep", "60")
	require.NoError(t, server.Start())
	t.Cleanup(func() {
		_ = server.Process.Kill()
		_ = server.Wait()
	})

	q, err := enterCPUQuota(1.5, server.Process.Pid)
	if errors.Is(err, errNoCgroup) {
		t.Skipf("no writable cpu cgroup on this machine: %v", err)
	}
	require.NoError(t, err)
	cg := q.(*cgroupQuota)
	assert.Equal(t, v2, cg.v2)
	assert.Equal(t, "idem-bench-"+strconv.Itoa(os.Getpid()), filepath.Base(cg.dir))
	self, err := selfCgroup(cg.v2)
	require.NoError(t, err)
	assert.Equal(t, path.Join(before, filepath.Base(cg.dir)), self)
	srv, err := procCgroup(strconv.Itoa(server.Process.Pid), cg.v2)
	require.NoError(t, err)
	assert.Equal(t, before, srv, "the server moved")
	if cg.v2 {
		b, err := os.ReadFile(filepath.Join(cg.dir, "cpu.max"))
		require.NoError(t, err)
		assert.Equal(t, "150000 100000", strings.TrimSpace(string(b)))
	} else {
		for file, want := range map[string]string{"cpu.cfs_quota_us": "150000", "cpu.cfs_period_us": "100000"} {
			b, err := os.ReadFile(filepath.Join(cg.dir, file))
			require.NoError(t, err)
			assert.Equal(t, want, strings.TrimSpace(string(b)), file)
		}
	}
	periods, ms := q.stats()
	assert.GreaterOrEqual(t, periods, int64(0))
	assert.GreaterOrEqual(t, ms, float64(0))
	require.NoError(t, q.release())
	assert.NoDirExists(t, cg.dir)
	self, err = selfCgroup(cg.v2)
	require.NoError(t, err)
	assert.Equal(t, before, self)

	// This process as the server: it moves, which the check refuses, and all is undone.
	_, err = enterCPUQuota(1.5, os.Getpid())
	require.ErrorContains(t, err, "moved into the quota cgroup")
	assert.NoDirExists(t, cg.dir)
	self, err = selfCgroup(cg.v2)
	require.NoError(t, err)
	assert.Equal(t, before, self)
}

// TestCheckCPUShare checks which -cpu-share flags are refused (exit code 2).
func TestCheckCPUShare(t *testing.T) {
	for _, tc := range []struct {
		share              float64
		batches, warmup    int
		probe, interleaved bool
		want               int
	}{
		{0.072, 60, 100, false, false, 0},
		{2, 1, 100, false, false, 0},
		{0, 60, 100, false, false, 2},
		{-1, 60, 100, false, false, 2},
		{2.01, 60, 100, false, false, 2},
		{math.NaN(), 60, 100, false, false, 2},
		{0.005, 60, 100, false, false, 2}, // below the 1 ms minimum quota
		{0.5, 0, 100, false, false, 2},
		{0.5, 60, -1, false, false, 2},
		{0.5, 60, 0, false, false, 0},
		{0.5, 60, 100, true, false, 2},
		{0.5, 60, 100, false, true, 2},
	} {
		assert.Equal(t, tc.want, checkCPUShare(tc.share, tc.batches, tc.warmup, tc.probe, tc.interleaved), "%+v", tc)
	}
}
