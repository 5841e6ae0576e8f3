package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/lambdawrap"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqs"
)

// container is one warm Lambda container: its clock (skewed) and its guard (with its own
// local cache).
type container struct {
	id    int
	clk   *clock
	guard *idem.Guard
}

// keyInfo is one idempotency key of the schedule.
type keyInfo struct {
	kind   string // do (Do and the batch path), sqs, http
	name   string // short name for traces: d1, s1, h1
	raw    string // the caller's key
	stored string // the guard's stored key
	body   string // the canonical request body
}

// message is one SQS message of the schedule's queue.
type message struct {
	id       string
	k        *keyInfo
	body     string
	group    string
	received int
	acked    bool
}

// actor is one invocation (or caller): the unit that crashes, is killed at its deadline,
// and labels its scheduling points.
type actor struct {
	w        *world
	id       int
	kind     string // do, batch, sqs, fifo, http
	c        *container
	finisher bool // runs in the final phase, without faults

	start    time.Time
	deadline time.Time
	hasDL    bool
	kill     bool

	ctx              *simCtx
	skew0            time.Duration // its clock's skew at its start (FeatClockStep may step it)
	started          bool
	done, dead       bool
	killedAt         time.Time
	killedByDeadline bool

	keys []*keyInfo // do, batch, http: the keys it calls with
	// A batch caller's requests beyond one per key (FeatBatchMix): bodies[i] is request i's
	// body (keys[i]'s canonical body if empty), dl[i] its own deadline if not zero, before
	// the actor's.
	bodies []string
	dl     []time.Time
	subs   []*simCtx // the requests' own contexts, guarded by w.mu
	body   func(ctx context.Context)
	extra  string // for the trace

	// An SQS invocation's batch and handler options, drawn when it starts.
	batch       []*message
	records     []events.SQSMessage
	concurrency int
	batchClaims bool
	margin      time.Duration

	inv *streamInv // a stream invocation's batch (FeatStream)
}

func (a *actor) String() string { return fmt.Sprintf("a%d/%s", a.id, a.kind) }

// describe says what a starts with, for the trace.
func (a *actor) describe() string {
	s := " on c" + strconv.Itoa(a.c.id)
	if a.hasDL {
		s += fmt.Sprintf(", deadline %.3fs", a.deadline.Sub(epoch).Seconds())
		if a.kill {
			s += " (killed there)"
		}
	}
	for _, k := range a.keys {
		s += " " + k.name
	}
	return s + a.extra
}

// pastLeaseClass names the class of a run of a's whose context outlived its lease: with a
// heartbeat whose interval exceeds half the lease WithMaxLease caps, with a heartbeat
// otherwise (its extensions failed or came late), or without one (a lease capped below the
// deadline, or without a deadline).
func (a *actor) pastLeaseClass() string {
	p := &a.w.p
	switch {
	case p.heartbeat > 0 && p.maxLease > 0 && p.heartbeat > min(p.lease, p.maxLease)/2:
		return "a.pastLease.heartbeatOverCap"
	case p.heartbeat > 0:
		return "a.pastLease.heartbeatFailed"
	default:
		return "a.pastLease.capped"
	}
}

// skew is how far a's clock runs ahead of true time (negative: behind).
func (a *actor) skew() time.Duration { return a.c.clk.skew }

// settlesBeforeKill reports whether an SQS invocation's early settle, at its deadline less
// its margin on its own clock, comes before Lambda kills it at the deadline in true time:
// its clock runs behind by less than the margin in effect (the explicit one, else the
// default lowered to a quarter of the time its clock showed left at its start, as the sqs
// wrapper does).
func (a *actor) settlesBeforeKill() bool {
	// After a step of its clock (FeatClockStep), the lower reading: a step back may come
	// before the wrapper reads the time it sets its settle timer by. The margin it lowers
	// from the time left at its start, read before any step.
	skew := min(a.skew0, a.skew())
	margin := a.margin
	if margin == 0 {
		margin = min(sqs.DefaultDeadlineMargin, a.deadline.Sub(a.start.Add(a.skew0))/4)
	}
	return -skew < margin
}

// deadlineLease reports whether a lease ending at end ends at a's deadline plus the margin:
// the end every clock agrees on, whatever the owner's skew.
func (a *actor) deadlineLease(end time.Time) bool {
	return a.hasDL && end.Equal(a.deadline.Add(a.w.p.margin))
}

