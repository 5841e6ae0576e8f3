package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// The suite's clocks: each is an idem.Clock whose time the test sets, safe for concurrent
// use. Their names say how they wait:
//   - [SettableClock]: the test sets the time; After waits in wall time.
//   - [SimulatedClock]: the test moves time and timers; After fires when it does.
//   - [SkewedClock]: another clock's time, shifted: a caller whose clock runs ahead or
//     behind. It waits as that clock does.
//
// [Clock] and [ManualClock] are their earlier names.

// start is the instant the clocks start at: in the future, so that a store that deletes
// expired items (DynamoDB Local applies TTL within seconds) keeps the suite's records.
func start() time.Time { return time.Date(2100, 3, 1, 12, 0, 0, 0, time.UTC) }

// SettableClock is a clock whose time the test sets; its After waits in wall time.
type SettableClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewSettableClock returns a clock set to a fixed instant in 2100. A store that deletes
// expired items (DynamoDB Local applies TTL within seconds) then keeps the suite's records.
func NewSettableClock() *SettableClock { return &SettableClock{now: start()} }

// Now returns the clock's time.
func (c *SettableClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *SettableClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set sets the clock to t.
func (c *SettableClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// After returns time.After(d): the clock sets the time, not the waits.
func (c *SettableClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// SkewedClock is the clock of a caller whose clock runs ahead of Base (a positive Offset)
// or behind it (a negative one). Its After waits as Base's does.
type SkewedClock struct {
	Base   idem.Clock
	Offset time.Duration
}

// Now returns Base's time plus Offset.
func (c SkewedClock) Now() time.Time { return c.Base.Now().Add(c.Offset) }

// After returns Base.After(d).
func (c SkewedClock) After(d time.Duration) <-chan time.Time { return c.Base.After(d) }

// Clock is the earlier name of [SettableClock], kept for the tests that still use it.
type Clock = SettableClock

// NewClock returns [NewSettableClock]().
func NewClock() *Clock { return NewSettableClock() }

// ManualClock is the earlier name of [SimulatedClock], kept for the tests that still use
// it.
type ManualClock = SimulatedClock

// NewManualClock returns [NewSimulatedClock]().
func NewManualClock() *ManualClock { return NewSimulatedClock() }

// SimulatedClock is a clock whose time and timers move only when the test advances it.
// The channels its After returns fire when the test moves the clock past them. So
// heartbeats, waits and deadline timers run in simulated time. It is safe for concurrent
// use.
type SimulatedClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []simulatedTimer // pending, in no order
	calls   int              // After calls so far
	changed chan struct{}    // closed, and replaced, by every After call
}

type simulatedTimer struct {
	at time.Time
	ch chan time.Time
}

// NewSimulatedClock returns a clock set to the instant of [NewSettableClock].
func NewSimulatedClock() *SimulatedClock {
	return &SimulatedClock{now: start(), changed: make(chan struct{})}
}

// Now returns the clock's time.
func (c *SimulatedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the clock's time once the clock has been advanced
// by d; at once if d is not positive.
func (c *SimulatedClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
	} else {
		c.timers = append(c.timers, simulatedTimer{at: c.now.Add(d), ch: ch})
	}
	c.calls++
	close(c.changed)
	c.changed = make(chan struct{})
	return ch
}

// WaitAfterCalls waits until After has been called n times in all, so a test knows that
// the goroutine it drives waits on the clock. It returns false if ctx ends first.
func (c *SimulatedClock) WaitAfterCalls(ctx context.Context, n int) bool {
	for {
		c.mu.Lock()
		calls, changed := c.calls, c.changed
		c.mu.Unlock()
		if calls >= n {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// Advance moves the clock forward by d and fires, in order, the timers due by then.
func (c *SimulatedClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	slices.SortStableFunc(c.timers, func(a, b simulatedTimer) int { return a.at.Compare(b.at) })
	fired := 0
	for _, t := range c.timers {
		if t.at.After(c.now) {
			break
		}
		t.ch <- c.now
		fired++
	}
	c.timers = c.timers[fired:]
}

// AdvanceToNext waits until a timer is pending, then moves the clock to the earliest one,
// firing it and any due at the same instant. It returns false if ctx ends first.
func (c *SimulatedClock) AdvanceToNext(ctx context.Context) bool {
	for {
		c.mu.Lock()
		if len(c.timers) > 0 {
			next := c.timers[0].at
			for _, t := range c.timers[1:] {
				if t.at.Before(next) {
					next = t.at
				}
			}
			d := next.Sub(c.now)
			c.mu.Unlock()
			c.Advance(d)
			return true
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// DriveHeartbeat drives a guard's heartbeat on c in simulated time, from inside the
// guarded handler whose context is ctx. Until ctx ends or maxSteps attempts have been
// made, it:
//
//   - waits until the heartbeat waits on the clock;
//   - moves the clock to its timer;
//   - waits for the extension attempt that may start then (each attempt must be reported
//     on attempts, with its error);
//   - runs check, if set.
//
// It returns the simulated time at which ctx ended, or the zero time if it did not.
//
// The heartbeat calls the clock's After once when it starts and twice per extension (once
// while the extension is in flight, once after its outcome). The clock is moved only once
// all of them have been made, so that no timer is set relative to a time already passed.
// Both timers of an extension must be set for the next beat. That holds while the next
// beat comes before the lease's point of loss (as [idem.New] requires without a deadline):
// a timer nobody waits for any more would stop the drive.
func (c *SimulatedClock) DriveHeartbeat(t testing.TB, ctx context.Context, attempts <-chan error, maxSteps int, check func(err error)) time.Time {
	t.Helper()
	// A hung test, not a timing.
	wait, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	calls := 1
	for range maxSteps {
		if ctx.Err() != nil {
			return c.Now()
		}
		require.True(t, c.WaitAfterCalls(wait, calls), "the heartbeat does not wait on the clock")
		require.True(t, c.AdvanceToNext(wait), "the heartbeat set no timer")
		select {
		case err := <-attempts:
			calls += 2
			if check != nil {
				check(err)
			}
		case <-ctx.Done():
			return c.Now()
		case <-wait.Done():
			require.Fail(t, "no extension and no cancellation after the clock moved")
		}
	}
	return time.Time{}
}
