package idem

import "time"

// Clock is the time source of a [Guard]: the current time, and timers for the waits the
// guard makes (heartbeats, polling an in-flight key). Implementations must be safe for
// concurrent use. The default reads the system clock.
//
// A test clock sets both: a fake Now with real timers ([ClockFunc]) keeps every wait in
// wall time, while a simulated clock whose After fires when the test moves time on makes
// leases, heartbeats and waits run in simulated time.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives once d has passed on this clock. A d of zero or
	// less fires at once.
	After(d time.Duration) <-chan time.Time
}

// ClockFunc is a [Clock] that reads the time from the function and waits in wall time
// (time.After), for tests that set the time but not the waits.
type ClockFunc func() time.Time

// Now returns f().
func (f ClockFunc) Now() time.Time { return f() }

// After returns time.After(d).
func (f ClockFunc) After(d time.Duration) <-chan time.Time { return time.After(d) }

// systemClock is the default [Clock].
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