// leaseWhy describes the lease configuration, for a violation's detail.
func (a *actor) leaseWhy() string {
	p := &a.w.p
	s := fmt.Sprintf("deadline %t, lease %s, maxLease %s, heartbeat %s, margin %s, clock skew %s", a.hasDL, p.lease, p.maxLease, p.heartbeat, p.margin, a.skew())
	if a.hasDL {
		s += fmt.Sprintf(", deadline at %.3fs", a.deadline.Sub(epoch).Seconds())
	}
	return s
}

// lambdaBatch reports whether a is an SQS or stream invocation, whose batch path
// promises to record finished outcomes before the deadline.
func (a *actor) lambdaBatch() bool { return a.kind == "sqs" || a.kind == "fifo" || a.kind == "stream" }

func fingerprint(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

// setup draws the schedule: containers, keys, messages and actors.
func (w *world) setup() error {
	rng := w.rng
	p := &w.p
	opts := []idem.Option{
		idem.WithScope("sim"),
		idem.WithLeaseMargin(p.margin),
		idem.WithLease(p.lease),
		idem.WithExpiry(p.expiry),
		idem.WithCache(p.cache),
		idem.WithFailOpen(p.failOpen),
	}
	if p.maxLease > 0 {
		opts = append(opts, idem.WithMaxLease(p.maxLease))
	}
	if p.heartbeat > 0 {
		// An interval New refuses (above half the lease it grants, less the margin) is
		// clamped to the largest it accepts, and the refusal is checked: that refusal is
		// the fix for heartbeats validated against WithLease alone.
		if _, err := idem.New(memstore.New(), "sim", append(opts, idem.WithHeartbeat(p.heartbeat))...); err != nil {
			lease := p.lease
			if p.maxLease > 0 {
				lease = min(lease, p.maxLease)
			}
			valid := (lease - p.margin) / 2
			if p.heartbeat <= valid {
				return fmt.Errorf("heartbeat %s refused though within %s: %w", p.heartbeat, valid, err)
			}
			w.logf("heartbeat %s refused by New; clamped to %s", p.heartbeat, max(valid, 0))
			p.heartbeat = max(valid, 0)
		}
		if p.heartbeat > 0 {
			opts = append(opts, idem.WithHeartbeat(p.heartbeat))
		}
	}
	if p.waitMax > 0 {
		opts = append(opts, idem.WithWait(p.waitMax, p.waitPoll))
	}
	if p.remember {
		opts = append(opts, idem.WithRememberFailures(func(err error) bool { return errors.Is(err, errPermanent) }))
	}
	var st idemstore.Store = w.store
	if p.has(FeatBatchStore) {
		st = &batchStore{w.store}
	}
	newContainer := func(id int, skew time.Duration) (*container, error) {
		clk := &clock{w: w, skew: skew}
		g, err := idem.New(st, "sim", append(opts, idem.WithClock(clk))...)
		if err != nil {
			return nil, err
		}
		return &container{id: id, clk: clk, guard: g}, nil
	}
	var containers []*container
	for i := range p.containers {
		var skew time.Duration
		if p.has(FeatSkew) {
			// Behind by up to 2 s, or ahead by less than the lease margin: the tolerance
			// RELIABILITY.md states.
			skew = time.Duration(rng.Int64N(int64(2*time.Second+p.margin*9/10))) - 2*time.Second
			w.led.maxSkew = max(w.led.maxSkew, skew)
		}
		c, err := newContainer(i+1, skew)
		if err != nil {
			return err
		}
		if skew != 0 {
			w.logf("c%d: clock skew %s", c.id, skew)
		}
		containers = append(containers, c)
	}
	w.finalC, _ = newContainer(0, 0)
	if p.has(FeatClockStep) {
		// Once, to a skew within the range FeatSkew draws from: behind by up to 2 s, or
		// ahead by less than the lease margin.
		lr := w.lrng
		w.step = &clockStep{
			at: epoch.Add(time.Duration(200+lr.IntN(8000)) * time.Millisecond),
			c:  containers[lr.IntN(len(containers))],
			to: time.Duration(lr.Int64N(int64(2*time.Second+p.margin*9/10))) - 2*time.Second,
		}
		w.logf("c%d: its clock will step at %.3fs to skew %s", w.step.c.id, w.step.at.Sub(epoch).Seconds(), w.step.to)
	}

	kinds := []string{}
	for _, k := range []struct {
		f    Features
		name string
	}{{FeatDo, "do"}, {FeatBatch, "batch"}, {FeatSQS, "sqs"}, {FeatFIFO, "fifo"}, {FeatHTTP, "http"}} {
		if p.has(k.f) {
			kinds = append(kinds, k.name)
		}
	}
	keysOf := map[string][]*keyInfo{}
	newKeys := func(kind, prefix string) {
		if keysOf[kind] != nil {
			return
		}
		for i := range p.keys {
			k := &keyInfo{kind: kind, name: prefix + strconv.Itoa(i+1), raw: "key-" + prefix + strconv.Itoa(i+1)}
			k.body = fmt.Sprintf(`{"for":%q}`, k.raw)
			k.stored, _ = containers[0].guard.StoredKey(idem.Request{Key: k.raw})
			w.keyNames[k.stored] = k.name
			w.led.keys[k.stored] = &keyState{name: k.name, kind: kind, old: make(map[string]bool)}
			keysOf[kind] = append(keysOf[kind], k)
			w.allKeys = append(w.allKeys, k)
		}
	}
	for _, kind := range kinds {
		switch kind {
		case "do", "batch":
			newKeys("do", "d")
		case "sqs", "fifo":
			newKeys("sqs", "s")
		case "http":
			newKeys("http", "h")
		}
	}
	for i, k := range keysOf["sqs"] {
		w.queue = append(w.queue, &message{id: "m" + k.name, k: k, body: k.body, group: "g" + strconv.Itoa(i%2)})
		if rng.IntN(10) == 0 {
			w.queue = append(w.queue, &message{id: "m" + k.name + "x", k: k, body: k.body + " other", group: "g" + strconv.Itoa(i%2)})
		}
	}

	for i := range p.actors {
		if len(kinds) == 0 {
			break // a stream alone (FeatStream)
		}
		a := &actor{w: w, id: i + 1, kind: kinds[rng.IntN(len(kinds))], c: containers[rng.IntN(len(containers))]}
		a.start = epoch.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		lambda := a.kind != "do" && a.kind != "batch"
		if lambda || rng.IntN(10) < 6 {
			a.hasDL = true
			a.deadline = a.start.Add(time.Duration(1500+rng.IntN(7000)) * time.Millisecond)
			a.kill = p.has(FeatKill) && rng.IntN(10) < 8
		}
		switch a.kind {
		case "do":
			k := keysOf["do"][rng.IntN(len(keysOf["do"]))]
			a.keys = []*keyInfo{k}
			body := k.body
			if rng.IntN(20) == 0 {
				body += " other"
				a.extra = " (other body)"
			}
			a.body = w.doBody(a, k, body)
		case "batch":
			ks := keysOf["do"]
			perm := rng.Perm(len(ks))
			n := 1 + rng.IntN(len(ks))
			for _, j := range perm[:n] {
				a.keys = append(a.keys, ks[j])
			}
			concurrent, early := rng.IntN(2) == 0, rng.IntN(3) == 0
			if concurrent {
				a.extra += " concurrently"
			}
			if early {
				a.extra += ", settling early too"
			}
			loose := p.has(FeatBatchMix) && w.mixBatch(a)
			a.body = w.batchBody(a, concurrent, early, loose)
		case "sqs", "fifo":
			a.body = w.sqsBody(a)
		case "http":
			k := keysOf["http"][rng.IntN(len(keysOf["http"]))]
			a.keys = []*keyInfo{k}
			a.body = w.httpBody(a, k, k.body)
		}
		w.actors = append(w.actors, a)
	}
	w.pending = append(w.pending, w.actors...)
	sortByStart(w.pending)
	if p.stream != nil {
		w.setupStream(containers)
	}
	return nil
}

func sortByStart(as []*actor) {
	for i := 1; i < len(as); i++ {
		for j := i; j > 0 && as[j].start.Before(as[j-1].start); j-- {
			as[j], as[j-1] = as[j-1], as[j]
		}
	}
}

// recoverPanic turns a panic of a simulated handler back into an error; any other panic
// goes on.
func recoverPanic(err *error) {
	if v := recover(); v != nil {
		if _, ok := v.(panicValue); !ok {
			panic(v)
		}
		*err = fmt.Errorf("sim: handler panicked")
	}
}

// doBody is an idem.Do caller.
func (w *world) doBody(a *actor, k *keyInfo, body string) func(context.Context) {
	return func(ctx context.Context) {
		var (
			v        string
			replayed bool
			err      error
		)
		func() {
			defer recoverPanic(&err)
			v, replayed, err = idem.Do(ctx, a.c.guard, idem.Request{Key: k.raw, Fingerprint: []byte(body)},
				func(ctx context.Context) (string, error) { return w.handle(ctx, k.stored) })
		}()
		w.answered(a, k, body, v, replayed, err)
	}
}

// answered checks a Do or DoClaimed answer to a request of k with body against the ledger
// (invariant b), and in the final phase that the key settled (invariant d).
func (w *world) answered(a *actor, k *keyInfo, body, v string, replayed bool, err error) {
	if line := w.answerLine(a, k, v, replayed, err); line != "" {
		w.logf("%s", line)
	}
	w.judged(a, k, body, v, replayed, err)
}

// answerLine is the trace line of an answer, or "" for none (the schedule is over, or a
// is dead).
func (w *world) answerLine(a *actor, k *keyInfo, v string, replayed bool, err error) string {
	var failed *idem.FailedError
	switch {
	case errors.Is(err, errShutdown), w.isDead(a):
		return ""
	case err == nil:
		return fmt.Sprintf("%s answered %s: %q (replayed %t)", a, k.name, v, replayed)
	case errors.As(err, &failed):
		return fmt.Sprintf("%s answered %s: remembered failure", a, k.name)
	default:
		return fmt.Sprintf("%s answered %s: error %v", a, k.name, err)
	}
}

// judged is answered without the trace line.
func (w *world) judged(a *actor, k *keyInfo, body, v string, replayed bool, err error) {
	var failed *idem.FailedError
	switch {
	case errors.Is(err, errShutdown), w.isDead(a):
		return
	case err == nil:
		w.led.answer(w, a, k.stored, fingerprint(body), v, replayed, false)
		return
	case errors.As(err, &failed):
		w.led.answer(w, a, k.stored, fingerprint(body), failed.Message, true, true)
		return
	}
	if errors.Is(err, idem.ErrPayloadMismatch) {
		w.led.mismatch(a, k.stored, fingerprint(body))
	}
	if a.finisher && !errors.Is(err, idem.ErrPayloadMismatch) && !errors.Is(err, errPermanent) {
		w.led.mu.Lock()
		w.led.violate("d.notSettled", k.name, "the final call after every lease ended got %v", err)
		w.led.mu.Unlock()
	}
}

// mixBatch draws a batch caller's extras (FeatBatchMix) from the generator of its own:
// more requests for its keys (a duplicate, or another body), now and then more than 25 in
// all (a DynamoDB batch's limit), placed anywhere (so a key's first request may have the
// other body); some requests with a deadline of their own, before the caller's; and
// whether the final Settle overlaps the earlier ones (loose) rather than waiting for them.
func (w *world) mixBatch(a *actor) (loose bool) {
	br := w.brng
	n := len(a.keys)
	a.bodies = make([]string, n)
	extra := 0
	switch r := br.IntN(10); {
	case r < 5:
		extra = 1 + br.IntN(3)
	case r == 5:
		extra = 26 - n + br.IntN(5)
	}
	for range extra {
		k := a.keys[br.IntN(n)]
		body := k.body
		if br.IntN(3) == 0 {
			body += " other"
		}
		at := br.IntN(len(a.keys) + 1)
		a.keys = slices.Insert(a.keys, at, k)
		a.bodies = slices.Insert(a.bodies, at, body)
	}
	a.dl = make([]time.Time, len(a.keys))
	for i := range a.keys {
		if br.IntN(3) != 0 {
			continue
		}
		if a.hasDL {
			a.dl[i] = a.start.Add(time.Duration(1 + br.Int64N(int64(a.deadline.Sub(a.start)))))
		} else {
			a.dl[i] = a.start.Add(time.Duration(300+br.IntN(5000)) * time.Millisecond)
		}
	}
	loose = br.IntN(2) == 0
	var desc []string
	for i, k := range a.keys {
		d := k.name
		if a.bodies[i] != "" && a.bodies[i] != k.body {
			d += "(other body)"
		}
		if !a.dl[i].IsZero() {
			d += fmt.Sprintf("(deadline %.3fs)", a.dl[i].Sub(epoch).Seconds())
		}
		desc = append(desc, d)
	}
	a.extra += "; requests " + strings.Join(desc, " ")
	if loose {
		a.extra += "; the final Settle overlapping the others"
	}
	return loose
}

// bodyOf returns the body of a's request i.
func (a *actor) bodyOf(i int) string {
	if i < len(a.bodies) && a.bodies[i] != "" {
		return a.bodies[i]
	}
	return a.keys[i].body
}

// batchSettleMargin is how long before its deadline, on its own clock, a batch caller
// settles if handlers still run.
const batchSettleMargin = 100 * time.Millisecond

// batchResult is one DoClaimed answer of a batch caller.
type batchResult struct {
	v        string
	replayed bool
	err      error
	done     bool            // DoClaimed returned
	ctx      context.Context // the context the request was given
}

// batchBody is a caller of Guard.Claim, DoClaimed and Settle over a's requests. Every
// Settle's answer is judged (ledger.settleAnswered); with loose, the final Settle does not
// wait for the earlier ones still under way.
func (w *world) batchBody(a *actor, concurrent, early, loose bool) func(context.Context) {
	return func(ctx context.Context) {
		reqs := make([]idem.Request, len(a.keys))
		ctxs := make([]context.Context, len(a.keys))
		for i, k := range a.keys {
			reqs[i] = idem.Request{Key: k.raw, Fingerprint: []byte(a.bodyOf(i))}
			ctxs[i] = ctx
			if i < len(a.dl) && !a.dl[i].IsZero() {
				ctxs[i] = w.subCtx(ctx.(*simCtx), a.dl[i])
			}
			if a.bodies != nil {
				ctxs[i] = context.WithValue(ctxs[i], reqKey{}, i)
			}
		}
		b := a.c.guard.Claim(ctx, reqs)
		var mu sync.Mutex // guards results
		results := make([]batchResult, len(reqs))
		doOne := func(i int) {
			r := batchResult{ctx: ctxs[i]}
			k := a.keys[i]
			if concurrent && a.bodies != nil && w.block(a, pointStep, "call", k.name+reqTag(ctxs[i])).abort {
				// Which request of a key calls DoClaimed first decides which runs it and
				// which share its outcome: the scheduler decides, not the goroutines' order.
				r.err = errShutdown
				mu.Lock()
				results[i] = r
				mu.Unlock()
				return
			}
			func() {
				defer recoverPanic(&r.err)
				r.v, r.replayed, r.err = idem.DoClaimed(ctxs[i], b, i, func(ctx context.Context) (string, error) {
					return w.handle(ctx, k.stored)
				})
			}()
			r.done = true
			mu.Lock()
			results[i] = r
			mu.Unlock()
		}
		settle := func(what string) []error {
			mu.Lock()
			values := make([]string, len(results))
			for i, r := range results {
				if r.done && r.err == nil {
					values[i] = r.v
				}
			}
			mu.Unlock()
			errs := b.Settle(ctx)
			if !w.isDead(a) {
				w.led.settleAnswered(w, a, what, a.keys, values, errs)
			}
			return errs
		}
		// handlers are the DoClaimed calls; others the Settles racing them.
		var handlers, others sync.WaitGroup
		if early {
			others.Add(1)
			go func() {
				defer others.Done()
				if !w.block(a, pointStep, "settle-early", "").abort {
					settle("early")
				}
			}()
		}
		stop := make(chan struct{})
		// Settle must come before the deadline (see idem.Batch), of the caller's context and
		// of every request's: a handler may run past it, so the caller settles when its
		// clock reads the deadline less a little, as the SQS wrapper does.
		var deadlines []time.Time
		if a.hasDL {
			deadlines = append(deadlines, a.deadline)
		}
		for _, d := range a.dl {
			if !d.IsZero() && !slices.Contains(deadlines, d) {
				deadlines = append(deadlines, d)
			}
		}
		for _, dl := range deadlines {
			others.Add(1)
			go func() {
				defer others.Done()
				select {
				case <-a.c.clk.After(dl.Sub(a.c.clk.Now()) - batchSettleMargin):
					settle("deadline")
				case <-stop:
				}
			}()
		}
		if concurrent {
			handlers.Add(len(reqs))
			for i := range reqs {
				go func() { defer handlers.Done(); doOne(i) }()
			}
		} else {
			for i := range reqs {
				doOne(i)
			}
		}
		handlers.Wait()
		close(stop)
		if !loose {
			others.Wait()
		}
		errs := settle("final")
		others.Wait()
		for i, r := range results {
			err := r.err
			var replayedFailure *idem.FailedError
			if errs[i] != nil && (err == nil || errors.As(err, &replayedFailure)) {
				// Not durably recorded (for every request that took part in its run): a
				// result, or a duplicate's replay of its run's remembered failure, which
				// the run's recording lost (see idem.Guard.Claim: Settle reports the run's
				// recording error to every request that replayed it).
				err = errs[i]
			}
			results[i].err = err
			if a.bodies != nil {
				// The caller may be here having woken when a context ended, not released
				// at a point, along with other such goroutines: its lines go into the trace
				// sorted, with the notes. A request whose context ended may have been
				// answered its key's outcome or its context's error, as the library's
				// select drew: judged, not traced.
				if line := w.answerLine(a, a.keys[i], r.v, r.replayed, err); line != "" {
					var failed *idem.FailedError
					switch {
					case r.ctx != nil && r.ctx.Err() != nil:
						line = fmt.Sprintf("%s answered %s after its context ended", a, a.keys[i].name)
					case err != nil && !errors.As(err, &failed):
						// Without its text or class: it may be the outcome of another request
						// of the key whose context ended (see above), shared.
						line = fmt.Sprintf("%s answered %s: an error", a, a.keys[i].name)
					}
					w.note(fmt.Sprintf("%03d 9 answered %04d", a.id, i), line)
				}
				w.judged(a, a.keys[i], a.bodyOf(i), r.v, r.replayed, err)
				continue
			}
			w.answered(a, a.keys[i], a.bodyOf(i), r.v, r.replayed, err)
		}
		if len(a.bodies) > 0 && !w.isDead(a) {
			w.batchGroups(a, results)
		}
	}
}

// batchGroups checks the requests of one batch that share a key and a body (invariant b):
// they run it at most once (b.batchRanTwice), and once one of them is answered a result,
// every other is answered that result, unless its own context ended (b.batchDupDiffers).
// See idem.Guard.Claim.
func (w *world) batchGroups(a *actor, results []batchResult) {
	type group struct {
		key  *keyInfo
		body string
		idx  []int
	}
	var groups []*group
	byKey := map[[2]string]*group{}
	for i, k := range a.keys {
		gk := [2]string{k.stored, a.bodyOf(i)}
		g := byKey[gk]
		if g == nil {
			g = &group{key: k, body: gk[1]}
			byKey[gk] = g
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
	}
	w.led.mu.Lock()
	defer w.led.mu.Unlock()
	for _, g := range groups {
		if len(g.idx) < 2 {
			continue
		}
		ran, answered := -1, -1
		for _, i := range g.idx {
			r := results[i]
			if errors.Is(r.err, errShutdown) {
				return
			}
			if r.err != nil {
				continue
			}
			if !r.replayed {
				if ran >= 0 {
					w.led.violate("b.batchRanTwice", g.key.name, "%s: requests %d and %d of one batch, with one key and body, both computed a result (%q, %q)",
						a, ran, i, results[ran].v, r.v)
				}
				ran = i
			}
			if answered < 0 {
				answered = i
			}
		}
		if answered < 0 {
			continue
		}
		v := results[answered].v
		for _, i := range g.idx {
			r := results[i]
			ended := r.ctx.Err() != nil && (errors.Is(r.err, context.DeadlineExceeded) || errors.Is(r.err, context.Canceled))
			if r.err == nil && r.v == v || r.err != nil && ended {
				continue
			}
			got := fmt.Sprintf("%q", r.v)
			if r.err != nil {
				got = "error: " + r.err.Error()
			}
			w.led.violate("b.batchDupDiffers", g.key.name, "%s: request %d of one batch was answered %q, request %d, with the same key and body, %s",
				a, answered, v, i, got)
		}
	}
}

// httpBody is an HTTP API caller through lambdawrap.
func (w *world) httpBody(a *actor, k *keyInfo, body string) func(context.Context) {
	return func(ctx context.Context) {
		h, err := lambdawrap.HTTPAPI(a.c.guard, func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			v, err := w.handle(ctx, k.stored)
			switch {
			case errors.Is(err, errUnavailable):
				return events.APIGatewayV2HTTPResponse{StatusCode: 500, Body: "unavailable"}, nil
			case err != nil:
				return events.APIGatewayV2HTTPResponse{}, err
			}
			return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: v}, nil
		})
		if err != nil {
			panic(err)
		}
		req := events.APIGatewayV2HTTPRequest{
			RawPath: "/orders",
			Headers: map[string]string{"idempotency-key": k.raw, "content-type": "application/json"},
			Body:    body,
		}
		req.RequestContext.HTTP.Method = "POST"
		var resp events.APIGatewayV2HTTPResponse
		func() {
			defer recoverPanic(&err)
			resp, err = h(ctx, req)
		}()
		switch {
		case errors.Is(err, errShutdown), w.isDead(a):
		case err == nil && resp.StatusCode == 201:
			replayed := resp.Headers[lambdawrap.ReplayedHeader] == "true"
			w.logf("%s answered %s: 201 %q (replayed %t)", a, k.name, resp.Body, replayed)
			w.led.answer(w, a, k.stored, "", resp.Body, replayed, false)
		case err == nil:
			w.logf("%s answered %s: %d", a, k.name, resp.StatusCode)
			if a.finisher {
				w.led.mu.Lock()
				w.led.violate("d.notSettled", k.name, "the final request after every lease ended got HTTP %d %s", resp.StatusCode, resp.Body)
				w.led.mu.Unlock()
			}
		default:
			w.logf("%s answered %s: error %v", a, k.name, err)
			if a.finisher && !errors.Is(err, idem.ErrFailed) {
				w.led.mu.Lock()
				w.led.violate("d.notSettled", k.name, "the final request after every lease ended got %v", err)
				w.led.mu.Unlock()
			}
		}
	}
}

