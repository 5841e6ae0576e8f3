package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/pgserver"
	"github.com/idemkit/idem/lab/bench"
)

// tiny are sizes that run in seconds.
var tiny = bench.Counts{WarmupInvocations: 20, WarmupW3Rounds: 2, WarmupW4Batches: 2, Invocations: 30,
	W3Rounds: 3, W4Batches: 3, W4bBatches: 2}

// commonFields are the fields of every line, on every store.
var commonFields = []string{"name", "store", "n", "unit", "wall_ms", "p50_us", "p99_us", "mean_us", "max_us",
	"ops_per_s", "calls", "calls_per_op", "calls_by_op", "handler_executions", "client_cpu_ms",
	"client_sys_ms", "server_cpu_ms", "server_sys_ms", "other_cpu_ms"}

// TestRun runs every workload end to end on DynamoDB Local with tiny sizes, on the batched
// SQS path and, confined by a stand-in for the cgroup, on the per-message one: the
// conditions hold (run returns 0), the lines come in order with the fields of
// BENCHMARKS.md, and X1 and X2 send the library's requests (same bytes, same calls).
func TestRun(t *testing.T) {
	ddblocal.SkipShort(t)
	fields := append(commonFields, "http_attempts", "conditional_check_failed", "req_bytes_per_op")
	extra := map[string][]string{
		"W3_contention": {"in_progress_errors", "completed_replays", "handler_executions_per_key",
			"round_wall_p50_us", "round_wall_p99_us"},
		"W4_sqs_batch":               {"records_per_s"},
		"W4b_sqs_batch_3_inprogress": {"batches_reporting_exactly_preclaimed"},
		"B1_batch_100_new":           {"records_per_s"},
		"B1b_batch_100_redelivered":  {"records_per_s"},
	}
	order := []string{"W1_new_keys", "W2_replays", "W3_contention", "W4_sqs_batch",
		"W4b_sqs_batch_3_inprogress", "B1_batch_100_new", "B1b_batch_100_redelivered",
		"X1_raw_sdk_put_update", "X2_raw_sdk_put_conflict", "W1_X1_pairs", "W2_X2_pairs"}
	for _, tc := range []struct {
		name        string
		batchClaims bool
		share       float64
	}{
		{"batch-claims", true, 0},
		{"per-message-confined", false, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options{store: "dynamo", url: os.Getenv(ddblocal.EnvEndpoint), batchClaims: tc.batchClaims, cpuShare: tc.share}
			var confined, undone int
			if tc.share != 0 {
				o.confine = func(share float64) (func() error, error) {
					confined++
					assert.InDelta(t, tc.share, share, 0)
					return func() error { undone++; return nil }, nil
				}
			}
			c := tiny
			var stdout, stderr bytes.Buffer
			require.Equal(t, 0, run(context.Background(), o, c, &stdout, &stderr), "stderr:\n%s", stderr.String())
			wantCalls := 0
			if tc.share != 0 {
				wantCalls = 1
			}
			assert.Equal(t, [2]int{wantCalls, wantCalls}, [2]int{confined, undone}, "confine and undo calls")

			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			require.Len(t, lines, len(order))
			got := map[string]map[string]any{}
			for i, line := range lines {
				var m map[string]any
				require.NoError(t, json.Unmarshal([]byte(line), &m), line)
				assert.Equal(t, order[i], m["name"])
				assert.Equal(t, "dynamo", m["store"])
				for _, f := range append(fields, extra[order[i]]...) {
					assert.Contains(t, m, f, "%s lacks %s", order[i], f)
				}
				if tc.share != 0 {
					assert.InDelta(t, tc.share, m["cpu_share"], 0, order[i])
				} else {
					assert.NotContains(t, m, "cpu_share", order[i])
				}
				got[order[i]] = m
			}
			for lib, raw := range map[string]string{"W1_new_keys": "X1_raw_sdk_put_update", "W2_replays": "X2_raw_sdk_put_conflict"} {
				assert.Equal(t, got[lib]["req_bytes_per_op"], got[raw]["req_bytes_per_op"], "%s sends other requests than %s", raw, lib)
				assert.Equal(t, got[lib]["calls_by_op"], got[raw]["calls_by_op"], "%s calls", raw)
			}
			assert.EqualValues(t, 2, got["W1_new_keys"]["calls_per_op"])
			assert.EqualValues(t, 1, got["W2_replays"]["calls_per_op"])
			assert.EqualValues(t, c.Invocations, got["X2_raw_sdk_put_conflict"]["conditional_check_failed"])
			checkPairs(t, got)
			// A hundred records in batches of 25 statements: four calls of claims and four
			// of completions; redelivered, four of refused claims and one BatchGetItem.
			assert.EqualValues(t, 8, got["B1_batch_100_new"]["calls_per_op"])
			assert.EqualValues(t, 5, got["B1b_batch_100_redelivered"]["calls_per_op"])
			// Each preclaimed record meets a failed condition, on the single-item path
			// (PutItem) or the batched one (a PartiQL INSERT's DuplicateItem).
			assert.GreaterOrEqual(t, got["W4b_sqs_batch_3_inprogress"]["conditional_check_failed"],
				float64(3*c.W4bBatches))
		})
	}
}

