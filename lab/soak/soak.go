// Package soak drives a guard on DynamoDB hard, with faults, and checks from the table and a
// side-effect log that nothing ran twice under one lease and nothing was lost. Its test
// runs a short version in `make test` and the full size in `make soak`.
package soak

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/internal/ddbfault"
)

// Config sizes a run. Every field must be positive except the rates.
type Config struct {
	Invocations int           // calls of idem.Do in all
	Keys        int           // distinct idempotency keys
	Workers     int           // goroutines calling at once
	MaxDuration time.Duration // the run stops by itself after this, whatever is left
	FaultRate   float64       // chance that a DynamoDB call fails (any step, any fault)
	ErrorRate   float64       // chance that a handler run fails
	Deadline    time.Duration // each invocation's context deadline, which sets its lease
	LeaseMargin time.Duration
	Seed        uint64
}

// Report holds a run's figures and the invariant violations found; a good run has none.
type Report struct {
	Invocations    int
	Elapsed        time.Duration
	Executions     int // handler runs
	Claims         int // leases granted (OnClaimed)
	Fresh          int // results computed and stored
	Replays        int
	InProgress     int // refused: the key was in flight
	HandlerErrors  int
	StoreErrors    int
	LeaseLost      int
	FaultsInjected int
	MaxRunsPerKey  int
	KeysTouched    int
	ExpiredLeases  int // in-progress records found past their lease after the run, before settling
	Settled        int // keys run to completion in the settling pass
	CompletedKeys  int
	StuckKeys      int // still not completed after settling: must be 0
	Violations     []string
}

func (r Report) String() string {
	return fmt.Sprintf("invocations=%d elapsed=%s executions=%d leases=%d fresh=%d replays=%d in-progress=%d "+
		"handler-errors=%d store-errors=%d lease-lost=%d faults-injected=%d max-runs-per-key=%d "+
		"keys=%d expired-leases-before-settle=%d settled=%d completed-keys=%d stuck-keys=%d violations=%d",
		r.Invocations, r.Elapsed.Round(time.Millisecond), r.Executions, r.Claims, r.Fresh, r.Replays, r.InProgress,
		r.HandlerErrors, r.StoreErrors, r.LeaseLost, r.FaultsInjected, r.MaxRunsPerKey,
		r.KeysTouched, r.ExpiredLeases, r.Settled, r.CompletedKeys, r.StuckKeys, len(r.Violations))
}

var errHandler = errors.New("soak: handler failed")

// keyState is the side-effect log of one key.
type keyState struct {
	mu       sync.Mutex
	live     int    // runs in progress now
	runs     int    // runs in all
	claims   int    // leases granted
	result   string // the stored result, once a caller saw it
	resultAt int    // runs when it was seen
}

type run struct {
	cfg    Config
	keys   []*keyState
	guard  *idem.Guard
	ids    map[string]int // stored key → index in keys
	report Report

	mu         sync.Mutex // guards report counters and violations
	violations []string
}

func (r *run) violate(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.violations) < 50 {
		r.violations = append(r.violations, fmt.Sprintf(format, args...))
	}
}

// Run soaks a guard on table through client: cfg.Invocations calls from cfg.Workers
// goroutines over cfg.Keys keys, with faults, then settles every key and checks the
// invariants. It returns an error only when it cannot run; violations are in the report.
func Run(ctx context.Context, client *dynamodb.Client, table string, cfg Config) (Report, error) {
	faulty := ddbfault.New(client)
	store, err := dynamo.New(faulty, table)
	if err != nil {
		return Report{}, err
	}
	r := &run{cfg: cfg, keys: make([]*keyState, cfg.Keys)}
	for i := range r.keys {
		r.keys[i] = &keyState{}
	}
	hooks := idem.Hooks{OnClaimed: func(_ context.Context, e idem.Event) {
		if k := r.stateOf(e.Key); k != nil {
			k.mu.Lock()
			k.claims++
			k.mu.Unlock()
		}
	}}
	g, err := idem.New(store, "soak", idem.WithScope("soak"), idem.WithLeaseMargin(cfg.LeaseMargin), idem.WithHooks(hooks))
	if err != nil {
		return Report{}, err
	}
	r.guard = g
	ids, err := r.storedKeys()
	if err != nil {
		return Report{}, err
	}
	r.ids = ids

	start := time.Now()
	faulty.Random(cfg.FaultRate, cfg.Seed)
	r.load(ctx)
	faulty.Disarm()
	r.report.Elapsed = time.Since(start)
	r.report.FaultsInjected = faulty.InjectedTotal()

	if err := r.check(ctx, client, store, table); err != nil {
		return r.report, err
	}
	r.report.Violations = r.violations
	return r.report, nil
}
