package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/idemstore"
)

// The stream (FeatStream): a Kinesis or DynamoDB stream's shards, each a sequence of
// records with an ordering key (a partition key, an item key) and an idempotency key of
// its own (the default keys, a sequence number or an eventID; now and then a producer's
// retry sends a record again, with the key a key taken from its data gives), read by a
// simulated event source mapping and processed by the batch engine's ordered mode with
// RecordBeforeNext, as packages kinesis and dynamostream call it.
//
// The mapping, one per shard, runs in the scheduler (esmTick) as Lambda's does with
// ReportBatchItemFailures: it invokes a batch of up to BatchSize records from the shard's
// checkpoint; the response's lowest failed sequence number is the new checkpoint, or the
// batch's end when none failed; it invokes again from there, so records after a failure
// that finished are delivered again (and must replay from the store). An invocation that
// crashed or was killed fails when its timeout (its deadline) passes; one whose response
// was lost fails at once and the batch is sent again; with BisectBatchOnFunctionError such
// a failure halves the next batch. Now and then Lambda runs a batch twice at once (a
// duplicate invocation, started a little later or after a lease's length): the mapping
// takes the first invocation's response and ignores the duplicate's. Retries are unbounded
// (MaximumRetryAttempts -1, Lambda's default) before the final phase, where each shard is
// driven to its end without faults; there a record that fails three times in a row, a
// lease's length apart, goes to the on-failure destination and the checkpoint passes it.

// streamProfile is how a schedule's stream looks and its mapping is set, drawn from srng.
type streamProfile struct {
	shards, records, groups int
	batchSize               int     // BatchSize
	bisect                  bool    // BisectBatchOnFunctionError
	budget                  int     // invocations per shard before the final phase
	dup, lost               float64 // per invocation: run twice; its response lost
}

func drawStreamProfile(srng *rand.Rand) *streamProfile {
	return &streamProfile{
		shards:    1 + srng.IntN(2),
		records:   2 + srng.IntN(7),
		groups:    1 + srng.IntN(3),
		batchSize: 1 + srng.IntN(5),
		bisect:    srng.IntN(2) == 0,
		budget:    3 + srng.IntN(8),
		dup:       []float64{0, 0.1, 0.25}[srng.IntN(3)],
		lost:      []float64{0, 0.1, 0.2}[srng.IntN(3)],
	}
}

func (sp *streamProfile) String() string {
	return fmt.Sprintf("stream: %d shards of %d records, %d ordering keys, batch size %d, bisect %t, %d invocations, duplicates %.2f, lost responses %.2f",
		sp.shards, sp.records, sp.groups, sp.batchSize, sp.bisect, sp.budget, sp.dup, sp.lost)
}

// streamRec is one record of a shard.
type streamRec struct {
	seq     int    // its index in the shard
	id      string // its sequence number, as the source names it
	group   string // its ordering key
	k       *keyInfo
	skipped bool // sent to the on-failure destination: the checkpoint passed it
}

// shard is one shard and its event source mapping's state.
type shard struct {
	id   int
	recs []*streamRec
	cp   int       // the checkpoint: records below it are done
	size int       // the next batch's size (bisection halves it)
	next time.Time // the mapping invokes no earlier (true time)
	cur  *actor    // the invocation whose response the mapping waits for, or nil
	n    int       // invocations before the final phase
	fin  int       // invocations in the final phase
	fail int       // failed final-phase invocations in a row at the checkpoint
	sp   *streamProfile
}

// streamInv is a stream invocation's batch and settings.
type streamInv struct {
	sh          *shard
	from, to    int // the records [from, to) of its shard
	dup         bool
	lost        bool // its response is lost
	concurrency int
	batchClaims bool
	wait        bool            // batch.WithWaitInFlight, drawn from w.wrng
	got         map[string]bool // keys whose last store call of its was a Get; w.led.mu
	rep         *batch.Report   // guarded by w.mu
}

