// Command redisbench runs the W1–W3 workloads of BENCHMARKS.md (as cmd/idem-bench runs
// them on DynamoDB Local) on the Redis store: a warmup, then W1 (2,000 sequential
// invocations on fresh keys), W2 (the same events again: replays) and W3 (20 rounds of 50
// goroutines released together on one fresh key each), one JSON line each. It starts its
// own redis-server on 127.0.0.1 (no persistence) and kills it by process id at the end,
// unless REDIS_URL names a server. It exits 1 when a workload's invariant does not hold.
//
//	go run ./internal/cmd/redisbench            (from redisstore/)
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/redisstore"
	"github.com/idemkit/idem/redisstore/internal/redistest"
)

const deadline = 30 * time.Second

// event is the invocation event of W1–W3, as in cmd/idem-bench.
type event struct {
	ID   string `json:"id"`
	Body string `json:"body"`
}

type response struct {
	OK bool   `json:"ok"`
	ID string `json:"id"`
}

// result is one JSON line.
type result struct {
	Name              string         `json:"name"`
	N                 int            `json:"n"`
	Unit              string         `json:"unit"`
	WallMS            float64        `json:"wall_ms"`
	P50US             float64        `json:"p50_us"`
	P99US             float64        `json:"p99_us"`
	MeanUS            float64        `json:"mean_us"`
	MaxUS             float64        `json:"max_us"`
	OpsPerS           float64        `json:"ops_per_s"`
	Commands          int64          `json:"redis_commands"`
	CommandsPerOp     float64        `json:"redis_commands_per_op"`
	CommandsByName    map[string]int `json:"redis_commands_by_name"`
	HandlerExecutions int64          `json:"handler_executions"`
	ClientCPUMS       float64        `json:"client_cpu_ms"`
	ServerCPUMS       float64        `json:"server_cpu_ms"`
	InProgressErrors  *int64         `json:"in_progress_errors,omitempty"`
	CompletedReplays  *int64         `json:"completed_replays,omitempty"`
	PerKey            *float64       `json:"handler_executions_per_key,omitempty"`
	Violations        []string       `json:"violations,omitempty"`
}

