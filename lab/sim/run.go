package sim

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// Result is what one schedule produced.
type Result struct {
	// Seed and Features are the schedule's; Run with them again to replay it.
	Seed     uint64
	Features Features
	// Violations lists the invariants broken, in the order found.
	Violations []Violation
	// Trace is the schedule step by step, true time first.
	Trace []string
	// Steps counts the scheduler's decisions.
	Steps int
	// Stuck reports a schedule that could not finish: a live caller blocked with nothing
	// left to wake it, or the step budget spent. It is a violation too.
	Stuck bool
	// Stats are the schedule's counts.
	Stats Stats
}

// Failed reports whether the schedule broke an invariant.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

// TraceHash is a digest of the trace and the violations, to compare two runs of one
// seed: a verdict on an answer judged but not traced (a request whose context ended)
// must replay too. The violations count whatever order they were found in.
func (r *Result) TraceHash() uint64 {
	h := fnv.New64a()
	for _, l := range r.Trace {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	vs := make([]string, len(r.Violations))
	for i, v := range r.Violations {
		vs[i] = v.Invariant + " " + v.Key + " " + v.Detail
	}
	slices.Sort(vs)
	for _, v := range vs {
		h.Write([]byte{0})
		h.Write([]byte(v))
	}
	return h.Sum64()
}

// Report describes a failed schedule: its seed, how to replay it, the violations, and
// the last lines of its trace (all of them if tail is 0).
func (r *Result) Report(tail int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d violation(s); replay: make sim SEED=%d", r.Seed, len(r.Violations), r.Seed)
	if r.Features != AllFeatures {
		fmt.Fprintf(&b, " SIM_FEATURES=%s", r.Features)
	}
	b.WriteByte('\n')
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	lines := r.Trace
	if tail > 0 && len(lines) > tail {
		fmt.Fprintf(&b, "  trace (last %d of %d lines):\n", tail, len(lines))
		lines = lines[len(lines)-tail:]
	} else {
		fmt.Fprintf(&b, "  trace:\n")
	}
	for _, l := range lines {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	return b.String()
}

// Run runs one schedule. It must run with GOMAXPROCS(1) (see [Prepare]); the code under
// test runs in goroutines of its own, one at a time, and all have returned when Run does.
func Run(cfg Config) Result {
	if cfg.Features == 0 {
		cfg.Features = AllFeatures
	}
	w := &world{
		cfg:      cfg,
		rng:      rand.New(rand.NewPCG(cfg.Seed, 0x1de4_51ed)),
		lrng:     rand.New(rand.NewPCG(cfg.Seed, 0x1a7e_de11)),
		brng:     rand.New(rand.NewPCG(cfg.Seed, 0xba7c_4a11)),
		srng:     rand.New(rand.NewPCG(cfg.Seed, 0x57e4_3a11)),
		wrng:     rand.New(rand.NewPCG(cfg.Seed, 0x3a17_f117)),
		now:      epoch,
		keyNames: make(map[string]string),
		runnable: []metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}, {Name: "/sched/goroutines/not-in-go:goroutines"}},
	}
	w.led.init()
	w.store = &store{w: w, mem: memstore.New(), mutant: cfg.mutant, cpSeq: make(map[string]uint64)}
	w.p = drawProfile(w.rng, w.lrng, w.brng, w.srng, cfg.Features)
	w.logf("seed %d: %s", cfg.Seed, &w.p)
	if err := w.setup(); err != nil {
		panic(fmt.Sprintf("sim: seed %d: setup: %v", cfg.Seed, err))
	}

	w.schedule()
	if !w.stuck {
		w.finalPhase()
	}
	if w.stuck {
		w.led.violate("d.stuck", "", "the schedule could not finish: %s", w.stuckWhy())
	} else {
		w.settledCheck()
		w.streamCheck()
	}
	w.led.finalChecks(w)
	w.finish()
	return Result{
		Seed: cfg.Seed, Features: cfg.Features, Violations: w.led.violations,
		Trace: w.trace, Steps: w.steps, Stuck: w.stuck, Stats: w.led.stats,
	}
}