// The stream adapter's mutants: deliberate bugs of a stream consumer that the invariants
// must catch (see store.mutant for the store's).
const (
	// The batch runs unordered: every record of a group may run after its group failed.
	mutantStreamUnordered = "stream-unordered"
	// The response reports the last failure rather than the first: the checkpoint passes
	// the earlier failed records.
	mutantStreamReportsLast = "stream-reports-last"
	// An invocation with the wait on waits for a key in flight by processing its group's
	// failed records again (a Process call of its own per poll, as batch.WithWaitInFlight
	// did before idem.DoMet): a poll knows nothing of the record its batch met, and a
	// fail-open guard runs the record over the live run (a.failOpenAfterMet).
	mutantStreamWaitAnew = "stream-wait-anew"
)

var streamSource = batch.Source{Name: "stream", System: "aws_kinesis", Item: "record", IDAttr: "sequence_number"}

// setupStream draws the shards, their records and keys.
func (w *world) setupStream(containers []*container) {
	sp := w.p.stream
	w.streamC = containers
	// A producer's retries draw from a generator of their own, so that a stream without
	// them is what it was before they existed.
	rrng := rand.New(rand.NewPCG(w.cfg.Seed, 0x4e7_4e7))
	for s := range sp.shards {
		sh := &shard{id: s + 1, size: sp.batchSize, sp: sp, next: epoch.Add(time.Duration(w.srng.IntN(3000)) * time.Millisecond)}
		for i := range sp.records {
			if i > 0 && rrng.IntN(8) == 0 {
				// A producer's retry: the record again, with its key, ordering key and
				// data, under a sequence number of its own.
				e := sh.recs[rrng.IntN(i)]
				sh.recs = append(sh.recs, &streamRec{seq: i, id: strconv.Itoa(1000*(s+1) + i), group: e.group, k: e.k})
				continue
			}
			name := fmt.Sprintf("t%d.%d", s+1, i+1)
			k := &keyInfo{kind: "stream", name: name, raw: "key-" + name}
			k.body = fmt.Sprintf(`{"record":%q}`, k.raw)
			k.stored, _ = containers[0].guard.StoredKey(idem.Request{Key: k.raw})
			w.keyNames[k.stored] = k.name
			w.led.keys[k.stored] = &keyState{name: k.name, kind: "stream", old: make(map[string]bool)}
			w.allKeys = append(w.allKeys, k)
			sh.recs = append(sh.recs, &streamRec{
				seq: i, id: strconv.Itoa(1000*(s+1) + i), group: "p" + strconv.Itoa(1+w.srng.IntN(sp.groups)), k: k,
			})
		}
		var b strings.Builder
		for _, r := range sh.recs {
			fmt.Fprintf(&b, " %s(%s)", r.k.name, r.group)
		}
		w.logf("shard %d:%s", sh.id, b.String())
		w.shards = append(w.shards, sh)
	}
}

// esmTick runs the event source mappings once the world is quiet: each takes the response
// of its invocation that ended, and invokes the next batch.
func (w *world) esmTick() {
	for _, sh := range w.shards {
		if a := sh.cur; a != nil {
			w.mu.Lock()
			ended := a.done || a.dead
			w.mu.Unlock()
			if !ended {
				continue
			}
			sh.cur = nil
			w.streamAnswered(sh, a)
		}
		if sh.cp >= len(sh.recs) {
			continue
		}
		if w.final {
			if sh.fin >= 4*len(sh.recs)+12 {
				continue // d.streamStuck, reported at the end
			}
			if w.othersFinishing() {
				continue
			}
		} else if sh.n >= sh.sp.budget {
			continue
		}
		w.invoke(sh)
	}
}

// othersFinishing reports whether a finisher of another kind than the stream is still to
// end. The final phase invokes the stream after them: every step of the stream's
// invocations moves time, and a finisher's run, crowded by them, could outlast the lease
// WithMaxLease caps (no deadline there, and no heartbeat with some profiles).
func (w *world) othersFinishing() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.actors {
		if a.finisher && a.kind != "stream" && !a.done && !a.dead {
			return true
		}
	}
	return false
}