// TestRunStores runs every workload with tiny sizes on PostgreSQL in both modes, on Redis
// and on the in-memory store, each server started by idem-bench (or the one DATABASE_URL
// or REDIS_URL names): the conditions hold, the lines name the store, a new key costs two
// calls and a replay one on every store, as does each store's raw floor (X1, X2), on Redis
// a batch of new keys two round trips (pipelines) and a redelivered one one, on PostgreSQL
// a batch of new keys two statements and a redelivered one one, and idem with an attached
// write and the hand-written designs beside it (P1–H2r) their statements, as BENCHMARKS.md
// reports, also when 16 callers run them at once (P1c, H1c, H2c). A missing server skips its case, or fails it with IDEM_REQUIRE_POSTGRES or
// IDEM_REQUIRE_REDIS set.
func TestRunStores(t *testing.T) {
	for _, tc := range []struct {
		store, mode, mustEnv, urlEnv, bin string
		lines                             int
	}{
		{store: "postgres", mode: "exec", mustEnv: "IDEM_REQUIRE_POSTGRES", urlEnv: "DATABASE_URL", bin: "postgres", lines: 20},
		{store: "postgres", mode: "cache", mustEnv: "IDEM_REQUIRE_POSTGRES", urlEnv: "DATABASE_URL", bin: "postgres", lines: 20},
		{store: "redis", mustEnv: "IDEM_REQUIRE_REDIS", urlEnv: "REDIS_URL", bin: "redis-server", lines: 11},
		{store: "memory", lines: 7},
	} {
		name := tc.store
		if tc.mode != "" {
			name += "-" + tc.mode
		}
		t.Run(name, func(t *testing.T) {
			o := options{store: tc.store, mode: tc.mode, batchClaims: true}
			if tc.urlEnv != "" {
				o.url = os.Getenv(tc.urlEnv)
				if err := installed(tc.bin); o.url == "" && err != nil {
					if os.Getenv(tc.mustEnv) != "" {
						t.Fatalf("%v (%s is set)", err, tc.mustEnv)
					}
					t.Skipf("%v: set %s to a server, or install it", err, tc.urlEnv)
				}
			}
			var stdout, stderr bytes.Buffer
			require.Equal(t, 0, run(context.Background(), o, tiny, &stdout, &stderr), "stderr:\n%s", stderr.String())
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			require.Len(t, lines, tc.lines)
			got := map[string]map[string]any{}
			for _, line := range lines {
				var m map[string]any
				require.NoError(t, json.Unmarshal([]byte(line), &m), line)
				for _, f := range commonFields {
					assert.Contains(t, m, f, "%s lacks %s", m["name"], f)
				}
				assert.Equal(t, tc.store, m["store"])
				if tc.mode != "" {
					assert.Equal(t, tc.mode, m["mode"])
				}
				got[m["name"].(string)] = m
			}
			if tc.store != "memory" {
				assert.EqualValues(t, 2, got["W1_new_keys"]["calls_per_op"])
				assert.EqualValues(t, 1, got["W2_replays"]["calls_per_op"])
				var floor []string
				for name := range got {
					if strings.HasPrefix(name, "X") {
						floor = append(floor, name)
					}
				}
				require.Len(t, floor, 2, "the raw floor X1, X2")
				checkPairs(t, got)
				for _, name := range floor {
					want := 1
					if strings.HasPrefix(name, "X1_") {
						want = 2
					}
					assert.EqualValues(t, want, got[name]["calls_per_op"], name)
				}
			}
			if tc.store == "redis" {
				for name, want := range map[string][2]float64{ // round trips, commands per batch
					"W4_sqs_batch": {2, 20}, "B1_batch_100_new": {2, 200}, "B1b_batch_100_redelivered": {1, 100},
				} {
					assert.EqualValues(t, want[0], got[name]["calls_per_op"], name)
					assert.EqualValues(t, want[1], got[name]["commands_per_op"], name)
				}
				assert.EqualValues(t, 2, got["X1_raw_redis_set_nx_set"]["commands_per_op"])
			}
			if tc.store == "postgres" {
				// The batch store: one statement for a batch's claims, one for its
				// completions (W4b: three records in flight, refused by the claims).
				for name, want := range map[string]float64{
					"W4_sqs_batch": 2, "W4b_sqs_batch_3_inprogress": 2, "B1_batch_100_new": 2, "B1b_batch_100_redelivered": 1,
				} {
					assert.EqualValues(t, want, got[name]["calls_per_op"], name)
				}
				// idem with an attached write beside the hand-written designs: statements
				// (BEGIN and COMMIT included) per invocation.
				for name, calls := range map[string]float64{
					"P1_idem_attached_new_keys": 5, "P2_idem_attached_replays": 1,
					"H1_processed_events_new_keys": 4, "H1r_processed_events_duplicates": 3,
					"H2_idempotency_keys_new_keys": 5, "H2r_idempotency_keys_replays": 4,
					"P1c_idem_attached_new_keys_16_workers": 5, "H1c_processed_events_new_keys_16_workers": 4,
					"H2c_idempotency_keys_new_keys_16_workers": 5,
				} {
					if assert.Contains(t, got, name) {
						assert.EqualValues(t, calls, got[name]["calls_per_op"], name)
					}
				}
			}
		})
	}
}

