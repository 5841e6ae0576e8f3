package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
)

// epoch is simulated time zero. It lies far from wall time, so a stray read of the system
// clock in the code under test would show as a wildly wrong lease.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// pointKind says what a goroutine waits for at a scheduling point.
type pointKind uint8

const (
	pointStore     pointKind = iota // a store request, about to reach the store
	pointStoreResp                  // a store response, applied, on its way back
	pointStep                       // a step of a handler
)

// fault is what the simulated store does to one request.
type fault uint8

const (
	faultNone   fault = iota // apply and answer
	faultBefore              // fail without applying
	faultLose                // apply, then lose the response: the caller gets an error
	faultResend              // apply, lose the response, and the SDK resends the request
	faultLate                // apply, and answer only at a later scheduling point
	// faultDelay: the SDK resends; the resend applies and answers, and the first attempt
	// lands later (FeatDelay).
	faultDelay
)

var faultNames = [...]string{"ok", "fail", "lost", "lost+resend", "late", "resent, first attempt delayed"}

// delayWindow bounds how long after it was sent a delayed request may still land: the
// SDK's retry window (its attempts and their backoff span a few seconds), after which the
// first attempt's connection is long gone.
const delayWindow = 3 * time.Second

// ghost is a request on its way to the store that its caller no longer waits for: the
// first attempt of a request the SDK resent (faultDelay), or a request whose caller's
// context ended while it was in flight. The scheduler lands it at a time it draws within
// delayWindow, or (for a request its caller gave up on) maybe never.
type ghost struct {
	a     *actor
	op    string
	key   string
	label string
	maybe bool // its caller gave up on it: it may never land
	drawn bool // the scheduler drew when it lands
	at    time.Time
	apply func() // lands it: applies it to the store and records it in the ledger
}

// decision is what the scheduler hands a goroutine it releases from a point.
type decision struct {
	abort bool // the schedule is over: unwind without touching the store or the ledger
	fault fault
	plan  *plan         // for a handler's start step
	pause time.Duration // for a handler's work step: how long it stalls (FeatPause)
	// itemFail marks the items of a batch request that fail without applying, while the
	// others apply (FeatItemFail).
	itemFail []bool
}

// point is one goroutine waiting for the scheduler.
type point struct {
	a     *actor
	kind  pointKind
	op    string
	key   string // short key name(s), for the label and the trace
	label string // stable sort key: actor, operation, key
	seq   uint64 // registration order: a tie-breaker that the collision count watches
	ch    chan decision
}

// timer is a pending clock.After.
type timer struct {
	at time.Time // true time
	ch chan time.Time
	c  *clock
}

// clockStep is a step of one container's wall clock (FeatClockStep): at true time at, its
// skew becomes to, as NTP stepping a clock would. What the clock reads moves; timers do
// not (Go's timers use the monotonic clock), nor does the end of a context whose deadline
// was set before the step (a Go context's deadline is a timer, set when it is made).
type clockStep struct {
	at time.Time
	c  *container
	to time.Duration
}

// world is one schedule: the true time, the store, the actors, the ledger, and the
// scheduler that lets exactly one goroutine of the code under test run at a time.
type world struct {
	cfg Config
	rng *rand.Rand // used by the scheduler goroutine only
	// lrng is the same, for the late-delivery faults (FeatDelay). It is a stream of its
	// own, so that schedules without them stay as they were.
	lrng *rand.Rand
	brng *rand.Rand // the same, for FeatBatchMix
	srng *rand.Rand // the same, for FeatStream
	// wrng is the same, for a stream invocation's batch.WithWaitInFlight: a generator of
	// its own, so that an invocation drawn without the wait is what it was before.
	wrng *rand.Rand
	p    profile

	// panicTokens holds the lease tokens of the completions whose attached write panics
	// (Config.AttachPanics), each with its run's number.
	panicTokens sync.Map

	mu       sync.Mutex // guards what goroutines under test touch
	now      time.Time  // true time
	waiting  []*point
	timers   []timer
	ghosts   []*ghost
	shutdown bool
	seq      uint64
	activity atomic.Uint64
	runnable []metrics.Sample // the runtime's counts of runnable goroutines and those in syscalls

	actors  []*actor
	pending []*actor // planned, not yet started, by start time
	wg      sync.WaitGroup

	store    *store
	step     *clockStep        // the wall-clock step still to come (FeatClockStep), or nil
	keyNames map[string]string // stored key → short name
	allKeys  []*keyInfo
	queue    []*message // the SQS queue's messages
	shards   []*shard   // the stream's shards (FeatStream)
	streamC  []*container
	finalC   *container // the final phase's container: no skew
	led      ledger

	trace      []string
	notes      [][2]string // label and line, kept until the world is quiet (see note)
	steps      int
	collisions int
	stuck      bool
	final      bool // the final phase: no faults, no crashes, handlers succeed
}