// invoke starts an invocation with the batch from sh's checkpoint, and maybe its duplicate.
func (w *world) invoke(sh *shard) {
	from, to := sh.cp, min(len(sh.recs), sh.cp+sh.size)
	now := w.trueNow()
	start := now
	if sh.next.After(start) {
		start = sh.next
	}
	mk := func(c *container, start time.Time, dup bool) *actor {
		a := &actor{w: w, id: len(w.actors) + 1, kind: "stream", c: c, start: start}
		a.inv = &streamInv{sh: sh, from: from, to: to, dup: dup, concurrency: 1, batchClaims: true}
		if !w.final {
			rng := w.srng
			a.hasDL = true
			a.deadline = start.Add(time.Duration(1500+rng.IntN(7000)) * time.Millisecond)
			a.kill = w.p.has(FeatKill) && rng.IntN(10) < 8
			a.inv.lost = rng.Float64() < sh.sp.lost
			a.inv.concurrency = 1 + rng.IntN(3)
			a.inv.batchClaims = rng.IntN(10) < 7
			if rng.IntN(2) == 0 {
				a.margin = time.Duration(200+rng.IntN(1500)) * time.Millisecond
			}
			a.inv.wait = w.p.has(FeatStreamWait) && w.wrng.IntN(2) == 0
		} else {
			a.finisher = true
		}
		a.extra = fmt.Sprintf(", shard %d records %s..%s, concurrency %d, batch claims %t, margin %s",
			sh.id, sh.recs[from].k.name, sh.recs[to-1].k.name, a.inv.concurrency, a.inv.batchClaims, a.margin)
		if a.inv.wait {
			a.extra += ", waits for keys in flight"
		}
		if dup {
			a.extra += ", a duplicate invocation"
		}
		if a.inv.lost {
			a.extra += ", its response lost"
		}
		a.body = w.streamBody(a)
		w.led.mu.Lock()
		w.led.stats.StreamInvocations++
		if a.inv.wait {
			w.led.stats.StreamWaits++
		}
		w.led.mu.Unlock()
		w.actors = append(w.actors, a)
		w.pending = append(w.pending, a)
		sortByStart(w.pending)
		return a
	}
	if w.final {
		sh.fin++
		sh.cur = mk(w.finalC, start, false)
		return
	}
	sh.n++
	sh.cur = mk(w.streamC[w.srng.IntN(len(w.streamC))], start, false)
	if w.srng.Float64() < sh.sp.dup {
		delay := time.Duration(w.srng.IntN(300)) * time.Millisecond
		if w.srng.IntN(2) == 0 {
			// After a lease's length: the first may still run, its lease ended.
			delay = w.p.lease + time.Duration(w.srng.IntN(2000))*time.Millisecond
		}
		mk(w.streamC[w.srng.IntN(len(w.streamC))], start.Add(delay), true)
	}
}

// streamAnswered takes the response of a, sh's invocation, and moves sh's checkpoint.
func (w *world) streamAnswered(sh *shard, a *actor) {
	inv := a.inv
	now := w.trueNow()
	w.mu.Lock()
	rep, dead := inv.rep, a.dead
	w.mu.Unlock()
	failed := false
	switch {
	case dead:
		// Lambda learns of it when the function times out.
		failed = true
		sh.next = a.deadline
		w.logf("shard %d: %s failed (timed out at %.3fs)", sh.id, a, a.deadline.Sub(epoch).Seconds())
	case inv.lost || rep == nil:
		failed = true
		sh.next = now.Add(w.pollDelay())
		w.logf("shard %d: %s failed (its response was lost): the batch is sent again", sh.id, a)
	}
	if failed {
		if sh.sp.bisect && inv.to-inv.from > 1 {
			sh.size = (inv.to - inv.from + 1) / 2
		}
	} else {
		cp := w.lowestFailed(inv, rep)
		sh.cp = max(sh.cp, cp)
		sh.next = now.Add(w.pollDelay())
		sh.size = sh.sp.batchSize
		failed = cp < inv.to
		w.logf("shard %d: checkpoint at %d of %d", sh.id, sh.cp, len(sh.recs))
		if cp > inv.from {
			sh.fail = 0
		}
	}
	if !w.final || !failed || sh.cp >= len(sh.recs) {
		return
	}
	// The final phase: no faults. Wait out every lease before trying again; a record that
	// keeps failing goes to the on-failure destination, which only a failure remembered
	// for its key (WithRememberFailures) may send it to.
	sh.next = now.Add(w.p.lease + w.p.maxLease + w.p.margin + w.led.maxSkew + time.Second)
	if sh.fail++; sh.fail < 3 {
		return
	}
	sh.fail = 0
	r := sh.recs[sh.cp]
	r.skipped = true
	sh.cp++
	w.logf("shard %d: %s goes to the on-failure destination; checkpoint at %d", sh.id, r.k.name, sh.cp)
	l := &w.led
	l.mu.Lock()
	defer l.mu.Unlock()
	remembered := false
	for _, c := range l.keys[r.k.stored].completions {
		remembered = remembered || c.status == idemstore.StatusFailed
	}
	if !remembered {
		l.violate("d.streamSkipped", r.k.name, "record %s failed three final invocations in a row, every lease ended, without a remembered failure: it would go to the on-failure destination", r.id)
	}
}

