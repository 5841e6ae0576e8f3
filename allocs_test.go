//go:build !race

package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// TestAllocations pins the allocations of the guard's hot paths on the in-memory store, so
// that a change that adds one shows up as a failure rather than as noise in a benchmark.
// Time is never asserted; allocations are deterministic, but not under the race detector,
// whose sync.Pool drops items at random (the gzip and buffer pools would allocate anew), so
// this file builds without -race and `make test` runs it in a second, plain pass.
//
// The context has a deadline, as in Lambda (whose timeout is at most DefaultMaxLease), so
// the lease outlasts it by the margin and no lease watchdog runs. Without a deadline (or
// with WithMaxLease below it) a watchdog ends the handler's context at the lease end less
// the margin, at the cost of a goroutine and its context; "new key, no deadline" pins that
// path.
func TestAllocations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ok := func(context.Context) (benchResult, error) { return benchResult{OK: true, ID: "abc"}, nil }
	g, _ := idem.New(memstore.New(), "test")
	_, _, _ = idem.Do(ctx, g, idem.Request{Key: "k"}, ok)
	keys := benchKeys(400)
	i := 0
	for _, c := range []struct {
		name string
		max  float64
		run  func()
	}{
		{"replay", 13, func() { _, _, _ = idem.Do(ctx, g, idem.Request{Key: "k"}, ok) }},
		{"new key", 14, func() { _, _, _ = idem.Do(ctx, g, idem.Request{Key: keys[i]}, ok); i++ }},
		{"new key, no deadline", 27, func() { _, _, _ = idem.Do(context.Background(), g, idem.Request{Key: keys[i]}, ok); i++ }},
	} {
		if got := testing.AllocsPerRun(100, c.run); got > c.max {
			t.Errorf("%s: %.0f allocations per call, want at most %.0f", c.name, got, c.max)
		}
	}
}