// sqsBody is an SQS invocation: its batch is drawn when it starts, from the messages not
// yet acknowledged (SQS may also deliver an acknowledged one again).
func (w *world) sqsBody(a *actor) func(context.Context) {
	return func(ctx context.Context) {
		batch := a.batch
		var opts []sqs.Option
		// The handler reads the deadline on the guard's clock, the container's simulated one.
		opts = append(opts, sqs.WithConcurrency(a.concurrency), sqs.WithBatchClaims(a.batchClaims))
		if a.margin > 0 {
			opts = append(opts, sqs.WithDeadlineMargin(a.margin))
		}
		h, err := sqs.New(a.c.guard, func(ctx context.Context, m events.SQSMessage) error {
			_, err := w.handle(ctx, w.msgKey(m).stored)
			return err
		}, opts...)
		if err != nil {
			panic(err)
		}
		ev := events.SQSEvent{Records: a.records}
		resp, err := h.Handle(ctx, ev)
		if w.isDead(a) {
			return
		}
		if err != nil {
			w.logf("%s Handle: %v", a, err)
			return
		}
		w.reported(a, batch, resp)
	}
}

// isDead reports whether a was killed: whatever its goroutines do afterwards, once the
// schedule is over and they unwind, is no one's answer.
func (w *world) isDead(a *actor) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return a.dead || w.shutdown
}

