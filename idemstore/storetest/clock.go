package storetest

import (
	"sync"
	"time"
)

// Clock is a settable clock safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock set to a fixed instant in the future, so a store that deletes
// expired items (DynamoDB Local applies TTL within seconds) keeps the suite's records.
func NewClock() *Clock {
	return &Clock{now: time.Date(2100, 3, 1, 12, 0, 0, 0, time.UTC)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// After waits in wall time: the suite's clock sets the time, not the waits.
func (c *Clock) After(d time.Duration) <-chan time.Time { return time.After(d) }
