package sim_test

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/sim"
)

var (
	flagSeed     = flag.Uint64("sim.seed", 0, "replay this one seed verbosely")
	flagN        = flag.Int("sim.n", 0, "how many schedules TestSimulation runs (default 2000, 300 with -short; or IDEM_SIM_SCHEDULES)")
	flagFeatures = flag.String("sim.features", "all", "the features schedules may use (see sim.ParseFeatures)")
	flagList     = flag.Bool("sim.list", false, "log every violation on one line with its seed")
)

// knownOpen holds the violation classes that the current library is known to produce,
// each with the bug behind it (see RELIABILITY.md). TestSimulation fails on any other
// class; when a fix lands, delete its class here and move its seeds in simulationSeeds to
// fixed, so that the simulation holds the fix from then on.
var knownOpen = map[string]string{
	"c.checkpointLost.release":     "a handler error or panic after a checkpoint releases the key, and release deletes the record with its checkpoint",
	"c.checkpointLost.resend":      "a takeover whose claim response is lost: the resend meets its own record and the checkpoint taken over is forgotten",
	"c.checkpointLost.carry":       "a takeover claim replaces the record; if the guard does not write the checkpoint back (the claim's response was lost, or the write-back failed) the next owner misses it",
	"a.pastLease.heartbeatFailed":  "failed or late heartbeats never cancel the handler, which runs on after its lease ended",
	"a.pastLease.heartbeatOverCap": "WithHeartbeat is validated against WithLease, but WithMaxLease caps the lease below twice the interval",
	"a.pastLease.capped":           "WithMaxLease below the deadline ends the lease while the handler's context is still live",
	"a.lostOutcome":                "sqs batch outcomes finished after the early Settle wait for the final Settle, and are lost when the invocation is killed",
	"a.outcomePastLease":           "batch outcomes pending for Settle keep no heartbeat; their lease lapses and another owner runs the key again",
	"a.failOpenCancelled":          "WithFailOpen runs the handler on an ended context (DoClaimed for a claim that failed because the context ended; Do after a store error once it ended)",
	"a.overlap":                    "a lease from WithLease (no deadline) has no margin: an owner's clock behind, or a claimer's ahead within the stated tolerance, lets two owners run at once",
}

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
	return 2000
}

func features(t *testing.T) sim.Features {
	f, err := sim.ParseFeatures(*flagFeatures)
	require.NoError(t, err)
	return f
}

// TestSimulation runs consecutive seeds and fails on every violation of a class not in
// knownOpen, printing its seed and trace; known classes are counted and logged.
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
	failed := 0
	for seed := uint64(1); seed <= uint64(n); seed++ {
		r := sim.Run(sim.Config{Seed: seed, Features: f})
		if r.Failed() {
			failed++
		}
		for _, v := range r.Violations {
			if *flagList {
				t.Logf("seed %d: %s", seed, v)
			}
			if classes[v.Invariant] == 0 {
				if _, known := knownOpen[v.Invariant]; known {
					t.Logf("first %s (known open bug) at seed %d", v.Invariant, seed)
				} else {
					t.Errorf("first %s:\n%s", v.Invariant, r.Report(60))
				}
			}
			classes[v.Invariant]++
		}
	}
	t.Logf("%d schedules, %d failed; violations by class: %v", n, failed, classes)
}

// TestSimulationDeterminism runs each seed twice and compares the traces: one seed must
// decide everything, or a failing seed could not be replayed.
func TestSimulationDeterminism(t *testing.T) {
	defer sim.Prepare()()
	n := 200
	if testing.Short() {
		n = 50
	}
	differ := 0
	for seed := uint64(1); seed <= uint64(n); seed++ {
		a := sim.Run(sim.Config{Seed: seed})
		b := sim.Run(sim.Config{Seed: seed})
		if a.TraceHash() != b.TraceHash() {
			differ++
			if differ == 1 {
				for i := range min(len(a.Trace), len(b.Trace)) {
					if a.Trace[i] != b.Trace[i] {
						t.Logf("seed %d: the traces part at line %d:\n  %s\n  %s", seed, i, a.Trace[i], b.Trace[i])
						break
					}
				}
			}
		}
	}
	t.Logf("%d of %d seeds ran differently twice", differ, n)
	require.Zero(t, differ, "seeds whose two runs differ")
}