func (w *world) msgKey(m events.SQSMessage) *keyInfo {
	raw := *m.MessageAttributes[sqs.KeyAttribute].StringValue
	for _, k := range w.allKeys {
		if k.raw == raw {
			return k
		}
	}
	panic("sim: message with an unknown key " + raw)
}

// drawSQS draws the batch of an SQS invocation when it starts.
func (w *world) drawSQS(a *actor) {
	rng := w.rng
	var open []*message
	for _, m := range w.queue {
		if !m.acked {
			open = append(open, m)
		}
	}
	if a.finisher {
		for _, m := range w.queue {
			if m.body == m.k.body {
				m.received++
				a.batch = append(a.batch, m)
			}
		}
	} else if a.kind == "fifo" {
		// SQS delivers a FIFO group in order, each message once per batch.
		for _, m := range w.queue {
			if (!m.acked || rng.IntN(5) == 0) && rng.IntN(3) != 0 {
				m.received++
				a.batch = append(a.batch, m)
			}
		}
		if len(a.batch) == 0 {
			m := w.queue[rng.IntN(len(w.queue))]
			m.received++
			a.batch = append(a.batch, m)
		}
	} else {
		n := 1 + rng.IntN(4)
		for range n {
			var m *message
			if len(open) > 0 && rng.IntN(5) != 0 {
				m = open[rng.IntN(len(open))]
			} else {
				m = w.queue[rng.IntN(len(w.queue))]
			}
			m.received++
			a.batch = append(a.batch, m)
		}
	}
	a.concurrency = 1 + rng.IntN(3)
	if a.finisher {
		// Every message at once, as a Do finisher's one call: run one at a time, the last
		// may start too late in the lease WithMaxLease caps (no deadline, no heartbeat),
		// and rightly not run, or give up when the watchdog ends its context.
		a.concurrency = max(a.concurrency, len(a.batch))
	}
	a.batchClaims = rng.IntN(10) < 7
	if rng.IntN(2) == 0 {
		a.margin = time.Duration(200+rng.IntN(1500)) * time.Millisecond
	}
	a.extra = fmt.Sprintf(", concurrency %d, batch claims %t, margin %s, messages", a.concurrency, a.batchClaims, a.margin)
	arn := "arn:aws:sqs:us-east-1:000000000000:sim"
	if a.kind == "fifo" {
		arn += ".fifo"
	}
	for _, m := range a.batch {
		a.extra += fmt.Sprintf(" %s(%s,rc%d)", m.id, m.k.name, m.received)
		key := m.k.raw
		a.records = append(a.records, events.SQSMessage{
			MessageId:      m.id,
			Body:           m.body,
			EventSourceARN: arn,
			Attributes: map[string]string{
				"ApproximateReceiveCount": strconv.Itoa(m.received),
				"MessageGroupId":          m.group,
			},
			MessageAttributes: map[string]events.SQSMessageAttribute{
				sqs.KeyAttribute: {DataType: "String", StringValue: &key},
			},
		})
	}
}