// Prepare sets GOMAXPROCS to 1, as Run needs, and returns a function restoring it.
func Prepare() (restore func()) {
	prev := runtime.GOMAXPROCS(1)
	return func() { runtime.GOMAXPROCS(prev) }
}

// finalPhase moves time past every lease, then calls once more, without faults, for every
// key: the calls that invariant (d) judges.
func (w *world) finalPhase() {
	w.final = true
	end := w.trueNow()
	w.led.mu.Lock()
	for _, r := range w.led.runs {
		if r.leaseEnd.After(end) {
			end = r.leaseEnd
		}
	}
	w.led.mu.Unlock()
	w.advanceTo(end.Add(w.led.maxSkew+time.Millisecond), true)
	w.logf("final phase: every lease has ended")
	id := len(w.actors)
	add := func(kind string, k *keyInfo) *actor {
		id++
		a := &actor{w: w, id: id, kind: kind, c: w.finalC, finisher: true, start: w.trueNow()}
		if k != nil {
			a.keys = []*keyInfo{k}
		}
		w.actors = append(w.actors, a)
		w.pending = append(w.pending, a)
		return a
	}
	sqsDone := false
	for _, k := range w.allKeys {
		switch k.kind {
		case "do":
			a := add("do", k)
			a.body = w.doBody(a, k, k.body)
		case "http":
			a := add("http", k)
			a.body = w.httpBody(a, k, k.body)
		case "sqs":
			if !sqsDone {
				sqsDone = true
				a := add("sqs", nil)
				a.body = w.sqsBody(a)
			}
		}
	}
	w.schedule()
}

// settledCheck checks invariant (d) on the table: once every lease has ended and the
// final calls returned, no key is left in progress.
func (w *world) settledCheck() {
	for _, k := range w.allKeys {
		if k.kind == "stream" {
			// The source never delivers a record again once the checkpoint passed it, so a
			// late duplicate's lease rightly stays until the record expires: the stream's
			// liveness is its checkpoint (streamCheck).
			continue
		}
		rec := w.store.truth(k.stored)
		expired := rec != nil && !w.trueNow().Before(rec.Expires) // it counts as absent
		if rec != nil && rec.Status == idemstore.StatusInProgress && !expired && !w.heldForOtherBody(k, k.body) {
			w.led.mu.Lock()
			w.led.violate("d.leftInProgress", k.name, "the key is still INPROGRESS after every lease ended and the final calls returned")
			w.led.mu.Unlock()
		}
	}
}

// heldForOtherBody reports whether k's record rightly stays in progress after every lease
// ended and refused the final call with body: when that claim came, the record held the
// effects of a request with another body (a checkpoint), its lease had ended, and it had
// not expired. Such a record keeps its key for its own request until that completes or
// the record expires (see idem.Checkpoint), and a request with another body gets
// idem.ErrPayloadMismatch. It must still be the record the table holds. The HTTP callers
// send one body per key, so this never holds for them.
func (w *world) heldForOtherBody(k *keyInfo, body string) bool {
	w.led.mu.Lock()
	f := w.led.keys[k.stored].refusedFinal
	w.led.mu.Unlock()
	rec := w.store.truth(k.stored)
	if k.kind == "http" || f == nil || rec == nil || rec.LeaseToken != f.rec.LeaseToken {
		return false
	}
	return f.rec.Status == idemstore.StatusInProgress && f.rec.Checkpoint != "" && !f.rec.LeaseExpires.After(f.at) &&
		f.at.Before(f.rec.Expires) && f.rec.Fingerprint != fingerprint(body) && f.fp == fingerprint(body)
}

// stuckWhy describes the actors that could not finish.
func (w *world) stuckWhy() string {
	if w.steps >= w.cfg.maxSteps() {
		return fmt.Sprintf("step budget of %d spent", w.cfg.maxSteps())
	}
	var live []string
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.actors {
		if a.started && !a.done && !a.dead {
			live = append(live, a.String())
		}
	}
	return "live callers blocked with nothing left to wake them: " + strings.Join(live, ", ")
}