// quiesce returns once every goroutine of the schedule has reached a scheduling point or
// blocked for good. The simulation runs with GOMAXPROCS(1), so yielding lets every
// runnable goroutine run until it blocks. Every scheduling point, clock read and timer
// bumps the activity counter. The world is quiet once several yields in a row saw no
// activity, and the runtime counts zero goroutines runnable and zero in a system call.
func (w *world) quiesce() {
	// The count of activity is a heuristic: a goroutine preempted (or whose thread the OS
	// descheduled) before it bumped the counter would look quiet. So the runtime confirms.
	// With one P held by the scheduler, its count of runnable goroutines (local and global
	// run queues) is exact. A goroutine in a system call is neither runnable nor blocked
	// for good (the code under test reads the time zone file once per process, when a
	// logger first formats a time). Before Go 1.26, which added the metrics, the rounds
	// alone decide.
	const quietRounds = 3
	for {
		for quiet := 0; quiet < quietRounds; {
			before := w.activity.Load()
			runtime.Gosched()
			if w.activity.Load() == before {
				quiet++
			} else {
				quiet = 0
			}
		}
		metrics.Read(w.runnable)
		if busy(w.runnable[0]) || busy(w.runnable[1]) {
			continue
		}
		w.flushNotes()
		w.drawGhosts()
		return
	}
}

// busy reports whether a goroutine count the runtime reports is above zero.
func busy(s metrics.Sample) bool {
	return s.Value.Kind() == metrics.KindUint64 && s.Value.Uint64() > 0
}

// note keeps a trace line of a goroutine that ran without being released from a point (a
// request abandoned when its context ended). Several such goroutines may wake at once, in
// an order the Go scheduler picks, so their lines wait for the world to be quiet and go
// into the trace sorted by the label of their point.
func (w *world) note(label, line string) {
	w.mu.Lock()
	w.notes = append(w.notes, [2]string{label, line})
	w.mu.Unlock()
}

// flushNotes moves the kept lines into the trace, sorted by label.
func (w *world) flushNotes() {
	w.mu.Lock()
	notes := w.notes
	w.notes = nil
	w.mu.Unlock()
	slices.SortStableFunc(notes, func(x, y [2]string) int { return strings.Compare(x[0], y[0]) })
	for _, n := range notes {
		w.logf("%s", n[1])
	}
}

// block registers a scheduling point for the calling goroutine and waits until the
// scheduler releases it.
func (w *world) block(a *actor, kind pointKind, op, key string) decision {
	p := w.register(a, kind, op, key)
	if p == nil {
		return decision{abort: true}
	}
	return <-p.ch
}

