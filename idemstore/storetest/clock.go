// Package storetest is the behaviour suite every idemstore.Store must pass, as
// testing/fstest.TestFS is for file systems: [Run] drives a real idem.Guard over the store
// under test through new keys, replays, failures, in-flight refusals, lease takeovers,
// checkpoints, contention (many goroutines, one key: exactly one run), large and
// incompatible records, store failures and lost responses, and, when the store supports
// them, attached writes. Every store in this repository runs it (memstore, dynamo on
// DynamoDB Local, pgstore, redisstore); a third-party store proves itself the same way:
//
//	func TestBehaviour(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			NewStore: func(t *testing.T) idemstore.Store { return mystore.New(client, t.Name()) },
//		})
//	}
//
// The guard passes its clock's time to the store (Claim's now), so the suite drives every
// store with a fake clock ([Clock]) and never sleeps for a lease to end. A store that
// deletes expired items on its own must not do so within the suite's run: [NewClock]
// starts in the year 2100.
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
