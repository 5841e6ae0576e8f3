package sqs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqs"
)

// backend is an idempotency store the scenarios run against, with a ledger whose credits
// commit with the completion: the in-memory store, and DynamoDB Local (skipped under -short).
type backend struct {
	name string
	// open returns a fresh store and a ledger beside it.
	open func(t *testing.T) (idemstore.Store, ledger)
	// opts come before a scenario's own handler options: the path under test.
	opts []sqs.Option
}

// ledger holds account balances. credit attaches a message's credit to the completion of
// its key, so it is applied exactly when the completion commits; the write itself is not
// idempotent.
type ledger interface {
	credit(ctx context.Context, m events.SQSMessage) error
	balance(t testing.TB, account string) int
}

func memBackend() backend {
	return backend{name: "mem", open: func(*testing.T) (idemstore.Store, ledger) {
		return memstore.New(), &memLedger{balances: map[string]int{}}
	}}
}

// memLedger keeps balances in a map; its credit runs under the memory store's lock when the
// completion commits.
type memLedger struct {
	mu       sync.Mutex
	balances map[string]int
}

func (l *memLedger) credit(ctx context.Context, m events.SQSMessage) error {
	c, err := parseCredit(m)
	if err != nil {
		return err
	}
	return idem.Attach(ctx, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.balances[c.Account] += c.Cents
		return nil
	})
}

func (l *memLedger) balance(_ testing.TB, account string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.balances[account]
}

// creditMsg is the body of the test messages.
type creditMsg struct {
	Account string `json:"account_id"`
	Cents   int    `json:"amount_cents"`
}

func parseCredit(m events.SQSMessage) (creditMsg, error) {
	var c creditMsg
	if err := json.Unmarshal([]byte(m.Body), &c); err != nil {
		return c, fmt.Errorf("credit: message %s: %w", m.MessageId, err)
	}
	return c, nil
}

// expectedBalances credits each distinct key of the events once.
func expectedBalances(t testing.TB, evs ...events.SQSEvent) map[string]int {
	t.Helper()
	seen := map[string]bool{}
	want := map[string]int{}
	for _, ev := range evs {
		for _, m := range ev.Records {
			key, err := sqs.DefaultKey(m)
			require.NoError(t, err)
			if seen[key] {
				continue
			}
			seen[key] = true
			c, err := parseCredit(m)
			require.NoError(t, err)
			want[c.Account] += c.Cents
		}
	}
	return want
}

// env is one scenario's world: a store, a ledger, a recording handler and the sqs.Handler
// around it.
type env struct {
	store   idemstore.Store
	ledger  ledger
	rec     *recorder
	guard   *idem.Guard
	h       *sqs.Handler
	reports *reports
	opts    []sqs.Option // the backend's
}

// newEnv builds an env on b. The recorder credits the ledger on every run.
func newEnv(t *testing.T, b backend, opts ...sqs.Option) *env {
	t.Helper()
	store, l := b.open(t)
	e := &env{store: store, ledger: l, rec: newRecorder(), reports: &reports{}, opts: b.opts}
	e.rec.effect = l.credit
	e.guard = e.newGuard(t)
	e.h = e.newHandler(t, e.guard, opts...)
	return e
}

// newGuard returns another guard on the env's store, with opts: another Lambda container.
// Its hooks collect the batch reports of its handlers in e.reports.
func (e *env) newGuard(t *testing.T, opts ...idem.Option) *idem.Guard {
	t.Helper()
	base := []idem.Option{idem.WithScope("ledger-credits"), idem.WithHooks(e.reports.hooks())}
	g, err := idem.New(e.store, "test", append(base, opts...)...)
	require.NoError(t, err)
	return g
}

func (e *env) newHandler(t *testing.T, g *idem.Guard, opts ...sqs.Option) *sqs.Handler {
	t.Helper()
	opts = append(slices.Clone(e.opts), opts...)
	h, err := sqs.New(g, e.rec.handle, opts...)
	require.NoError(t, err)
	return h
}

// claimInFlight makes another invocation claim message m's key and hold it, running the
// same handler, until the returned finish is called; finish waits for its completion.
func (e *env) claimInFlight(t *testing.T, m events.SQSMessage) (finish func()) {
	t.Helper()
	key, err := sqs.DefaultKey(m)
	require.NoError(t, err)
	g := e.newGuard(t)
	ctx, cancel := context.WithCancel(context.Background())
	claimed, unblock, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, _, err := idem.Do(ctx, g, idem.Request{Key: key, Fingerprint: []byte(m.Body)}, func(ctx context.Context) (struct{}, error) {
			close(claimed)
			select {
			case <-unblock:
			case <-ctx.Done():
				return struct{}{}, ctx.Err()
			}
			return struct{}{}, e.rec.handle(ctx, m)
		})
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("owner of message %s: %v", m.MessageId, err)
		}
	})
	select {
	case <-claimed:
	case err := <-done:
		t.Fatalf("owner of message %s did not claim: %v", m.MessageId, err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			close(unblock)
			require.NoError(t, <-done)
			done <- nil // for the cleanup
		})
	}
}

// backends lists the backends every scenario runs on: each store on both paths, batch
// claims and per-message calls. The scenarios passing on both is what shows the batch path
// keeps the per-message semantics.
func backends() []backend {
	var all []backend
	for _, b := range []backend{memBackend(), ddbBackend()} {
		for _, batch := range []bool{true, false} {
			p := b
			p.name = fmt.Sprintf("%s/batch=%t", b.name, batch)
			p.opts = []sqs.Option{sqs.WithBatchClaims(batch)}
			all = append(all, p)
		}
	}
	return all
}

// forEachBackend runs test in parallel subtests, one per backend, each in a fresh env.
func forEachBackend(t *testing.T, test func(t *testing.T, e *env), opts ...sqs.Option) {
	t.Helper()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, newEnv(t, b, opts...))
		})
	}
}
