// Command idem-pgbench measures the workloads W1–W3 of BENCHMARKS.md on the PostgreSQL
// store: W1 2,000 sequential guarded calls of fresh keys, W2 the same 2,000 again (replays),
// W3 20 rounds of 50 goroutines released together on one fresh key each; after a warmup of
// 10,000 new keys and 10 W3 rounds, with the handler of cmd/idem-bench (no I/O) and the
// same library settings (30 s deadline per call, 1 h expiry). It prints one JSON line per
// workload, with the statements each sent, counted through a wrapper around the pool.
//
// It starts its own PostgreSQL on 127.0.0.1 (internal/pgtest: fsync off, synchronous
// commit on) and stops it by process id, or uses -url. Run from the pgstore directory:
//
//	go run ./internal/cmd/idem-pgbench [-url postgres://...] [-mode exec|cache]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

const (
	deadline     = 30 * time.Second
	expiry       = time.Hour
	warmupCalls  = 10000
	warmupRounds = 10
	calls        = 2000
	rounds       = 20
	goroutines   = 50
)

func main() {
	url := flag.String("url", "", "PostgreSQL to use instead of starting one (its table is created, not dropped)")
	mode := flag.String("mode", "exec", "pgx query exec mode: exec (QueryExecModeExec, what the docs recommend behind RDS Proxy) or cache (pgx's default)")
	flag.Parse()
	if err := run(*url, *mode); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(url, mode string) error {
	ctx := context.Background()
	serverPID := 0
	if url == "" {
		s, err := pgtest.Start(ctx)
		if err != nil {
			return err
		}
		defer s.Close()
		url, serverPID = s.URL(), s.PID()
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	switch mode {
	case "exec":
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	case "cache":
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
	default:
		return fmt.Errorf("idem-pgbench: -mode %q: want exec or cache", mode)
	}
	cfg.MaxConns = goroutines
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	table := pgtest.Name("bench")
	if err := pgstore.CreateTable(ctx, pool, table); err != nil {
		return err
	}
	c := &counter{DB: pool}
	store, err := pgstore.New(c, table)
	if err != nil {
		return err
	}
	guard, err := idem.New(store, "bench", idem.WithScope("bench"), idem.WithExpiry(expiry))
	if err != nil {
		return err
	}
	b := &bench{guard: guard, c: c, serverPID: serverPID, mode: mode}
	b.newKeys("warmup_new_keys", keys(warmupCalls))
	b.contention("warmup_contention", warmupRounds)
	evs := keys(calls)
	for _, step := range []func() result{
		func() result { return b.newKeys("W1_new_keys", evs) },
		func() result { return b.replays(evs) },
		func() result { return b.contention("W3_contention", rounds) },
	} {
		runtime.GC()
		r := step()
		line, _ := json.Marshal(r)
		fmt.Println(string(line))
		if len(r.Violations) > 0 {
			return fmt.Errorf("idem-pgbench: %s: %v", r.Name, r.Violations)
		}
	}
	return nil
}

type bench struct {
	guard      *idem.Guard
	c          *counter
	serverPID  int
	mode       string
	executions atomic.Int64
}

type response struct {
	OK bool   `json:"ok"`
	ID string `json:"id"`
}

func (b *bench) handler(id string) func(context.Context) (response, error) {
	return func(context.Context) (response, error) {
		b.executions.Add(1)
		return response{OK: true, ID: id}, nil
	}
}

// result is one JSON line.
type result struct {
	Name              string   `json:"name"`
	Mode              string   `json:"mode"`
	N                 int      `json:"n"`
	WallMS            float64  `json:"wall_ms"`
	P50US             float64  `json:"p50_us"`
	P99US             float64  `json:"p99_us"`
	MeanUS            float64  `json:"mean_us"`
	MaxUS             float64  `json:"max_us"`
	OpsPerS           float64  `json:"ops_per_s"`
	Statements        int64    `json:"statements"`
	StatementsPerOp   float64  `json:"statements_per_op"`
	HandlerExecutions int64    `json:"handler_executions"`
	ClientCPUMS       float64  `json:"client_cpu_ms"`
	ServerCPUMS       float64  `json:"server_cpu_ms,omitempty"`
	InProgressErrors  *int64   `json:"in_progress_errors,omitempty"`
	CompletedReplays  *int64   `json:"completed_replays,omitempty"`
	Violations        []string `json:"violations,omitempty"`
}

// measure runs f as one measured region of n operations with latencies lat (filled by f).
func (b *bench) measure(name string, n int, f func(lat []time.Duration)) result {
	lat := make([]time.Duration, n)
	stmts0, exec0 := b.c.n.Load(), b.executions.Load()
	cpu0, srv0 := selfCPU(), serverCPU(b.serverPID)
	start := time.Now()
	f(lat)
	wall := time.Since(start)
	r := result{Name: name, Mode: b.mode, N: n, WallMS: ms(wall), OpsPerS: round(float64(n) / wall.Seconds())}
	r.Statements = b.c.n.Load() - stmts0
	r.StatementsPerOp = round(float64(r.Statements) / float64(n))
	r.HandlerExecutions = b.executions.Load() - exec0
	r.ClientCPUMS = ms(selfCPU() - cpu0)
	if b.serverPID != 0 {
		r.ServerCPUMS = ms(serverCPU(b.serverPID) - srv0)
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	r.P50US, r.P99US, r.MaxUS = us(lat[n*50/100]), us(lat[min(n-1, n*99/100)]), us(lat[n-1])
	r.MeanUS = us(sum / time.Duration(n))
	return r
}

func (b *bench) newKeys(name string, ids []string) result {
	var failed int
	r := b.measure(name, len(ids), func(lat []time.Duration) {
		for i, id := range ids {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			t0 := time.Now()
			_, replayed, err := idem.Do(ctx, b.guard, idem.Request{Key: id}, b.handler(id))
			lat[i] = time.Since(t0)
			cancel()
			if err != nil || replayed {
				failed++
			}
		}
	})
	r.check(failed == 0, "%d calls failed", failed)
	r.check(r.HandlerExecutions == int64(len(ids)), "%d executions, want %d", r.HandlerExecutions, len(ids))
	return r
}

func (b *bench) replays(ids []string) result {
	var failed int
	r := b.measure("W2_replays", len(ids), func(lat []time.Duration) {
		for i, id := range ids {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			t0 := time.Now()
			v, replayed, err := idem.Do(ctx, b.guard, idem.Request{Key: id}, b.handler(id))
			lat[i] = time.Since(t0)
			cancel()
			if err != nil || !replayed || v.ID != id {
				failed++
			}
		}
	})
	r.check(failed == 0, "%d replays failed or returned another key's result", failed)
	r.check(r.HandlerExecutions == 0, "%d executions, want 0", r.HandlerExecutions)
	return r
}

func (b *bench) contention(name string, n int) result {
	var inProgress, replays, other atomic.Int64
	var bad int
	r := b.measure(name, n*goroutines, func(lat []time.Duration) {
		for round, id := range keys(n) {
			before := b.executions.Load()
			var ready, done sync.WaitGroup
			start := make(chan struct{})
			for g := range goroutines {
				ready.Add(1)
				done.Add(1)
				go func() {
					defer done.Done()
					ctx, cancel := context.WithTimeout(context.Background(), deadline)
					defer cancel()
					ready.Done()
					<-start
					t0 := time.Now()
					v, replayed, err := idem.Do(ctx, b.guard, idem.Request{Key: id}, b.handler(id))
					lat[round*goroutines+g] = time.Since(t0)
					switch {
					case errors.Is(err, idem.ErrInProgress):
						inProgress.Add(1)
					case err != nil || v.ID != id:
						other.Add(1)
					case replayed:
						replays.Add(1)
					}
				}()
			}
			ready.Wait()
			close(start)
			done.Wait()
			if b.executions.Load()-before != 1 {
				bad++
			}
		}
	})
	ip, rp := inProgress.Load(), replays.Load()
	r.InProgressErrors, r.CompletedReplays = &ip, &rp
	r.check(bad == 0, "%d keys did not run exactly once", bad)
	r.check(other.Load() == 0, "%d errors other than in-progress", other.Load())
	return r
}

func (r *result) check(ok bool, format string, args ...any) {
	if !ok {
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	}
}

func keys(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = pgtest.Name("ev")
	}
	return ids
}

// counter counts the statements the store sends (it uses no transactions here: no
// attached writes).
type counter struct {
	pgstore.DB
	n atomic.Int64
}

func (c *counter) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.n.Add(1)
	return c.DB.Exec(ctx, sql, args...)
}

func (c *counter) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.n.Add(1)
	return c.DB.Query(ctx, sql, args...)
}

func (c *counter) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.n.Add(1)
	return c.DB.QueryRow(ctx, sql, args...)
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU returns the CPU time of the postmaster pid and its children (the backends),
// from /proc: 0 when pid is 0.
func serverCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	entries, _ := os.ReadDir("/proc")
	var ticks int64
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 (state) on
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		if p != pid && ppid != pid {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += ut + st
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ
}

func ms(d time.Duration) float64 { return round(float64(d) / float64(time.Millisecond)) }
func us(d time.Duration) float64 { return round(float64(d) / float64(time.Microsecond)) }
func round(f float64) float64    { return float64(int64(f*10+0.5)) / 10 }
