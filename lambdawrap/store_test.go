package lambdawrap_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// storeCase names a Store the behaviour tests run against.
type storeCase struct {
	name     string
	newStore func(t testing.TB) idem.Store
}

// stores returns the stores every behaviour test runs against.
func stores(t testing.TB) []storeCase {
	t.Helper()
	return []storeCase{
		{name: "mem", newStore: func(testing.TB) idem.Store { return idem.NewMemStore() }},
	}
}

// newGuard returns a guard over a fresh store of st.
func newGuard(t testing.TB, st storeCase, opts ...idem.Option) *idem.Guard {
	t.Helper()
	g, err := idem.New(st.newStore(t), append([]idem.Option{idem.WithScope("lambdawrap-test")}, opts...)...)
	require.NoError(t, err)
	return g
}

// failingStore fails every operation, as an unreachable DynamoDB would.
type failingStore struct{}

var errUnavailable = errors.New("store: connection refused")

func (failingStore) Claim(context.Context, *idem.Record, time.Time) (*idem.Record, bool, error) {
	return nil, false, errUnavailable
}
func (failingStore) Get(context.Context, string) (*idem.Record, error)       { return nil, errUnavailable }
func (failingStore) Complete(context.Context, *idem.Record, []any) error     { return errUnavailable }
func (failingStore) Release(context.Context, string, string) error           { return errUnavailable }
func (failingStore) Extend(context.Context, string, string, time.Time) error { return errUnavailable }
func (failingStore) SetCheckpoint(context.Context, string, string, string) error {
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
