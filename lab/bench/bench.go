package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/sqs"
)

// Settings of BENCHMARKS.md: the deadline set on every invocation's context (as the Lambda
// runtime would) makes the lease, and records are kept for Expiry.
const (
	Deadline  = 30 * time.Second
	Expiry    = time.Hour
	Operation = "bench"
	Scope     = "bench"
	// W3Goroutines is W3's goroutines per key, at every size.
	W3Goroutines = 50
	// BatchSize is the messages per SQS batch, at every size.
	BatchSize = 10
)

// Counts are the sizes of the workloads.
type Counts struct {
	WarmupInvocations, WarmupW3Rounds, WarmupW4Batches int
	Invocations                                        int // W1, W2, and X1, X2 on DynamoDB
	W3Rounds, W4Batches, W4bBatches                    int
	// The stream workloads (Config.Streams): warmup batches, W5/W5b/W6/W6b batches, W5c's.
	WarmupW5Batches, W5Batches, W5cBatches int
}

// Spec returns the sizes of BENCHMARKS.md; any other makes the figures incomparable.
func Spec() Counts {
	return Counts{WarmupInvocations: 10000, WarmupW3Rounds: 10, WarmupW4Batches: 100, Invocations: 2000,
		W3Rounds: 20, W4Batches: 200, W4bBatches: 50, WarmupW5Batches: 100, W5Batches: 50, W5cBatches: 20}
}

// Short returns a tenth of [Spec], to check that the benchmark runs.
func Short() Counts {
	return Counts{WarmupInvocations: 1000, WarmupW3Rounds: 2, WarmupW4Batches: 10, Invocations: 200,
		W3Rounds: 2, W4Batches: 20, W4bBatches: 5, WarmupW5Batches: 10, W5Batches: 5, W5cBatches: 2}
}

// Config says how a [Bench] runs.
type Config struct {
	// Store and Mode name the store (and its client's mode) in every line.
	Store, Mode string
	Counts      Counts
	// SQS adds W4 and W4b (and their warmup) after W3, with sqs.WithBatchClaims set to
	// BatchClaims.
	SQS, BatchClaims bool
	// Streams adds the stream workloads W5 to W6b (and their warmup) after the others.
	Streams bool
	// CPUShare is printed in every line when not 0 (the caller confines the process).
	CPUShare float64
}

// Bench holds what every workload shares: one guard over the store, one SQS handler, one
// meter.
type Bench struct {
	cfg Config
	// Guard is the guard of every workload: operation and scope "bench", records kept for
	// [Expiry], no cache, no payload validation, the lease to each context's deadline
	// without margin.
	Guard      *idem.Guard
	m          *Meter
	sqs        *sqs.Handler
	streams    *streams
	executions atomic.Int64
}

