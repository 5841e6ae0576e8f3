package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ManualClock is a simulated idem.Clock: its time moves only when the test advances it,
// and the channels its After returns fire when it does, so heartbeats, waits and deadline
// timers run in simulated time. It is safe for concurrent use.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []manualTimer // pending, in no order
	calls   int           // After calls so far
	changed chan struct{} // closed, and replaced, by every After call
}

type manualTimer struct {
	at time.Time
	ch chan time.Time
}

// NewManualClock returns a clock set to the instant of [NewClock].
func NewManualClock() *ManualClock {
	return &ManualClock{now: NewClock().Now(), changed: make(chan struct{})}
}

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the clock's time once the clock has been advanced
// by d; at once if d is not positive.
func (c *ManualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
	} else {
		c.timers = append(c.timers, manualTimer{at: c.now.Add(d), ch: ch})
	}
	c.calls++
	close(c.changed)
	c.changed = make(chan struct{})
	return ch
}

// WaitAfterCalls waits until After has been called n times in all, so a test knows that
// the goroutine it drives waits on the clock. It returns false if ctx ends first.
func (c *ManualClock) WaitAfterCalls(ctx context.Context, n int) bool {
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
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	slices.SortStableFunc(c.timers, func(a, b manualTimer) int { return a.at.Compare(b.at) })
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
func (c *ManualClock) AdvanceToNext(ctx context.Context) bool {
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
// guarded handler whose context is ctx: it waits until the heartbeat waits on the clock,
// moves the clock to its timer, waits for the extension attempt that may start then (each
// attempt must be reported on attempts, with its error), and goes on until ctx ends or
// maxSteps attempts have been made. check, if set, runs after every attempt. It returns the
// simulated time at which ctx ended, or the zero time if it did not.
//
// The heartbeat calls the clock's After once when it starts and twice per extension (once
// while the extension is in flight, once after its outcome): the clock is moved only once
// all of them have been made, so that no timer is set relative to a time already passed.
// Both timers of an extension must be set for the next beat, which holds while the next
// beat comes before the lease's point of loss (as [idem.New] requires without a deadline):
// a timer nobody waits for any more would stop the drive.
func (c *ManualClock) DriveHeartbeat(t testing.TB, ctx context.Context, attempts <-chan error, maxSteps int, check func(err error)) time.Time {
	t.Helper()
	wait, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hung test, not a timing
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
