package sim_test

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/lab/sim"
)

var (
	flagSeed     = flag.Uint64("sim.seed", 0, "replay this one seed verbosely")
	flagN        = flag.Int("sim.n", 0, "how many schedules TestSimulation runs (default 2000, 300 with -short; or IDEM_SIM_SCHEDULES)")
	flagFeatures = flag.String("sim.features", allBeforeStream, "the features schedules may use (see sim.ParseFeatures)")
	flagList     = flag.Bool("sim.list", false, "log every violation on one line with its seed")
)

// knownOpen holds the violation classes that the current library is known to produce,
// each with the bug behind it (see RELIABILITY.md). TestSimulation fails on any other
// class; when a fix lands, delete its class here and mark its seeds in simulationSeeds
// fixed, so that the simulation holds the fix from then on.
var knownOpen = map[string]string{
	// Issue 22, found by the late deliveries (FeatDelay). Item 18's fix (branch tombstone)
	// refuses a late claim by the released token and by the release's now; what stays is a
	// claim sent in the very instant of a later release, which the simulation's steps,
	// taking no time, still make (seed 591861 of `idemsim -start 1`: once in 649,700
	// schedules; see RELIABILITY.md).
	"d.heldByNobody": "item 18's residual: a claim sent in the instant of a later release lands after it and takes the key for no one",
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

// TestSimulationDeterminism runs each seed twice and compares the traces and violations
// (Result.TraceHash): one seed must decide everything, or a failing seed could not be
// replayed.
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
	// The first ten classes, found on the code before the at-most-once fixes; each seed
	// broke its class then and passes since its fix.
	//
	// Release deleted the record, and with it the checkpoint of a handler that panicked
	// (or failed) after recording it.
	{5, allBeforeStream, "c.checkpointLost.release", false},
	{6, "do,checkpoint,panic", "c.checkpointLost.release", false},
	// A takeover's claim response was lost; the SDK's resend met its own record, so the
	// guard saw no previous record and forgot the checkpoint it took over.
	{691, allBeforeStream, "c.checkpointLost.resend", false},
	{259, "do,checkpoint,lost,crash", "c.checkpointLost.resend", false},
	// A takeover's claim applied but its response was lost, so the guard never wrote the
	// checkpoint it replaced back; the next owner missed it.
	{646, allBeforeStream, "c.checkpointLost.carry", false},
	// The lease capped by WithMaxLease ended before the first heartbeat.
	{85, allBeforeStream, "a.pastLease.heartbeatOverCap", false},
	{51, "do,heartbeat,maxlease", "a.pastLease.heartbeatOverCap", false},
	// Heartbeats failed (or came late); the handler was not cancelled and ran past its lease.
	{162, allBeforeStream, "a.pastLease.heartbeatFailed", false},
	{20, "do,heartbeat,fail,late", "a.pastLease.heartbeatFailed", false},
	// WithMaxLease below the deadline, no heartbeat: the lease ended under a live context
	// (fixed by the lease watchdog).
	{100, allBeforeStream, "a.pastLease.capped", false},
	// An sqs message finished after the early Settle; the invocation was killed at its
	// deadline before the final Settle sent its outcome.
	{332, allBeforeStream, "a.lostOutcome", false},
	// A batch outcome waited for Settle past its lease; another owner ran the key again.
	{6235, allBeforeStream, "a.outcomePastLease", false},
	// Fail-open ran the handler on an ended context: a claim failed because the context
	// ended; or (Do) it failed with a store error of its own after the deadline had passed
	// (fixed: never fail open once the caller's context has ended).
	{521, allBeforeStream, "a.failOpenCancelled", false},
	// An owner without a deadline, its clock behind, was taken over by a caller ahead
	// within the lease margin while it still ran (fixed: such a lease is WithLease plus the
	// margin, and the watchdog ends the handler's context after WithLease).
	{3844, allBeforeStream, "a.overlap", false},

	// Found while triaging the ten on the fixed code. Library bugs:
	//
	// The heartbeat's first beat counted from the handler's start, not the claim: a batch
	// request started late beat after its lease's point of loss, and the final call of a
	// healthy store was cancelled (then with the no-deadline lease of WithLease alone).
	{154, allBeforeStream, "d.notSettled", false},
	{195, allBeforeStream, "d.notSettled", false},
	{586, allBeforeStream, "d.notSettled", false},
	// The default logger formatted every record it discarded; the first loaded the time
	// zone from disk, and that system call made the watchdog look quiet: the seed ran
	// differently about once in forty (a.pastLease, d.stuck).
	{31319, allBeforeStream, "d.stuck", false},
	//
	// The simulation's model lagging the intended semantics (each fixed in lab/sim):
	//
	// A record kept in progress, lease ended, with the checkpoint of a request with another
	// body holds its key against the canonical body (ErrPayloadMismatch).
	{156, allBeforeStream, "d.leftInProgress", false},
	{953, allBeforeStream, "d.leftInProgress", false},
	{2316, allBeforeStream, "d.notSettled", false},
	// ... judged when the final claim met it, not when the batch reported (it had expired).
	{9908, allBeforeStream, "d.notSettled", false},
	// Leases judged in true time, not on the owner's clock, which ran behind.
	{430, allBeforeStream, "a.pastLease.heartbeatFailed", false},
	{6571, allBeforeStream, "a.overlap", false},
	// A context ended at its deadline in true time, not when its skewed clock read it; an
	// actor whose clock read its deadline at its start had a live context.
	{83918, allBeforeStream, "a.pastLease.capped", false},
	// The simulated store ignored its context: a heartbeat's hung extension held the
	// completion back until the invocation was killed.
	{10970, allBeforeStream, "a.lostOutcome", false},
	// An invocation whose clock ran behind by more than its SQS deadline margin was killed
	// before its early Settle: beyond the tolerance, counted apart.
	{29678, allBeforeStream, "a.lostOutcome", false},
	// A replaced record's expiry judged in true time, not on the claimer's clock.
	{14063, allBeforeStream, "c.checkpointLost", false},
	{106673, allBeforeStream, "c.checkpointLost.carry", false},
	{109170, allBeforeStream, "c.checkpointLost", false},
	// After an expiry an old checkpoint may be seen by every later owner, not only the
	// first: a claim read a record in progress, which then completed and expired on the
	// claimer's clock (skews 2.7 s apart, expiry 2 s), and carried its checkpoint into the
	// new window.
	{488336, allBeforeStream, "c.checkpointLost", false},
	// Two claims applied at one instant: the later taken for the earlier.
	{117617, "do,heartbeat,maxlease,skew", "a.overlap", false},
	{141251, "do,heartbeat,maxlease,skew", "a.overlap", false},
	// A batch caller settled only after a handler that overran its deadline.
	{48238, "batch,batchstore,late,heartbeat,maxlease,skew", "a.outcomePastLease", false},
	{98862, "batch,batchstore,late,heartbeat,maxlease,skew", "a.outcomePastLease", false},
	// Settle sent the batch's plain completions, then, once their (late) answer came, the
	// completions with attached writes (BatchAttachStore): the invocation was killed, or the
	// lease taken over, before the second call went out. Both are now sent at once.
	{532448187289, allBeforeStream, "a.lostOutcome", false},
	{532448238908, allBeforeStream, "a.lostOutcome", false},
	{532448314735, allBeforeStream, "a.outcomePastLease", false},
	// Found once handlers could stall (FeatPause), the model lagging again: a stall drawn
	// longer than the step budget allows beats of a heartbeat clamped to 500 µs (now at
	// most a hundred beats long); a run taken over from a clock beyond the tolerance, whose
	// taker then released the key, counted as overlapping a later claim from its own
	// clock (now counted apart, as the takeover was).
	// (Found before FeatClockStep, whose draws change schedules with every feature.)
	{10014, "all,-clockstep,-stream", "d.stuck", false},
	{103051, "all,-clockstep,-stream", "a.overlap", false},
	{114778, "all,-clockstep,-stream", "a.overlap", false},
	{217956, "all,-clockstep,-stream", "a.overlap", false},
	// A claimer whose clock stepped back right after its claim judged by its new reading,
	// within the tolerance, not by the one it claimed with, beyond it (FeatClockStep).
	{325481, allBeforeStream, "a.overlap", false},
	{302188, allBeforeStream, "a.outcomePastLease", false},

	// Issue 22, found once the simulation delivered requests late (FeatDelay), on the code
	// before the fixes of its items 1 and 2; each broke its class then and passes since.
	// The first of each class is the first seed of `idemsim -start=1 -features=all`, the
	// others of `idemsim -start=1 -features=<features>`.
	//
	// Item 1: an extension's first attempt landed after a later extension and moved the
	// stored lease end back below the end the watchdog counts on ...
	{440, allBeforeStream, "a.leaseShortened", false},
	{109, "do,heartbeat,delay,pause", "a.leaseShortened", false},
	// ... and a second caller claimed the key at the shortened end and ran while the
	// owner's handler, stalled, had a live context: the double execution.
	{153911, allBeforeStream, "a.overlap", false},
	// Item 2: Checkpoint("a")'s first attempt landed after Checkpoint("b") was
	// acknowledged: the record held "a", and a new owner would have resumed from it.
	{125, allBeforeStream, "c.checkpointLost.late", false},
	{188, "do,checkpoint,delay", "c.checkpointLost.late", false},
	// Item 18: a claim's first attempt landed after its run failed and released the key,
	// and held it in progress for no one until its lease ended.
	{186, allBeforeStream, "d.heldByNobody", false},
	{334, "do,error,delay", "d.heldByNobody", false},

	// Found by `idemsim -start=1000000 -time=10m -features=all`, the model judging clocks
	// by the wrong reading (FeatClockStep); the library was right in both. A claim stamped
	// before its clock stepped back 2.26 s, applied after a stalled request, judged by the
	// stepped clock (within the tolerance of the owner's) and not by the time it carried
	// (2.26 s ahead of the owner's, beyond the margin): now by the time it carried.
	{1548572, allBeforeStream, "a.overlap", false},
	// A claim's first attempt, stamped before its clock stepped back 3.09 s, landed after
	// its own run completed with a 2 s expiry: by the time it carried the record had
	// expired, and a claim of an expired key holds it for no one as any orphan does.
	{1237895, allBeforeStream, "d.heldByNobody", false},
	// Item 18's documented residual (knownOpen): a claim sent in the instant of a later
	// release of the same key (a batch's duplicate message claimed and released it again)
	// lands after it and takes the tombstone over. 2119186 is the one violation of
	// `idemsim -start=2000000 -time=3m -features=all` (719,310 schedules).
	{1262064, allBeforeStream, "d.heldByNobody", true},
	{2119186, allBeforeStream, "d.heldByNobody", true},
	// The same instant again, from the 10-minute runs at the end of issue 22
	// (`idemsim -start=3000000` and `-start=5000000`, -time=10m -features=all).
	{3608740, allBeforeStream, "d.heldByNobody", true},
	{6251069, allBeforeStream, "d.heldByNobody", true},
	// RELIABILITY.md's other documented residual, the late claim from a clock ahead of the
	// releaser's: here the releaser's clock stepped back by 1.45 s after the claim was
	// stamped (FeatClockStep), so the claim's now is past the tombstone's lease end.
	{5098760, allBeforeStream, "d.heldByNobody", true},
	// The same instant once more, found by review 7: a batch's claim, resent, sent at the
	// instant its own run released the key and another batch claimed and released it
	// again, lands after both releases.
	{682132615088, "fail,lost,late,crash,kill,skew,heartbeat,wait,remember,attach,cache,panic,error,checkpoint,maxlease,failopen,expiry,batchstore,do,batch,delay,pause,itemfail,clockstep", "d.heldByNobody", true},

	// Review 6's batch holes, found by the batch extras (FeatBatchMix) on the code before
	// their fixes (main at 775ec8b, `idemsim -start=9000000 -features=` the features
	// below): each broke its class then and passes since. A request failed open for a key
	// another request of its batch had met (3fecff9) ...
	{9000042, batchHoles, "a.failOpenAfterMet", false},
	// ... a Settle overlapping another answered nil for an outcome the other was still
	// recording, which then failed (0b522ab) ...
	{9000076, batchHoles, "b.settleNotRecorded", false},
	// ... and Settle wrote an outcome that had waited for it longer than WithExpiry with
	// the expiry counted from the handler's end: already expired (c391efc).
	{9001857, batchHoles, "b.completedExpired", false},
	// A request failed open while another request of its batch took the key's lease-ended
	// record over: the claim step published the record it met to the batch only once its
	// takeover claim returned (root test TestBatchFailOpenRefusedWhileATakeoverClaimsAgain);
	// the first seed of `idemsim -start=12000000 -time=5m -features=all` with this class.
	{12102926, allBeforeStream, "a.failOpenAfterMet", false},
	// The model lagging (fixed in lab/sim): an SQS invocation's clock stepped back after
	// its start, before the wrapper armed its settle timer; the model lowered the default
	// deadline margin from the time left on the stepped clock, the wrapper from the time
	// left at its start (found by the same run).
	{8016189, allBeforeStream, "a.lostOutcome", false},
	// The model lagging again (fixed in lab/sim): a batch caller held two leases of one key,
	// one per body, and the ledger gave each handler the other's lease (found by
	// `idemsim -start=15000000 -time=5m -features=all`).
	{15045466, allBeforeStream, "b.answerNotRecorded", false},

	// Issue 24 item 7, the stream (FeatStream), from `idemsim -features=all` runs of 10
	// minutes (RELIABILITY.md). Item 18's residual of the same instant again: a duplicate
	// invocation's batch claim, resent, was stamped at 0.329 s, its first attempt delayed;
	// it released the key at once (its group stopped), the first invocation claimed it
	// over the tombstone and released it with a request stamped at 0.329 s too (it landed
	// at 0.351 s), and the first attempt landed at 0.383 s, its now not before the
	// tombstone's lease end (`-start=20000000`, at b7e4b92). Without FeatStreamWait, which
	// came later: with it, that duplicate draws the wait and the schedule differs.
	{20062568, "all,-streamwait", "d.heldByNobody", true},
	// RELIABILITY.md's other residual, the late claim from a clock ahead of the
	// releaser's: a duplicate's batch claim, stamped at 1.135 s, its first attempt
	// delayed; its container's clock then stepped back 0.48 s, and the retry on that
	// container claimed and released the key at 1.400 s true time, its tombstone's lease
	// ending at 0.919 s on the stepped clock, before the late claim's now; it landed at
	// 1.403 s (`-start=30000000`).
	{30038571, "all", "d.heldByNobody", true},
	// The same, with the stream alone (`-start=40000000 -features=all,-do,-batch,-sqs,
	// -fifo,-http`): a claim stamped at 3.974 s, its first attempt delayed; its
	// container's clock stepped back 0.17 s at 3.978 s; a retry there claimed and released
	// the key at 4.007 s (3.838 s on the stepped clock); the late claim landed at 6.252 s.
	{40028991, streamAlone, "d.heldByNobody", true},
	// The 10 minutes of `-start=50000000 -features=all` on the final code found the two
	// residuals in batch callers: the same instant (a batch's claim resent at 1.959 s, its
	// run and another request's released by 1.959 s, the first attempt landing at
	// 1.978 s) ...
	{50199396, "all", "d.heldByNobody", true},
	// ... and the clock ahead (a batch claim stamped at 1.134 s on a clock 0.69 s ahead,
	// which stepped back to 0.15 s behind; the key released at 1.211 s, 1.057 s on that
	// clock; the late claim landed at 1.242 s).
	{50306791, "all", "d.heldByNobody", true},
	// With the stream's wait for keys in flight (FeatStreamWait), 8 minutes each of
	// `-start=60000000` and `-start=70000000 -features=all` and of `-start=80000000` with
	// the stream alone found only the two residuals again, none by a poll of the wait: the
	// same instant in an SQS caller (60050945: a claim resent at 0.086 s, its run released
	// at 0.086 s, the first attempt landing at 0.095 s) and the clock ahead in stream
	// invocations (80061560: a claim stamped at 1.828 s on a clock 1.57 s ahead that
	// stepped back to 0.66 s ahead; another invocation's release at 2.642 s, the late
	// claim landing at 2.753 s; 80187676: a batch claim stamped at 1.055 s, the clock
	// stepping from 1.10 s ahead to 1.61 s behind, another invocation's claim and release
	// at 1.819 s, the late claim landing at 3.266 s).
	{60050945, "all", "d.heldByNobody", true},
	{80061560, streamAlone, "d.heldByNobody", true},
	{80187676, streamAlone, "d.heldByNobody", true},
	// The model lagging (fixed in lab/sim): the final phase's SQS finisher ran its batch
	// one message at a time under the lease WithMaxLease capped (1 s, no deadline, no
	// heartbeat), crowded by the stream's finishers; the last message started 75 ms before
	// its lease less the margin and gave up when the watchdog ended its context
	// (100012543), or was not run (100696057), and its key kept its checkpoint, in
	// progress. A finisher's batch now runs every message at once (`-start=100000000`).
	{100012543, "all", "d.notSettled", false},
	{100696057, "all", "d.notSettled", false},
	// ... and crowding alone (fixed in lab/sim): with its messages at once, one message's
	// handler, three steps among the stream's finishers' steps, still ran 0.8 s, past its
	// lease less the margin (`-start=110000000 -time=8m -features=all`). The final phase
	// now invokes the stream once the other finishers have ended.
	{110283195, "all", "d.notSettled", false},
	// The model's expectation (fixed in lab/sim): a sequential batch's deadline Settle
	// lost d2's FAILED record (the lease was lost to another caller, which then completed
	// d2); the duplicates of d2 called after it replayed their run's remembered failure,
	// and the final Settle reported the lost lease for them. The simulation judged that
	// replay against the records without that error, as it already did for a result. The
	// duplicates' contexts had ended too, and the guard's select between the run and the
	// context drew either, so the seed broke 0, 1 or 2 times from run to run (fixed in
	// the guard: a finished run answers).
	{170221822, "all", "b.replayDiffers", false},
}