// register adds a scheduling point for the calling goroutine, or returns nil once the
// schedule is over.
func (w *world) register(a *actor, kind pointKind, op, key string) *point {
	p := &point{a: a, kind: kind, op: op, key: key, ch: make(chan decision, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.shutdown {
		return nil
	}
	w.seq++
	p.seq = w.seq
	p.label = fmt.Sprintf("%03d %d %s %s", a.id, kind, op, key)
	w.waiting = append(w.waiting, p)
	w.activity.Add(1)
	return p
}

// blockCtx is block for a store request or its late answer, whose context may end while it
// waits: a real SDK then returns the context's error at once, whether or not the request
// applied (the beats of a heartbeat that stops, a caller whose deadline passes). It returns
// that error, wrapped as a store failure, and a zero decision; with FeatDelay the store
// lets a request abandoned before its point land later all the same (see store.send). A
// dead actor's requests stay frozen all the same: a killed invocation sends and hears
// nothing more.
func (w *world) blockCtx(ctx context.Context, a *actor, kind pointKind, op, key string) (decision, error) {
	p := w.register(a, kind, op, key)
	if p == nil {
		return decision{abort: true}, nil
	}
	select {
	case d := <-p.ch:
		return d, nil
	case <-ctx.Done():
	}
	w.mu.Lock()
	i := slices.Index(w.waiting, p)
	if i < 0 || a.dead { // released meanwhile, or frozen
		w.mu.Unlock()
		return <-p.ch, nil
	}
	w.waiting = slices.Delete(w.waiting, i, i+1)
	w.activity.Add(1)
	w.mu.Unlock()
	w.note(p.label, fmt.Sprintf("%s %s %s ✗ its context ended", a, op, key))
	return decision{}, fmt.Errorf("%w: sim: request abandoned: %w", idem.ErrStore, ctx.Err())
}

// addGhost puts a request on its way to the store without its caller waiting for it: the
// first attempt of a resent request (maybe false: it lands), or one whose caller gave up
// while it was in flight (maybe true: it may never land). apply lands it. The scheduler
// draws when, once the world is quiet (drawGhosts). Once the schedule is over, nothing
// lands any more.
func (w *world) addGhost(a *actor, op, key string, maybe bool, apply func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.shutdown {
		return
	}
	w.ghosts = append(w.ghosts, &ghost{a: a, op: op, key: key, label: fmt.Sprintf("%03d %s %s", a.id, op, key), maybe: maybe, apply: apply})
	w.activity.Add(1)
}

// drawGhosts draws, for every request put on its way since the last time, whether it lands
// (one whose caller gave up: one time in two) and when: within 30 ms, 500 ms or
// delayWindow, one time in three each. So a first attempt lands right after its resend,
// after the caller's next request, or well after the caller gave up. The requests are
// taken in the order of their labels, as the goroutines that sent them may have run in any
// order.
func (w *world) drawGhosts() {
	w.mu.Lock()
	var fresh []*ghost
	for _, g := range w.ghosts {
		if !g.drawn {
			fresh = append(fresh, g)
		}
	}
	now := w.now
	w.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	slices.SortStableFunc(fresh, func(x, y *ghost) int { return strings.Compare(x.label, y.label) })
	var dropped []*ghost
	for _, g := range fresh {
		if g.maybe && w.lrng.IntN(2) == 0 {
			dropped = append(dropped, g)
			w.logf("%s %s %s: the request its caller gave up on never lands", g.a, g.op, g.key)
			continue
		}
		within := []time.Duration{30 * time.Millisecond, 500 * time.Millisecond, delayWindow}[w.lrng.IntN(3)]
		d := time.Duration(1 + w.lrng.Int64N(int64(within)))
		g.at, g.drawn = now.Add(d), true
		w.logf("%s %s %s: its first attempt lands at %.3fs", g.a, g.op, g.key, g.at.Sub(epoch).Seconds())
	}
	w.mu.Lock()
	w.ghosts = slices.DeleteFunc(w.ghosts, func(g *ghost) bool { return slices.Contains(dropped, g) })
	w.mu.Unlock()
}

// landGhosts lands every request due at t, in the order of their times and labels. It runs
// on the scheduler's goroutine, as the store would: no caller waits for them.
func (w *world) landGhosts(t time.Time) {
	w.mu.Lock()
	var due []*ghost
	kept := w.ghosts[:0]
	for _, g := range w.ghosts {
		if g.drawn && !g.at.After(t) {
			due = append(due, g)
		} else {
			kept = append(kept, g)
		}
	}
	w.ghosts = kept
	w.mu.Unlock()
	slices.SortStableFunc(due, func(x, y *ghost) int {
		if c := x.at.Compare(y.at); c != 0 {
			return c
		}
		return strings.Compare(x.label, y.label)
	})
	for _, g := range due {
		w.logf("%s %s %s: its first attempt lands", g.a, g.op, g.key)
		g.apply()
		w.activity.Add(1)
	}
}

// releasable returns the waiting points of live actors, sorted by label.
func (w *world) releasable() []*point {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*point
	for _, p := range w.waiting {
		if !p.a.dead {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(x, y *point) int {
		if c := strings.Compare(x.label, y.label); c != 0 {
			return c
		}
		return int(x.seq) - int(y.seq)
	})
	for i := 1; i < len(out); i++ {
		if out[i].label == out[i-1].label {
			w.collisions++
		}
	}
	return out
}

// release hands p its decision and forgets it.
func (w *world) release(p *point, d decision) {
	w.mu.Lock()
	w.waiting = slices.DeleteFunc(w.waiting, func(q *point) bool { return q == p })
	w.activity.Add(1)
	w.mu.Unlock()
	p.ch <- d
}

// logf appends a line to the trace, stamped with the true time.
func (w *world) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	w.mu.Lock()
	w.trace = append(w.trace, fmt.Sprintf("%9.3fs  %s", w.now.Sub(epoch).Seconds(), line))
	w.mu.Unlock()
}

// clock is a container's clock: true time plus the container's skew. Its timers fire in
// true time, when the scheduler moves time past them.
type clock struct {
	w    *world
	skew time.Duration
}

// Now returns the true time plus the skew.
func (c *clock) Now() time.Time {
	c.w.mu.Lock()
	t := c.w.now.Add(c.skew)
	c.w.mu.Unlock()
	c.w.activity.Add(1)
	return t
}

// After returns a channel that receives once d has passed in simulated time. Once the
// schedule is over it fires at once, as every timer pending then did: the goroutines left
// only unwind, and not every wait in the code under test watches a context that ends with
// the schedule (a completion's backoff runs on a context detached from the caller's, which
// only a timeout in wall time would end).
func (c *clock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.activity.Add(1)
	switch {
	case w.shutdown, d <= 0:
		ch <- w.now.Add(c.skew)
	default:
		w.timers = append(w.timers, timer{at: w.now.Add(d), ch: ch, c: c})
	}
	return ch
}

type actorKey struct{}

// simCtx is an actor's context: its deadline is in simulated time, and it ends when the
// actor's container clock reads it, as a Go context's deadline ends on its host's clock:
// at the deadline less the clock's skew in true time (or when the schedule is over; Lambda
// kills an invocation at its deadline in true time, see fireAt). It embeds a cancel context
// so that contexts derived from it by the code under test propagate cancellation without
// goroutines of their own.
type simCtx struct {
	context.Context
	cancel   context.CancelCauseFunc
	a        *actor
	deadline time.Time
	endAt    time.Time // true time at which the container's clock reads the deadline
	hasDL    bool
	expired  atomic.Bool
	parent   *simCtx // a request's own context (FeatBatchMix): the actor's, its parent
}

func newCtx(a *actor, deadline time.Time, hasDL bool) *simCtx {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &simCtx{Context: ctx, cancel: cancel, a: a, deadline: deadline, endAt: deadline.Add(-a.skew()), hasDL: hasDL}
}

// subCtx returns a context derived from the actor's context c, with a deadline of its own
// before c's (one request's of a batch): it ends when c ends or when the container's clock
// reads deadline, whichever comes first. The scheduler ends it (see fireAt).
func (w *world) subCtx(c *simCtx, deadline time.Time) *simCtx {
	ctx, cancel := context.WithCancelCause(c)
	s := &simCtx{Context: ctx, cancel: cancel, a: c.a, deadline: deadline, endAt: deadline.Add(-c.a.skew()), hasDL: true, parent: c}
	w.mu.Lock()
	c.a.subs = append(c.a.subs, s)
	past := !s.endAt.After(w.now)
	w.mu.Unlock()
	if past {
		// Its clock reads the deadline already.
		s.expired.Store(true)
		s.cancel(context.DeadlineExceeded)
	}
	w.activity.Add(1)
	return s
}

// subCtxs returns a's request contexts (FeatBatchMix).
func (w *world) subCtxs(a *actor) []*simCtx {
	w.mu.Lock()
	defer w.mu.Unlock()
	return a.subs
}

// Deadline returns the simulated deadline.
func (c *simCtx) Deadline() (time.Time, bool) {
	c.a.w.activity.Add(1)
	return c.deadline, c.hasDL
}

// Err reports context.DeadlineExceeded once simulated time passed the deadline.
func (c *simCtx) Err() error {
	err := c.Context.Err()
	if err != nil && (c.expired.Load() || c.parent != nil && c.parent.expired.Load()) {
		return context.DeadlineExceeded
	}
	return err
}

// Value returns the actor for actorKey and defers every other key.
func (c *simCtx) Value(key any) any {
	if key == (actorKey{}) {
		return c.a
	}
	return c.Context.Value(key)
}

// reqKey is the context key of a request's index in its batch (FeatBatchMix).
type reqKey struct{}

// reqTag returns "@i" for a context of request i of a batch with duplicate keys, else "":
// the labels of its points then differ from those of the other requests of its key.
func reqTag(ctx context.Context) string {
	if i, ok := ctx.Value(reqKey{}).(int); ok {
		return "@" + strconv.Itoa(i)
	}
	return ""
}

// actorOf returns the actor whose context ctx derives from.
func actorOf(ctx context.Context) *actor {
	a, _ := ctx.Value(actorKey{}).(*actor)
	if a == nil {
		panic("sim: a store call or handler step without an actor in its context")
	}
	return a
}

// nextEvent returns the earliest true time at which something happens without a point
// being released: a timer, a deadline, an actor's start.
func (w *world) nextEvent() (time.Time, bool) {
	var t time.Time
	ok := false
	consider := func(x time.Time) {
		if !ok || x.Before(t) {
			t, ok = x, true
		}
	}
	w.mu.Lock()
	for _, tm := range w.timers {
		consider(tm.at)
	}
	for _, g := range w.ghosts {
		if g.drawn {
			consider(g.at)
		}
	}
	w.mu.Unlock()
	for _, a := range w.actors {
		if a.started && !a.dead && !a.done && a.ctx.hasDL && !a.ctx.expired.Load() {
			consider(a.ctx.endAt)
			if a.kill {
				consider(a.deadline)
			}
		}
		if a.started && !a.dead && !a.done {
			for _, c := range w.subCtxs(a) {
				if !c.expired.Load() {
					consider(c.endAt)
				}
			}
		}
	}
	if len(w.pending) > 0 {
		consider(w.pending[0].start)
	}
	if w.step != nil {
		consider(w.step.at)
	}
	return t, ok
}

// advanceTo moves true time to target, stopping at every event on the way to let the
// goroutines it wakes reach their next points. Unless the store stalls, time stops moving
// at an event that sent a store request: store calls are fast.
func (w *world) advanceTo(target time.Time, stall bool) {
	for {
		t, ok := w.nextEvent()
		if !ok || t.After(target) {
			break
		}
		w.setNow(t)
		w.fireAt(t)
		w.quiesce()
		if !stall && w.storeInFlight(w.releasable()) {
			return
		}
	}
	w.setNow(target)
}

// storeInFlight reports whether pts hold a store request or response.
func (w *world) storeInFlight(pts []*point) bool {
	for _, p := range pts {
		if p.kind != pointStep {
			return true
		}
	}
	return false
}

func (w *world) setNow(t time.Time) {
	w.mu.Lock()
	if t.After(w.now) {
		w.now = t
	}
	w.mu.Unlock()
	w.led.observeTime(w, t)
}

// fireAt runs everything due at t: Lambda kills at deadlines (in true time), then context
// deadlines (on the container's clock; a killed invocation's context ends with it), then
// requests landing late, then timers (all due timers at once, so their order never
// matters), then actor starts.
func (w *world) fireAt(t time.Time) {
	if st := w.step; st != nil && !st.at.After(t) {
		w.step = nil
		w.mu.Lock()
		from := st.c.clk.skew
		st.c.clk.skew = st.to
		w.mu.Unlock()
		w.led.mu.Lock()
		w.led.maxSkew = max(w.led.maxSkew, st.to)
		w.led.mu.Unlock()
		w.logf("c%d: its clock steps from skew %s to %s", st.c.id, from, st.to)
		w.activity.Add(1)
	}
	for _, a := range w.actors {
		if !a.started || a.done || a.dead {
			continue
		}
		for _, c := range w.subCtxs(a) {
			if !c.expired.Load() && !c.endAt.After(t) {
				c.expired.Store(true)
				c.cancel(context.DeadlineExceeded)
				w.activity.Add(1)
			}
		}
		if !a.ctx.hasDL || a.ctx.expired.Load() {
			continue
		}
		killed := a.kill && !a.deadline.After(t)
		if killed {
			w.kill(a, "killed at its deadline")
		} else if a.ctx.endAt.After(t) {
			continue
		}
		a.ctx.expired.Store(true)
		a.ctx.cancel(context.DeadlineExceeded)
		w.activity.Add(1)
	}
	w.landGhosts(t)
	w.mu.Lock()
	var due []timer
	kept := w.timers[:0]
	for _, tm := range w.timers {
		if tm.at.After(t) {
			kept = append(kept, tm)
		} else {
			due = append(due, tm)
		}
	}
	w.timers = kept
	w.mu.Unlock()
	for _, tm := range due {
		tm.ch <- t.Add(tm.c.skew)
		w.activity.Add(1)
	}
	for len(w.pending) > 0 && !w.pending[0].start.After(t) {
		a := w.pending[0]
		w.pending = w.pending[1:]
		w.startActor(a)
	}
}

// kill stops a for good: its goroutines stay at their points until the schedule is over.
func (w *world) kill(a *actor, why string) {
	if a.dead {
		return
	}
	w.mu.Lock()
	a.dead = true
	a.killedAt = w.now
	w.mu.Unlock()
	a.killedByDeadline = why == "killed at its deadline"
	w.logf("%s %s", a, why)
	w.led.actorDied(w, a)
}

// startActor starts a's goroutine.
func (w *world) startActor(a *actor) {
	a.started = true
	a.skew0 = a.skew()
	a.ctx = newCtx(a, a.deadline, a.hasDL)
	if a.hasDL && !a.ctx.endAt.After(w.trueNow()) {
		// Its clock runs so far ahead that it reads the deadline already.
		a.ctx.expired.Store(true)
		a.ctx.cancel(context.DeadlineExceeded)
	}
	if a.kind == "sqs" || a.kind == "fifo" {
		w.drawSQS(a)
	}
	w.logf("%s starts%s", a, a.describe())
	w.wg.Add(1)
	w.activity.Add(1)
	go func() {
		defer w.wg.Done()
		a.body(a.ctx)
		w.mu.Lock()
		a.done = true
		w.mu.Unlock()
		w.activity.Add(1)
	}()
}

// live reports whether some started actor is neither done nor dead, or one is still to
// start.
func (w *world) live() bool {
	if len(w.pending) > 0 {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.actors {
		if a.started && !a.done && !a.dead {
			return true
		}
	}
	return false
}

// schedule runs the scheduler until no actor can make progress.
func (w *world) schedule() {
	for {
		w.quiesce()
		w.esmTick()
		if w.steps >= w.cfg.maxSteps() {
			w.logf("step budget of %d spent", w.cfg.maxSteps())
			w.stuck = true
			return
		}
		pts := w.releasable()
		if len(pts) == 0 {
			t, ok := w.nextEvent()
			if !ok {
				if w.live() {
					w.stuck = true
				}
				return
			}
			w.advanceTo(t, false)
			continue
		}
		w.steps++
		if w.rng.Float64() < w.p.advance {
			w.advanceTo(w.advanceTarget(pts))
			continue
		}
		p := pts[w.rng.IntN(len(pts))]
		if !w.final && !p.a.finisher && w.rng.Float64() < w.p.crash {
			w.kill(p.a, fmt.Sprintf("crashes before %s %s", p.op, p.key))
			continue
		}
		w.release(p, w.decide(p))
	}
}

// advanceTarget draws how far time moves: to the next event, by a little, or by a lot
// (past leases and deadlines). While a store request is in flight, time moves by at most
// storeLatency, unless the store stalls (FeatLate): store calls are fast, and a call that
// takes seconds is a fault to inject, not the rule. In the final phase time moves little.
func (w *world) advanceTarget(pts []*point) (time.Time, bool) {
	w.mu.Lock()
	now := w.now
	w.mu.Unlock()
	const storeLatency = 30 * time.Millisecond
	stall := !w.final && w.rng.Float64() < w.p.late
	if w.final || (w.storeInFlight(pts) && !stall) {
		return now.Add(time.Duration(1 + w.rng.Int64N(int64(storeLatency)))), false
	}
	switch r := w.rng.Float64(); {
	case r < 0.45:
		if t, ok := w.nextEvent(); ok {
			return t, stall
		}
		return now.Add(time.Duration(1+w.rng.IntN(200)) * time.Millisecond), stall
	case r < 0.8:
		return now.Add(time.Duration(1+w.rng.IntN(300)) * time.Millisecond), stall
	default:
		return now.Add(time.Duration(500+w.rng.IntN(6000)) * time.Millisecond), stall
	}
}

// decide draws what happens at a released point.
func (w *world) decide(p *point) decision {
	switch p.kind {
	case pointStore:
		f := w.drawFault(p.op)
		d := decision{fault: f}
		extra := ""
		if f != faultBefore && strings.Contains(p.op, "Many") {
			n := strings.Count(p.key, "+") + 1
			d.itemFail = w.drawItemFail(n)
			if d.itemFail != nil {
				extra = fmt.Sprintf(", items failing %v", d.itemFail)
			}
			if p.op == "claimMany" {
				if met := w.drawMetFail(n); met != nil {
					fail := make([]bool, n, 3*n)
					copy(fail, d.itemFail)
					d.itemFail = append(fail, met...)
					extra += fmt.Sprintf(", items met and failing (unread) %v", met)
				}
			}
		}
		w.logf("%s %s %s → %s%s", p.a, p.op, p.key, faultNames[f], extra)
		return d
	case pointStoreResp:
		w.logf("%s %s %s ← late answer", p.a, p.op, p.key)
		return decision{}
	default:
		d := decision{}
		switch {
		case p.op == "start":
			d.plan = w.drawPlan(p.a)
			w.logf("%s handler %s starts: %s", p.a, p.key, d.plan)
		case p.op == "work" && !w.final && w.p.pause > 0 && w.lrng.Float64() < w.p.pause:
			d.pause = time.Duration(1 + w.lrng.Int64N(int64(2*w.p.lease)))
			if w.p.heartbeat > 0 {
				// At most a hundred beats meanwhile, within the step budget (an interval
				// clamped to what New accepts may be tiny).
				d.pause = min(d.pause, 100*w.p.heartbeat)
			}
			w.logf("%s handler %s work: stalls for %s", p.a, p.key, d.pause)
		default:
			w.logf("%s handler %s %s", p.a, p.key, p.op)
		}
		return d
	}
}

// drawFault draws the fault for a request op. A lost response is resent by the SDK for a
// claim, and with FeatDelay for every write; with FeatDelay a write that would apply and
// answer may instead be resent, its first attempt landing later (faultDelay). The draws of
// FeatDelay come from a generator of their own, so that schedules without it are those of
// the simulation before it.
func (w *world) drawFault(op string) fault {
	if w.final {
		return faultNone
	}
	r := w.rng.Float64()
	p := &w.p
	write := op != "get"
	switch {
	case r < p.failBefore:
		return faultBefore
	case r < p.failBefore+p.lose:
		if (op == "claim" || op == "claimMany") && w.rng.IntN(2) == 0 {
			return faultResend
		}
		if write && p.has(FeatDelay) && w.lrng.IntN(2) == 0 {
			return faultResend
		}
		return faultLose
	case r < p.failBefore+p.lose+p.late:
		return faultLate
	}
	if write && p.delay > 0 && w.lrng.Float64() < p.delay {
		return faultDelay
	}
	return faultNone
}

// drawItemFail draws which of the n items of a batch request fail without applying while
// the others apply (FeatItemFail), or nil for none: as a DynamoDB batch answers some items
// unprocessed, or a store's per-item writes fail one by one.
func (w *world) drawItemFail(n int) []bool {
	if w.final || w.p.itemFail == 0 || n < 2 || w.lrng.Float64() >= w.p.itemFail {
		return nil
	}
	fail := make([]bool, n)
	some := false
	for i := range fail {
		fail[i] = w.lrng.IntN(2) == 0
		some = some || fail[i]
	}
	if !some {
		fail[w.lrng.IntN(n)] = true
	}
	return fail
}

// drawMetFail draws which of the n items of a batch claim fail with the record they met
// (FeatBatchMix), as 2n bits (see metFail), or nil for none.
func (w *world) drawMetFail(n int) []bool {
	if w.final || w.p.metFail == 0 || w.brng.Float64() >= w.p.metFail {
		return nil
	}
	bits := make([]bool, 2*n)
	some := false
	for i := range n {
		bits[i] = w.brng.IntN(2) == 0
		bits[n+i] = w.brng.IntN(2) == 0
		some = some || bits[i]
	}
	if !some {
		bits[w.brng.IntN(n)] = true
	}
	return bits
}

// finish ends the schedule: every goroutine still waiting is released with abort, every
// context ends, every pending timer fires, and the function returns once every actor
// goroutine has returned.
func (w *world) finish() {
	w.mu.Lock()
	w.shutdown = true
	waiting := w.waiting
	w.waiting = nil
	timers := w.timers
	w.timers = nil
	w.ghosts = nil
	now := w.now
	w.mu.Unlock()
	for _, a := range w.actors {
		if a.started {
			a.ctx.cancel(errShutdown)
		}
	}
	for _, p := range waiting {
		p.ch <- decision{abort: true}
	}
	for _, tm := range timers {
		tm.ch <- now.Add(tm.c.skew)
	}
	w.wg.Wait()
}
