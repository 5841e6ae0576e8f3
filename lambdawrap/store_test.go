package lambdawrap_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/samtables"
	"github.com/idemkit/idem/memstore"
)

// storeCase names a Store the behaviour tests run against.
type storeCase struct {
	name string
	// open returns a fresh store that lasts until t ends.
	open func(t *testing.T) idemstore.Store
}

// stores are the in-memory store and the DynamoDB store on DynamoDB Local, with the
// idempotency table of infra/template.yaml (skipped under -short).
func stores() []storeCase {
	return []storeCase{
		{name: "mem", open: func(*testing.T) idemstore.Store { return memstore.New() }},
		{name: "dynamodb", open: func(t *testing.T) idemstore.Store {
			client := ddblocal.Client(t)
			table := samtables.NewTables(t, client, "IdempotencyTable")["IdempotencyTable"]
			store, err := dynamo.New(client, table)
			require.NoError(t, err)
			return store
		}},
	}
}

// forEachStore runs test in a parallel subtest per store. The subtests of test share the
// store (one table), so each guard gets its own scope (see newGuard).
func forEachStore(t *testing.T, test func(t *testing.T, store idemstore.Store)) {
	for _, st := range stores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			test(t, st.open(t))
		})
	}
}

// newGuard returns a guard over store, scoped by the test's name so tests sharing a store
// never share a key.
func newGuard(t testing.TB, store idemstore.Store, opts ...idem.Option) *idem.Guard {
	t.Helper()
	g, err := idem.New(store, "test", append([]idem.Option{idem.WithScope(testScope(t.Name()))}, opts...)...)
	require.NoError(t, err)
	return g
}

// testScope turns a test's name into a scope of its own, as idem.WithScope accepts one: a
// test name may hold '#' (fuzz seeds, repeated subtest names), which becomes '~', and one
// longer than idem.MaxScopeLength ends in a hash of the whole name instead.
func testScope(name string) string {
	scope := strings.ReplaceAll(name, "#", "~")
	if len(scope) > idem.MaxScopeLength {
		sum := sha256.Sum256([]byte(name))
		scope = scope[:idem.MaxScopeLength-17] + "~" + hex.EncodeToString(sum[:8])
	}
	return scope
}

// memGuard returns a guard over a fresh in-memory store.
func memGuard(t testing.TB, opts ...idem.Option) *idem.Guard {
	t.Helper()
	return newGuard(t, memstore.New(), opts...)
}

// failingStore fails every operation, as an unreachable DynamoDB would.
type failingStore struct{}

var errUnavailable = errors.New("store: connection refused")

func (failingStore) Claim(context.Context, *idemstore.Record, time.Time) (*idemstore.Record, bool, error) {
	return nil, false, errUnavailable
}
func (failingStore) Get(context.Context, string) (*idemstore.Record, error) {
	return nil, errUnavailable
}
func (failingStore) Complete(context.Context, *idemstore.Record, []any) error { return errUnavailable }
func (failingStore) Release(context.Context, string, string, time.Time) error { return errUnavailable }
func (failingStore) Extend(context.Context, string, string, time.Time) error  { return errUnavailable }
func (failingStore) SetCheckpoint(context.Context, string, string, string, int64) error {
	return errUnavailable
}

// clock is a settable clock for the guard, starting at the real time so that stores which
// look at the wall clock (DynamoDB TTL) agree with it.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Now().Truncate(time.Second)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// deadlineCtx reports a deadline on the tests' clock without ever expiring in real time,
// as the deadline of a Lambda invocation looks to a guard driven by a fake clock.
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func withDeadline(parent context.Context, d time.Time) context.Context {
	return deadlineCtx{Context: parent, deadline: d}
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// After waits in wall time: the test clock sets the time, not the waits.
func (c *clock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// completeFailStore is a working store whose first completions fail with err, as a
// DynamoDB that stops answering after the claim, or a cancelled transaction, would.
type completeFailStore struct {
	idemstore.Store
	err   error
	fails atomic.Int64 // completions left to fail
}

func newCompleteFailStore(store idemstore.Store, err error, fails int64) *completeFailStore {
	s := &completeFailStore{Store: store, err: err}
	s.fails.Store(fails)
	return s
}

func (s *completeFailStore) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	if s.fails.Add(-1) >= 0 {
		return s.err
	}
	return s.Store.Complete(ctx, rec, attached)
}

// unreadableStore fails every completion and every read: the outcome of a completion
// cannot be learnt.
type unreadableStore struct{ *completeFailStore }

func (s unreadableStore) Get(context.Context, string) (*idemstore.Record, error) {
	return nil, errUnavailable
}