// New returns a bench over store, measured by m.
func New(store idemstore.Store, m *Meter, cfg Config) (*Bench, error) {
	b := &Bench{cfg: cfg, m: m}
	var err error
	if b.Guard, err = idem.New(store, Operation, idem.WithExpiry(Expiry), idem.WithScope(Scope), idem.WithLeaseMargin(0)); err != nil {
		return nil, err
	}
	if cfg.SQS {
		noValidation := func(events.SQSMessage) ([]byte, error) { return nil, nil }
		if b.sqs, err = sqs.New(b.Guard, b.handleMessage, sqs.WithFingerprint(noValidation), sqs.WithBatchClaims(cfg.BatchClaims)); err != nil {
			return nil, err
		}
	}
	if cfg.Streams {
		if err := b.newStreams(); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Counts returns the sizes the bench runs.
func (b *Bench) Counts() Counts { return b.cfg.Counts }

// Step is one workload: it runs and returns its result.
type Step func() *Result

// Warmup runs the warmup on keys of its own: it settles a JVM, a server's caches and the
// client's connections. It returns an error when a warmup workload's condition fails.
func (b *Bench) Warmup() error {
	runtime.GC()
	c := b.cfg.Counts
	steps := []Step{
		func() *Result { return b.NewKeys("warmup_new_keys", NewEvents(c.WarmupInvocations)) },
		func() *Result { return b.Contention("warmup_contention", c.WarmupW3Rounds) },
	}
	if b.cfg.SQS {
		steps = append(steps, func() *Result { return b.SQSBatches("warmup_sqs_batch", c.WarmupW4Batches) })
	}
	if b.cfg.Streams {
		steps = append(steps, func() *Result {
			h := b.streamHandle(true, true, c.WarmupW5Batches)
			return b.streamRun("warmup_kinesis_batch", c.WarmupW5Batches, h, int64(c.WarmupW5Batches*StreamBatchSize))
		})
	}
	for _, step := range steps {
		if r := step(); len(r.Violations) > 0 {
			return fmt.Errorf("bench: warmup: %s: %v", r.Name, r.Violations)
		}
	}
	return nil
}

// Workloads returns W1, W2 and W3, then W4 and W4b with Config.SQS, then W5 to W6b with
// Config.Streams, in the order of BENCHMARKS.md; W2 replays W1's events.
func (b *Bench) Workloads() []Step {
	c := b.cfg.Counts
	evs := NewEvents(c.Invocations)
	steps := []Step{
		func() *Result { return b.NewKeys("W1_new_keys", evs) },
		func() *Result { return b.Replays(evs) },
		func() *Result { return b.Contention("W3_contention", c.W3Rounds) },
	}
	if b.cfg.SQS {
		steps = append(steps,
			func() *Result { return b.SQSBatches("W4_sqs_batch", c.W4Batches) },
			func() *Result { return b.SQSInProgress(c.W4bBatches) })
	}
	if b.cfg.Streams {
		steps = append(steps, b.streamSteps()...)
	}
	return steps
}

// Print runs steps in order, with runtime.GC() before each, and writes each result as a
// JSON line to stdout and each failed condition to stderr. It returns 1 when a condition
// failed or a line could not be written, else 0.
func (b *Bench) Print(stdout, stderr io.Writer, steps ...Step) int {
	code := 0
	enc := json.NewEncoder(stdout)
	for _, step := range steps {
		runtime.GC()
		r := step()
		// A failed write to stderr has nowhere else to go; the exit code still says 1.
		if err := enc.Encode(r); err != nil {
			_, _ = fmt.Fprintln(stderr, err)
			code = 1
		}
		for _, v := range r.Violations {
			_, _ = fmt.Fprintf(stderr, "bench: %s on %s: must hold: %s\n", r.Name, b.cfg.Store, v)
			code = 1
		}
	}
	return code
}

// Sequential runs op for i in [0, n), one after another, each with a fresh deadline on its
// context, as one measured region; op reports whether its call went as the workload wants.
// It returns the region's result (without checks) and how many calls did not.
func (b *Bench) Sequential(name, unit string, n int, op func(ctx context.Context, i int) bool) (*Result, int) {
	lat := make([]time.Duration, n)
	failed := 0
	exec0 := b.executions.Load()
	b.m.reset()
	b.m.begin()
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), Deadline)
		start := time.Now()
		ok := op(ctx, i)
		lat[i] = time.Since(start)
		cancel()
		if !ok {
			failed++
		}
	}
	b.m.end()
	return b.result(name, unit, lat, b.executions.Load()-exec0), failed
}

// Concurrent runs op for i in [0, n) on workers goroutines, each taking the next i until
// none is left, each call with a fresh deadline on its context, as one measured region:
// ops_per_s is then the throughput of workers callers. op reports whether its call went
// as the workload wants, and must be safe for concurrent use. It returns the region's
// result (without checks) and how many calls did not.
func (b *Bench) Concurrent(name, unit string, n, workers int, op func(ctx context.Context, i int) bool) (*Result, int) {
	lat := make([]time.Duration, n)
	var next, failed atomic.Int64
	exec0 := b.executions.Load()
	b.m.reset()
	b.m.begin()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), Deadline)
				start := time.Now()
				ok := op(ctx, i)
				lat[i] = time.Since(start)
				cancel()
				if !ok {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	b.m.end()
	return b.result(name, unit, lat, b.executions.Load()-exec0), int(failed.Load())
}

// result is the meter's result, labelled with the store.
func (b *Bench) result(name, unit string, lat []time.Duration, executions int64) *Result {
	r := b.m.result(name, unit, lat, executions)
	r.Store, r.Mode, r.CPUShare = b.cfg.Store, b.cfg.Mode, b.cfg.CPUShare
	return r
}

// body is the payload of every event and message: 256 × 'x'.
var body = strings.Repeat("x", 256)

// Event is the invocation event of W1–W3.
type Event struct {
	ID   string `json:"id"`
	Body string `json:"body"`
}

// Response is what the handler returns, and a replay hands back.
type Response struct {
	OK bool   `json:"ok"`
	ID string `json:"id"`
}

// NewEvents returns n events on fresh keys (random UUIDs), each with the 256-byte body.
func NewEvents(n int) []Event {
	evs := make([]Event, n)
	for i := range evs {
		evs[i] = Event{ID: UUID4(), Body: body}
	}
	return evs
}

// handler is the guarded function of W1–W3: no I/O, no sleep.
func (b *Bench) handler(ev Event) func(context.Context) (Response, error) {
	return func(context.Context) (Response, error) {
		b.executions.Add(1)
		return Response{OK: true, ID: ev.ID}, nil
	}
}

func (b *Bench) handleMessage(context.Context, events.SQSMessage) error {
	b.executions.Add(1)
	return nil
}

// Token returns 16 random bytes in hex, the form of the guard's lease tokens.
func Token() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// UUID4 returns a random (version 4) UUID in its canonical form.
func UUID4() string {
	h := []byte(Token())
	h[12], h[16] = '4', "89ab"[h[16]%4]
	return string(h[0:8]) + "-" + string(h[8:12]) + "-" + string(h[12:16]) + "-" + string(h[16:20]) + "-" + string(h[20:32])
}
