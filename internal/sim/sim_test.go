package sim_test

import (
	"flag"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/sim"
)

var (
	flagSeed     = flag.Uint64("sim.seed", 0, "replay this one seed verbosely")
	flagN        = flag.Int("sim.n", 0, "how many schedules TestSimulation runs (default: 3000, 300 with -short)")
	flagFeatures = flag.String("sim.features", "all", "the features schedules may use (see sim.ParseFeatures)")
	flagList     = flag.Bool("sim.list", false, "log every violation on one line with its seed")
	flagStrict   = flag.Bool("sim.strict", false, "fail TestSimulation on violations (the default only reports them until the known bugs are fixed)")
)

// schedules returns how many schedules TestSimulation runs.
func schedules(t *testing.T) int {
	if *flagN > 0 {
		return *flagN
	}
	if s := os.Getenv("IDEM_SIM_SCHEDULES"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "IDEM_SIM_SCHEDULES")
		return n
	}
	if testing.Short() {
		return 300
	}
	return 3000
}

func features(t *testing.T) sim.Features {
	f, err := sim.ParseFeatures(*flagFeatures)
	require.NoError(t, err)
	return f
}

// TestSimulation runs consecutive seeds and reports every violation with its seed and
// trace.
func TestSimulation(t *testing.T) {
	defer sim.Prepare()()
	f := features(t)
	if *flagSeed != 0 {
		r := sim.Run(sim.Config{Seed: *flagSeed, Features: f})
		t.Log("\n" + r.Report(0))
		if r.Failed() {
			t.Fail()
		}
		return
	}
	n := schedules(t)
	classes := map[string]int{}
	violations := 0
	for seed := uint64(1); seed <= uint64(n); seed++ {
		r := sim.Run(sim.Config{Seed: seed, Features: f})
		if !r.Failed() {
			continue
		}
		violations++
		for _, v := range r.Violations {
			if *flagList {
				t.Logf("seed %d: %s", seed, v)
			}
			if classes[v.Invariant] == 0 {
				t.Logf("first %s:\n%s", v.Invariant, r.Report(40))
			}
			classes[v.Invariant]++
		}
	}
	t.Logf("%d schedules, %d violations; by class: %v", n, violations, classes)
	if *flagStrict && violations > 0 {
		t.Fail()
	}
}