// pollDelay draws how long the mapping takes to invoke again after a response: it polls
// the shard, and Lambda invokes.
func (w *world) pollDelay() time.Duration {
	if w.final {
		return time.Millisecond
	}
	return time.Duration(1+w.srng.IntN(500)) * time.Millisecond
}

// lowestFailed returns the checkpoint a response moves to: the lowest failed record's
// index in the shard, or the batch's end.
func (w *world) lowestFailed(inv *streamInv, rep *batch.Report) int {
	cp := inv.to
	first := rep.FirstFailures()
	for _, i := range first {
		cp = min(cp, inv.from+i)
	}
	if w.cfg.mutant == mutantStreamReportsLast && len(first) > 0 {
		cp = inv.from + first[len(first)-1]
	}
	return cp
}

// streamBody is a stream invocation: its batch through the batch engine's ordered mode.
func (w *world) streamBody(a *actor) func(context.Context) {
	return func(ctx context.Context) {
		inv := a.inv
		recs := inv.sh.recs[inv.from:inv.to]
		anew := inv.wait && w.cfg.mutant == mutantStreamWaitAnew
		opts := []batch.Option{batch.WithConcurrency(inv.concurrency), batch.WithBatchClaims(inv.batchClaims), batch.WithWaitInFlight(inv.wait && !anew)}
		if a.margin > 0 {
			opts = append(opts, batch.WithDeadlineMargin(a.margin))
		}
		eng, err := batch.New(a.c.guard, streamSource, opts...)
		if err != nil {
			panic(err)
		}
		items := make([]batch.Item, len(recs))
		for i, r := range recs {
			items[i] = batch.Item{ID: r.id, Group: r.group, Key: r.k.raw, Fingerprint: []byte(r.k.body)}
		}
		mode := batch.Mode{Ordered: w.cfg.mutant != mutantStreamUnordered, RecordBeforeNext: true, Destination: "sim"}
		rep := eng.Process(ctx, items, func(ctx context.Context, i int) error {
			_, err := w.handle(ctx, recs[i].k.stored)
			return err
		}, mode)
		if w.isDead(a) {
			return
		}
		if anew {
			w.waitAnew(ctx, a, eng, items, recs, mode, rep)
			if w.isDead(a) {
				return
			}
		}
		w.streamReported(a, rep)
		w.unstartedReleased(a, rep)
		w.mu.Lock()
		inv.rep = rep
		w.mu.Unlock()
	}
}

// streamPoll reports whether a claim of a's for key is a poll of batch.WithWaitInFlight: a
// is a stream invocation with the wait on, a claim of its met key before, and its last
// call for key was no Get (the guard's own WithWait reads the key before it claims). It
// counts it.
func (w *world) streamPoll(a *actor, key string) bool {
	if a.inv == nil || !a.inv.wait || !w.led.hasMet(a, key) {
		return false
	}
	w.led.mu.Lock()
	defer w.led.mu.Unlock()
	if a.inv.got[key] {
		delete(a.inv.got, key)
		return false
	}
	w.led.stats.StreamPolls++
	return true
}

