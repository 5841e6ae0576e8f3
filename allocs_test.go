//go:build !race

package idem_test

import (
	"context"
	"testing"

	"github.com/idemkit/idem"
)

// TestAllocations pins the allocations of the guard's hot paths on the in-memory store, so
// that a change that adds one shows up as a failure rather than as noise in a benchmark.
// Time is never asserted; allocations are deterministic, but not under the race detector,
// whose sync.Pool drops items at random (the gzip and buffer pools would allocate anew), so
// this file builds without -race and `make test` runs it in a second, plain pass.
func TestAllocations(t *testing.T) {
	ctx := context.Background()
	ok := func(context.Context) (benchResult, error) { return benchResult{OK: true, ID: "abc"}, nil }
	g, _ := idem.New(idem.NewMemStore(), "test")
	_, _, _ = idem.Do(ctx, g, idem.Request{Key: "k"}, ok)
	keys := benchKeys(200)
	i := 0
	for _, c := range []struct {
		name string
		max  float64
		run  func()
	}{
		{"replay", 13, func() { _, _, _ = idem.Do(ctx, g, idem.Request{Key: "k"}, ok) }},
		{"new key", 14, func() { _, _, _ = idem.Do(ctx, g, idem.Request{Key: keys[i]}, ok); i++ }},
	} {
		if got := testing.AllocsPerRun(100, c.run); got > c.max {
			t.Errorf("%s: %.0f allocations per call, want at most %.0f", c.name, got, c.max)
		}
	}
}