// checkPairs checks the lines of idem and the floor in alternation: each pair is one
// invocation through idem and the floor's operation, a new key costing two calls on each
// side and a replay one, with both sides' p50s and their ratio.
func checkPairs(t *testing.T, got map[string]map[string]any) {
	t.Helper()
	for name, calls := range map[string]float64{"W1_X1_pairs": 4, "W2_X2_pairs": 2} {
		if !assert.Contains(t, got, name) {
			continue
		}
		m := got[name]
		assert.EqualValues(t, calls, m["calls_per_op"], name)
		assert.Equal(t, "pair", m["unit"], name)
		for _, f := range []string{"floor_p50_us", "floor_mean_us", "p50_ratio", "mean_ratio"} {
			assert.Contains(t, m, f, "%s lacks %s", name, f)
		}
	}
}

// installed reports why bin (a PostgreSQL or Redis server) cannot be run, or nil.
func installed(bin string) error {
	if bin == "postgres" {
		_, err := pgserver.Locate()
		return err
	}
	_, err := exec.LookPath(bin)
	return err
}

// TestConfine confines the test binary to 1.5 CPUs in a cgroup of its own and back, with a
// child started before, which stays out. It needs root and a cpu cgroup, like -cpu-share:
// without them it is skipped, saying so, since it tests a measurement tool's privileged
// setup, not the library; any other error fails it.
func TestConfine(t *testing.T) {
	child := exec.Command("sleep", "60")
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	undo, err := confine(1.5)
	if errors.Is(err, errNoCgroup) {
		t.Skipf("no writable cpu cgroup on this machine: %v", err)
	}
	require.NoError(t, err)
	name := "idem-bench-" + strconv.Itoa(os.Getpid())
	cgroupOf := func(pid int) string {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
		require.NoError(t, err)
		return string(b)
	}
	assert.Contains(t, cgroupOf(os.Getpid()), "/"+name+"\n")
	assert.NotContains(t, cgroupOf(child.Process.Pid), name)
	quota, _ := os.ReadFile(filepath.Join(cgroupV1, name, "cpu.cfs_quota_us"))
	if len(quota) == 0 {
		quota, _ = os.ReadFile(filepath.Join(cgroupV2, name, "cpu.max"))
	}
	assert.Contains(t, []string{"150000", "150000 100000"}, strings.TrimSpace(string(quota)))
	require.NoError(t, undo())
	assert.NotContains(t, cgroupOf(os.Getpid()), name)
	assert.NoDirExists(t, filepath.Join(cgroupV1, name))
	assert.NoDirExists(t, filepath.Join(cgroupV2, name))
}

// TestQuotaUS checks which -cpu-share values are refused.
func TestQuotaUS(t *testing.T) {
	for _, tc := range []struct {
		share float64
		want  int // 0: refused
	}{
		{0.072, 7200}, {0.01, 1000}, {1, 100000}, {2, 200000},
		{0, 0}, {-1, 0}, {0.005, 0}, {2.01, 0}, {math.NaN(), 0},
	} {
		t.Run(strconv.FormatFloat(tc.share, 'g', -1, 64), func(t *testing.T) {
			got, err := quotaUS(tc.share)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.want == 0, err != nil, "%v", err)
		})
	}
}