// reported checks an SQS invocation's response (invariant f): a message not reported
// failed has its key completed with its body; a message reported failed did not have its
// completion recorded and acknowledged by this invocation.
func (w *world) reported(a *actor, batch []*message, resp events.SQSEventResponse) {
	failed := make(map[string]bool)
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	w.logf("%s reports failed: %v", a, resp.BatchItemFailures)
	held := make(map[*message]bool) // judged before the ledger is locked
	if a.finisher {
		for _, m := range batch {
			held[m] = w.heldForOtherBody(m.k, m.body)
		}
	}
	l := &w.led
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := make(map[string]bool)
	for _, m := range batch {
		if seen[m.id] {
			continue
		}
		seen[m.id] = true
		ks := l.keys[m.k.stored]
		fp := fingerprint(m.body)
		if !failed[m.id] {
			m.acked = true
			ok := false
			for _, r := range l.runs {
				// Fail-open.
				ok = ok || (r.a == a && r.key == m.k.stored && !r.guarded && r.succeeded)
			}
			for _, c := range ks.completions {
				if c.status == idemstore.StatusCompleted && fpCompatible(c.fp, fp) {
					ok = true
				}
			}
			if !ok {
				l.violate("f.ackedNotCompleted", ks.name, "%s acknowledged message %s, but its key has no COMPLETED record for its body", a, m.id)
			}
			continue
		}
		if a.finisher {
			// Another body completed the key, a failure is remembered, or another body's
			// checkpointed record holds it.
			other := held[m]
			for _, c := range ks.completions {
				other = other || !fpCompatible(c.fp, fp) || c.status == idemstore.StatusFailed
			}
			if !other {
				l.violate("d.notSettled", ks.name, "the final batch after every lease ended failed message %s", m.id)
			}
		}
		for _, r := range l.runs {
			if r.a == a && r.key == m.k.stored && r.acked && r.landedStatus == idemstore.StatusCompleted && fpCompatible(r.fp, fp) {
				l.violate("f.failedButCompleted", ks.name, "%s reported message %s failed, though its run r%d completed and the store acknowledged it", a, m.id, r.id)
			}
		}
	}
}