// streamAlone is every feature but the kinds of caller other than the stream.
const streamAlone = "all,-do,-batch,-sqs,-fifo,-http"

// allBeforeStream is every feature but FeatStream: the seeds found before the stream
// existed replay as they ran then (the stream's shards add actors, whose steps change the
// rest of a schedule).
const allBeforeStream = "all,-stream"

// batchHoles is the feature set that found review 6's batch holes on the code before
// their fixes.
const batchHoles = "batch,batchstore,batchmix,failopen,fail,lost,late,expiry,error,remember,itemfail,skew,heartbeat,wait"

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
		n                uint64 // seeds to try; 300 if zero
	}{
		{"claim-ignores-leases", "do,http,checkpoint", []string{"a.overlap"}, 0},
		{"complete-drops-attached", "do,batch,attach", []string{"e.recordWithoutAttached"}, 0},
		{"complete-drops-attached", "batch,attach,batchstore", []string{"e.recordWithoutAttached"}, 0},
		{"complete-drops-attached", "sqs,attach,batchstore", []string{"e.recordWithoutAttached"}, 0},
		{"complete-lies", "do,http", []string{"b.answerNotRecorded", "d.leftInProgress"}, 0},
		{"complete-lies", "sqs", []string{"f.ackedNotCompleted"}, 0},
		// The stores' behaviour before the fixes of issue 22 items 1 and 2.
		{"extend-any-end", "do,heartbeat,delay,pause", []string{"a.leaseShortened"}, 1500},
		{"checkpoint-any-order", "do,checkpoint,delay", []string{"c.checkpointLost.late"}, 2000},
		// A stream consumer that breaks the checkpoint rule (FeatStream).
		{"complete-lies", "stream", []string{"g.checkpointPassed", "g.order"}, 0},
		{"stream-unordered", "stream,error", []string{"g.order"}, 0},
		{"stream-reports-last", "stream,error", []string{"g.checkpointPassed"}, 0},
		{"release-many-skipped", "stream,error,batchstore", []string{"g.unstartedHeld"}, 0},
		// A stream invocation that waits for a key in flight with a fresh Process call per
		// poll, as batch.WithWaitInFlight's polls did before idem.DoMet (review 21): a
		// fail-open guard runs the record over the live run.
		{"stream-wait-anew", "stream,streamwait,failopen,fail", []string{"a.failOpenAfterMet"}, 3000},
	} {
		t.Run(tc.mutant+"/"+tc.features, func(t *testing.T) {
			f, err := sim.ParseFeatures(tc.features)
			require.NoError(t, err)
			seen := map[string]uint64{}
			n := tc.n
			if n == 0 {
				n = 300
			}
			for seed := uint64(1); seed <= n; seed++ {
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

// TestSimulationHoldsFixedSemantics runs the simulated store with the semantics issue 22
// items 1 and 2 ask of every store (an extension never lowers the stored lease end; a
// checkpoint sent before the one the record holds changes nothing) over the schedules that
// find the bugs, and requires their classes gone: the invariants judge what the owner was
// answered, not what a request carried, so a store that keeps the later value passes.
func TestSimulationHoldsFixedSemantics(t *testing.T) {
	defer sim.Prepare()()
	for _, tc := range []struct {
		variant, features, class string
		n                        uint64
	}{
		{"extend-keeps-later", "do,heartbeat,delay,pause", "a.leaseShortened", 1500},
		{"checkpoints-in-order", "do,checkpoint,delay", "c.checkpointLost.late", 2000},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			f, err := sim.ParseFeatures(tc.features)
			require.NoError(t, err)
			for seed := uint64(1); seed <= tc.n; seed++ {
				r := sim.RunMutant(seed, f, tc.variant)
				for _, v := range r.Violations {
					require.NotEqual(t, tc.class, v.Invariant, r.Report(60))
				}
			}
		})
	}
}

// TestSimulationStreamWaits requires the stream's invocations with batch.WithWaitInFlight
// (FeatStreamWait) to wait: some of their claims poll a key met in flight, and some of
// those polls take a key over, its lease ended (killed invocations, lost responses).
func TestSimulationStreamWaits(t *testing.T) {
	defer sim.Prepare()()
	f, err := sim.ParseFeatures("stream,streamwait,kill,crash,lost,error")
	require.NoError(t, err)
	var total sim.Stats
	for seed := uint64(1); seed <= 200; seed++ {
		r := sim.Run(sim.Config{Seed: seed, Features: f})
		for _, v := range r.Violations {
			_, known := knownOpen[v.Invariant]
			require.True(t, known, "seed %d\n%s", seed, r.Report(60))
		}
		total.StreamWaits += r.Stats.StreamWaits
		total.StreamPolls += r.Stats.StreamPolls
		total.StreamTakeovers += r.Stats.StreamTakeovers
	}
	t.Logf("stream invocations waiting %d, polls %d, takeovers %d", total.StreamWaits, total.StreamPolls, total.StreamTakeovers)
	require.Positive(t, total.StreamPolls, "polls")
	require.Positive(t, total.StreamTakeovers, "takeovers")
}

// TestSimulationStreamWaitNeverFailsOpenOverAMetKey runs stream invocations that wait for
// keys in flight (batch.WithWaitInFlight) under a fail-open guard whose store calls fail,
// and requires none to run a record unguarded once a claim of its invocation met the
// key's record (a.failOpenAfterMet): review 21's hole, a poll failing open over a live
// run, which the library before idem.DoMet (10ccef3) breaks from seed 297 on.
func TestSimulationStreamWaitNeverFailsOpenOverAMetKey(t *testing.T) {
	defer sim.Prepare()()
	f, err := sim.ParseFeatures("stream,streamwait,failopen,fail")
	require.NoError(t, err)
	var total sim.Stats
	for seed := uint64(1); seed <= 2000; seed++ {
		r := sim.Run(sim.Config{Seed: seed, Features: f})
		for _, v := range r.Violations {
			require.NotEqual(t, "a.failOpenAfterMet", v.Invariant, r.Report(60))
		}
		total.Unguarded += r.Stats.Unguarded
		total.StreamPolls += r.Stats.StreamPolls
	}
	t.Logf("fail-open runs %d, polls %d", total.Unguarded, total.StreamPolls)
	require.Positive(t, total.Unguarded, "the guards failed open")
	require.Positive(t, total.StreamPolls, "the invocations polled")
}

// TestSimulationAttachPanics runs schedules whose attached writes that would fail their
// condition panic instead (Config.AttachPanics), in their completion's transaction, which
// rolls back: a panic in Do's or DoClaimed's completion goes on to the caller after the
// key is read back and released, and one in Batch.Settle's batch call is recovered, each
// record of the call sent again alone. No invariant may break (but the known open ones):
// no key runs twice once its outcome is recorded, no answer differs from the recorded
// one, no key is left in progress.
func TestSimulationAttachPanics(t *testing.T) {
	defer sim.Prepare()()
	n := schedules(t) / 2
	classes := map[string]int{}
	panics := 0
	for seed := uint64(1); seed <= uint64(n); seed++ {
		r := sim.Run(sim.Config{Seed: seed, Features: sim.AllFeatures, AttachPanics: true})
		panics += r.Stats.AttachPanics
		for _, v := range r.Violations {
			if classes[v.Invariant] == 0 {
				if _, known := knownOpen[v.Invariant]; !known {
					t.Errorf("first %s:\n%s", v.Invariant, r.Report(60))
				}
			}
			classes[v.Invariant]++
		}
	}
	require.Positive(t, panics, "no attached write panicked")
	t.Logf("%d schedules, %d completions whose attached write panicked; violations by class: %v", n, panics, classes)
}

// TestSim170_TraceHashCountsViolations: two runs of one seed whose traces agree but whose
// verdicts differ ran differently. Seed 170221822 broke an invariant 0, 1 or 2 times from
// run to run with one trace (the answers of requests whose context ended are judged, not
// traced), and the determinism check, comparing traces alone, passed it.
func TestSim170_TraceHashCountsViolations(t *testing.T) {
	trace := []string{"0.000s  seed 1", "0.100s  a1/do starts"}
	v := sim.Violation{Invariant: "b.replayDiffers", Key: "d2", Detail: "replayed"}
	clean := sim.Result{Seed: 1, Trace: trace}
	once := sim.Result{Seed: 1, Trace: trace, Violations: []sim.Violation{v}}
	twice := sim.Result{Seed: 1, Trace: trace, Violations: []sim.Violation{v, v}}
	require.NotEqual(t, clean.TraceHash(), once.TraceHash())
	require.NotEqual(t, once.TraceHash(), twice.TraceHash())
}