// streamGot notes a Get of a's for key (see streamPoll).
func (w *world) streamGot(a *actor, key string) {
	if a.inv == nil || !a.inv.wait {
		return
	}
	w.led.mu.Lock()
	defer w.led.mu.Unlock()
	if a.inv.got == nil {
		a.inv.got = make(map[string]bool)
	}
	a.inv.got[key] = true
}

// streamReported checks invariant (g) on a stream invocation's response, whether or not
// the mapping takes it (a duplicate's, a lost one): the checkpoint it moves to passes no
// record whose effect is not recorded.
func (w *world) streamReported(a *actor, rep *batch.Report) {
	inv := a.inv
	cp := w.lowestFailed(inv, rep)
	var b strings.Builder
	for _, o := range rep.Outcomes {
		fmt.Fprintf(&b, " %s:%s", o.ID, o.Status)
		if o.Failed() {
			b.WriteString("/" + string(o.Reason))
		}
	}
	// Invocations that finish in one instant (woken by a context's end, not released from
	// a point) log in the order the Go scheduler picks: the line waits, sorted (see note),
	// unless the schedule is being shut down (no quiet world flushes notes then).
	line := fmt.Sprintf("%s reports%s; checkpoint to %d", a, b.String(), cp)
	w.mu.Lock()
	shutdown := w.shutdown
	w.mu.Unlock()
	if shutdown {
		w.logf("%s", line)
	} else {
		w.note(fmt.Sprintf("%03d 9 reports", a.id), line)
	}
	l := &w.led
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range inv.sh.recs[inv.from:cp] {
		if !l.finished(r) {
			l.violate("g.checkpointPassed", r.k.name, "%s's response moves shard %d's checkpoint to %d, past record %s, whose effect is not recorded", a, inv.sh.id, cp, r.id)
		}
	}
}

// unstartedReleased checks invariant (g) once a stream invocation returns: a record it
// did not start (its group stopped, or too little time left) holds no live lease of its
// claim that the invocation never asked to release, which would refuse the redelivery
// until that lease ends. A release that was made but failed or did not land is the
// store's doing, a claim whose answer was lost granted the caller nothing it knows of,
// and a lease that ends within the margin (on the owner's clock) needs no release.
func (w *world) unstartedReleased(a *actor, rep *batch.Report) {
	now := w.trueNow()
	recs := a.inv.sh.recs[a.inv.from:a.inv.to]
	type held struct {
		k     *keyInfo
		id    string
		token string
	}
	var check []held
	w.led.mu.Lock()
	for i, o := range rep.Outcomes {
		if o.Reason != batch.ReasonGroupStopped && o.Reason != batch.ReasonNotStarted {
			continue
		}
		for _, r := range w.led.runs {
			if r.a == a && r.key == recs[i].k.stored && r.guarded && !r.started && !r.orphan && w.led.claimHeard[r.token] && !w.led.releaseSent[r.token] {
				check = append(check, held{recs[i].k, o.ID, r.token})
			}
		}
	}
	w.led.mu.Unlock()
	for _, h := range check {
		rec := w.store.truth(h.k.stored)
		// A claim within the margin of its lease end on the owner's clock is lost to its
		// owner (DoClaimed does not run it, and Settle does not release it): its lease
		// ends by then.
		lost := now.Add(w.p.margin + max(a.skew0, a.skew(), 0))
		if rec == nil || rec.LeaseToken != h.token || rec.Status != idemstore.StatusInProgress || !rec.LeaseExpires.After(lost) {
			continue
		}
		w.led.mu.Lock()
		w.led.violate("g.unstartedHeld", h.k.name, "%s did not start record %s, yet its claim's lease holds the key until %.3fs and no release of it was made",
			a, h.id, rec.LeaseExpires.Sub(epoch).Seconds())
		w.led.mu.Unlock()
	}
}

// finished reports whether a stream record is done: its key has a COMPLETED record for
// its body, a fail-open run of it succeeded, or it went to the on-failure destination.
// The caller holds l.mu.
func (l *ledger) finished(r *streamRec) bool {
	if r.skipped {
		return true
	}
	fp := fingerprint(r.k.body)
	for _, c := range l.keys[r.k.stored].completions {
		if c.status == idemstore.StatusCompleted && fpCompatible(c.fp, fp) {
			return true
		}
	}
	for _, o := range l.runs {
		if o.key == r.k.stored && !o.guarded && o.succeeded {
			return true
		}
	}
	return false
}