// simulationSeeds holds every seed that ever broke an invariant, with the class it broke
// and the bug behind it. An open entry must still break it: when its fix lands the seed
// stops failing, and the entry moves to fixed (and its class leaves knownOpen). A fixed
// entry must pass. If an open seed stops failing only because the schedule changed (a
// fix elsewhere added a store call), hunt a new one with
// `make sim SIM_FEATURES=<features>`.
var simulationSeeds = []struct {
	seed     uint64
	features string
	class    string
	open     bool
}{
	// Release deletes the record, and with it the checkpoint of a handler that panicked
	// (or failed) after recording it.
	{5, "all", "c.checkpointLost.release", true},
	{6, "do,checkpoint,panic", "c.checkpointLost.release", true},
	// A takeover's claim response was lost; the SDK's resend met its own record, so the
	// guard saw no previous record and forgot the checkpoint it took over.
	{691, "all", "c.checkpointLost.resend", true},
	{259, "do,checkpoint,lost,crash", "c.checkpointLost.resend", true},
	// A takeover's claim applied but its response was lost, so the guard never wrote the
	// checkpoint it replaced back; the next owner misses it.
	{646, "all", "c.checkpointLost.carry", true},
	// The lease capped by WithMaxLease ends before the first heartbeat.
	{85, "all", "a.pastLease.heartbeatOverCap", true},
	{51, "do,heartbeat,maxlease", "a.pastLease.heartbeatOverCap", true},
	// Heartbeats failed (or came late); the handler was not cancelled and ran past its lease.
	{162, "all", "a.pastLease.heartbeatFailed", true},
	{20, "do,heartbeat,fail,late", "a.pastLease.heartbeatFailed", true},
	// WithMaxLease below the deadline, no heartbeat: the lease ends under a live context.
	{100, "all", "a.pastLease.capped", true},
	// An sqs message finished after the early Settle; the invocation was killed at its
	// deadline before the final Settle sent its outcome.
	{332, "all", "a.lostOutcome", true},
	// A batch outcome waited for Settle past its lease; another owner ran the key again.
	{6235, "all", "a.outcomePastLease", true},
	// Fail-open ran the handler on an ended context.
	{521, "all", "a.failOpenCancelled", true},
	// An owner without a deadline, its clock behind, was taken over by a caller ahead
	// within the lease margin while it still ran.
	{3844, "all", "a.overlap", true},
}

// TestSimulationSeeds replays the regression table.
func TestSimulationSeeds(t *testing.T) {
	defer sim.Prepare()()
	for _, tc := range simulationSeeds {
		t.Run(fmt.Sprintf("%d/%s", tc.seed, tc.class), func(t *testing.T) {
			f, err := sim.ParseFeatures(tc.features)
			require.NoError(t, err)
			r := sim.Run(sim.Config{Seed: tc.seed, Features: f})
			var classes []string
			for _, v := range r.Violations {
				classes = append(classes, v.Invariant)
			}
			if tc.open {
				require.Contains(t, classes, tc.class,
					"open bug no longer reproduces: if it is fixed, set open to false and remove %s from knownOpen; else hunt a new seed\n%s", tc.class, r.Report(60))
				return
			}
			require.False(t, r.Failed(), r.Report(60))
		})
	}
}

// TestSimulationCatchesMutants breaks the simulated store on purpose and requires the
// invariants to notice: a checker that never fires would pass everything.
func TestSimulationCatchesMutants(t *testing.T) {
	defer sim.Prepare()()
	for _, tc := range []struct {
		mutant, features string
		want             []string
	}{
		{"claim-ignores-leases", "do,http,checkpoint", []string{"a.overlap"}},
		{"complete-drops-attached", "do,batch,attach", []string{"e.recordWithoutAttached"}},
		{"complete-lies", "do,http", []string{"b.answerNotRecorded", "d.leftInProgress"}},
		{"complete-lies", "sqs", []string{"f.ackedNotCompleted"}},
	} {
		t.Run(tc.mutant+"/"+tc.features, func(t *testing.T) {
			f, err := sim.ParseFeatures(tc.features)
			require.NoError(t, err)
			seen := map[string]uint64{}
			for seed := uint64(1); seed <= 300; seed++ {
				for _, v := range sim.RunMutant(seed, f, tc.mutant).Violations {
					if _, ok := seen[v.Invariant]; !ok {
						seen[v.Invariant] = seed
					}
				}
			}
			t.Logf("classes found, with their first seed: %v", seen)
			for _, c := range tc.want {
				require.Contains(t, seen, c)
			}
		})
	}
}