// counter counts the commands the client sends.
type counter struct {
	mu    sync.Mutex
	names map[string]int
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.names[strings.ToLower(cmd.Name())]++
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (c *counter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.names
	c.names = map[string]int{}
	return n
}

type bench struct {
	client     *redis.Client
	guard      *idem.Guard
	cnt        *counter
	executions atomic.Int64
}

func main() {
	invocations := flag.Int("n", 2000, "W1 and W2 invocations")
	rounds := flag.Int("rounds", 20, "W3 rounds")
	goroutines := flag.Int("goroutines", 50, "W3 goroutines per round")
	warmup := flag.Int("warmup", 10000, "warmup invocations on keys of their own")
	flag.Parse()
	os.Exit(run(*invocations, *rounds, *goroutines, *warmup))
}

func run(n, rounds, goroutines, warmup int) int {
	var opts *redis.Options
	if url := os.Getenv(redistest.EnvURL); url != "" {
		var err error
		if opts, err = redis.ParseURL(url); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	} else {
		srv, err := redistest.Start(context.Background())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() { _ = srv.Stop() }()
		opts = &redis.Options{Addr: srv.Addr}
	}
	opts.PoolSize = max(opts.PoolSize, goroutines)
	client := redis.NewClient(opts)
	defer client.Close()
	b := &bench{client: client, cnt: &counter{names: map[string]int{}}}
	client.AddHook(b.cnt)
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	store, err := redisstore.New(client, redisstore.WithKeyPrefix("idem-bench:"+hex.EncodeToString(suffix[:])+":"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if b.guard, err = idem.New(store, "bench", idem.WithExpiry(time.Hour), idem.WithScope("bench"), idem.WithLeaseMargin(0)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b.newKeys("warmup_new_keys", newEvents(warmup))
	b.contention("warmup_contention", 10, goroutines)
	evs := newEvents(n)
	code := 0
	for _, step := range []func() *result{
		func() *result { return b.newKeys("W1_new_keys", evs) },
		func() *result { return b.replays(evs) },
		func() *result { return b.contention("W3_contention", rounds, goroutines) },
	} {
		r := step()
		line, _ := json.Marshal(r)
		fmt.Println(string(line))
		if len(r.Violations) > 0 {
			code = 1
		}
	}
	return code
}

func newEvents(n int) []event {
	evs := make([]event, n)
	body := strings.Repeat("x", 256)
	for i := range evs {
		var b [16]byte
		_, _ = rand.Read(b[:])
		evs[i] = event{ID: hex.EncodeToString(b[:]), Body: body}
	}
	return evs
}

func (b *bench) handler(ev event) func(context.Context) (response, error) {
	return func(context.Context) (response, error) {
		b.executions.Add(1)
		return response{OK: true, ID: ev.ID}, nil
	}
}

// meter measures a region: wall time, client and server CPU, commands, executions.
type meter struct {
	b      *bench
	start  time.Time
	cpu    time.Duration
	server float64
	exec   int64
}

func (b *bench) begin() *meter {
	b.cnt.take()
	m := &meter{b: b, cpu: clientCPU(), server: serverCPU(b.client), exec: b.executions.Load()}
	m.start = time.Now()
	return m
}

func (m *meter) end(name string, lat []time.Duration) *result {
	wall := time.Since(m.start)
	cpu := clientCPU() - m.cpu
	names := m.b.cnt.take()
	server := serverCPU(m.b.client) - m.server
	delete(names, "info") // the meter's own
	var cmds int64
	for _, c := range names {
		cmds += int64(c)
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	n := len(lat)
	return &result{
		Name: name, N: n, Unit: "invocation", WallMS: ms(wall),
		P50US: us(lat[n*50/100]), P99US: us(lat[min(n*99/100, n-1)]), MeanUS: us(sum / time.Duration(n)), MaxUS: us(lat[n-1]),
		OpsPerS: round(float64(n) / wall.Seconds()), Commands: cmds, CommandsPerOp: math.Round(float64(cmds)/float64(n)*100) / 100,
		CommandsByName: names, HandlerExecutions: m.b.executions.Load() - m.exec,
		ClientCPUMS: ms(cpu), ServerCPUMS: round(server * 1000),
	}
}

func (r *result) check(ok bool, format string, args ...any) {
	if !ok {
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	}
}

// sequential runs op for each event in order, each with a fresh deadline, as one measured
// region, and returns its result with how many calls op reported as failed.
func (b *bench) sequential(name string, evs []event, op func(ctx context.Context, ev event) bool) (*result, int) {
	lat := make([]time.Duration, len(evs))
	failed := 0
	m := b.begin()
	for i, ev := range evs {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		t0 := time.Now()
		ok := op(ctx, ev)
		lat[i] = time.Since(t0)
		cancel()
		if !ok {
			failed++
		}
	}
	return m.end(name, lat), failed
}

// newKeys is W1: one sequential invocation per fresh key.
func (b *bench) newKeys(name string, evs []event) *result {
	r, failed := b.sequential(name, evs, func(ctx context.Context, ev event) bool {
		_, _, err := idem.Do(ctx, b.guard, idem.Request{Key: ev.ID}, b.handler(ev))
		return err == nil
	})
	r.check(failed == 0, "%d invocations failed", failed)
	r.check(r.HandlerExecutions == int64(len(evs)), "%d executions, want %d", r.HandlerExecutions, len(evs))
	return r
}

// replays is W2: the W1 events again, in order.
func (b *bench) replays(evs []event) *result {
	r, failed := b.sequential("W2_replays", evs, func(ctx context.Context, ev event) bool {
		res, replayed, err := idem.Do(ctx, b.guard, idem.Request{Key: ev.ID}, b.handler(ev))
		return err == nil && replayed && res.ID == ev.ID
	})
	r.check(r.HandlerExecutions == 0, "%d executions, want 0", r.HandlerExecutions)
	r.check(failed == 0, "%d replays failed or returned another key's result", failed)
	return r
}

// contention is W3: rounds of goroutines released together on one fresh key each.
func (b *bench) contention(name string, rounds, g int) *result {
	evs := newEvents(rounds)
	lat := make([]time.Duration, 0, rounds*g)
	var inProgress, replays, other atomic.Int64
	badRounds := 0
	m := b.begin()
	for _, ev := range evs {
		before := b.executions.Load()
		rl := make([]time.Duration, g)
		var ready, done sync.WaitGroup
		start := make(chan struct{})
		for i := range g {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				fn := b.handler(ev)
				ready.Done()
				<-start
				t0 := time.Now()
				res, replayed, err := idem.Do(ctx, b.guard, idem.Request{Key: ev.ID}, fn)
				rl[i] = time.Since(t0)
				switch {
				case errors.Is(err, idem.ErrInProgress):
					inProgress.Add(1)
				case err != nil || res.ID != ev.ID:
					other.Add(1)
				case replayed:
					replays.Add(1)
				}
			}()
		}
		ready.Wait()
		close(start)
		done.Wait()
		lat = append(lat, rl...)
		if b.executions.Load()-before != 1 {
			badRounds++
		}
	}
	r := m.end(name, lat)
	ip, rp := inProgress.Load(), replays.Load()
	perKey := round(float64(r.HandlerExecutions) / float64(rounds))
	r.InProgressErrors, r.CompletedReplays, r.PerKey = &ip, &rp, &perKey
	r.check(badRounds == 0, "%d keys did not run exactly once", badRounds)
	r.check(other.Load() == 0, "%d errors other than in-progress", other.Load())
	return r
}

// clientCPU is this process's user and system CPU time.
func clientCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the server's used_cpu_sys + used_cpu_user in seconds (INFO cpu).
func serverCPU(c *redis.Client) float64 {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		return 0
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return total
}

func us(d time.Duration) float64 { return round(float64(d) / float64(time.Microsecond)) }
func ms(d time.Duration) float64 { return round(float64(d) / float64(time.Millisecond)) }
func round(f float64) float64    { return math.Round(f*10) / 10 }