// streamStart checks invariant (g) when run r of a stream record starts: every earlier
// record of its ordering key in its shard is done.
func (w *world) streamStart(a *actor, r *run) {
	sh := a.inv.sh
	l := &w.led
	l.mu.Lock()
	defer l.mu.Unlock()
	// The run is its batch's first record of the key: a producer's retry of it later in
	// the batch shares its outcome.
	at := -1
	for i := a.inv.from; i < a.inv.to && at < 0; i++ {
		if sh.recs[i].k.stored == r.key {
			at = i
		}
	}
	if at < 0 {
		return
	}
	me := sh.recs[at]
	for _, e := range sh.recs[:at] {
		if e.group == me.group && !l.finished(e) {
			l.violate("g.order", me.k.name, "run r%d (%s) of record %s started while record %s of its ordering key %s, earlier in shard %d, is unfinished",
				r.id, a, me.id, e.id, me.group, sh.id)
		}
	}
}

// streamEffect checks invariant (a) for a stream record's effect: no run of a record
// performs its effect once another run's completion of it landed and, when this run's
// claim applied, had not expired (on any clock within the skew).
func (w *world) streamEffect(r *run) {
	l := &w.led
	l.mu.Lock()
	defer l.mu.Unlock()
	if !r.guarded {
		return
	}
	ks := l.keys[r.key]
	for _, c := range ks.completions {
		if c.status == idemstore.StatusCompleted && c.token != r.token && c.at.Before(r.claimAt) && r.claimAt.Add(l.maxSkew).Before(c.expires) {
			l.violate("a.streamTwice", ks.name, "run r%d (%s) performed the record's effect again, though a completion landed at %.3fs, live until %.3fs",
				r.id, r.a, c.at.Sub(epoch).Seconds(), c.expires.Sub(epoch).Seconds())
		}
	}
}

// streamCheck checks invariant (d) on the stream: once the final phase is over, every
// shard's checkpoint has reached its end.
func (w *world) streamCheck() {
	l := &w.led
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sh := range w.shards {
		if sh.cp < len(sh.recs) {
			l.violate("d.streamStuck", sh.recs[sh.cp].k.name, "shard %d's checkpoint stays at record %s after the final phase's %d invocations",
				sh.id, sh.recs[sh.cp].id, sh.fin)
		}
	}
}

// waitAnew is the mutant stream-wait-anew's wait: while a group's first failure is a key
// in flight elsewhere and the invocation's cut-off (its deadline less a second) has not
// come, it waits 100 ms and processes that group's failed records again, in a Process
// call of its own, and puts their outcomes into rep.
func (w *world) waitAnew(ctx context.Context, a *actor, eng *batch.Engine, items []batch.Item, recs []*streamRec, mode batch.Mode, rep *batch.Report) {
	clock := a.c.guard.Clock()
	dl, _ := ctx.Deadline()
	for range 50 {
		again := map[string]bool{}
		for _, i := range rep.FirstFailures() {
			if rep.Outcomes[i].Reason == batch.ReasonInProgress {
				again[rep.Outcomes[i].Group] = true
			}
		}
		if len(again) == 0 || !clock.Now().Before(dl.Add(-time.Second)) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-clock.After(100 * time.Millisecond):
		}
		var idx []int
		for i, o := range rep.Outcomes {
			if o.Failed() && again[o.Group] {
				idx = append(idx, i)
			}
		}
		sub := make([]batch.Item, len(idx))
		for j, i := range idx {
			sub[j] = items[i]
		}
		r := eng.Process(ctx, sub, func(ctx context.Context, j int) error {
			_, err := w.handle(ctx, recs[idx[j]].k.stored)
			return err
		}, mode)
		if w.isDead(a) {
			return
		}
		for j, i := range idx {
			rep.Outcomes[i] = r.Outcomes[j]
		}
	}
}
