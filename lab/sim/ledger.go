package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// Violation is one broken invariant.
type Violation struct {
	// Invariant is the letter of the invariant (see the package documentation) and the
	// class of the breach, as "a.overlap".
	Invariant string
	// Key is the short name of the key it concerns ("d1", "s2", "h1"), or empty.
	Key string
	// Detail says what happened.
	Detail string
}

func (v Violation) String() string {
	return fmt.Sprintf("invariant %s broken for key %s: %s", v.Invariant, v.Key, v.Detail)
}

// run is one lease granted by the store: from the claim that applied to its outcome.
type run struct {
	id      int
	key     string // stored key
	name    string
	token   string
	a       *actor
	fp      string
	guarded bool // false: a fail-open run without a lease

	claimAt  time.Time // true time the claim applied
	leaseEnd time.Time // as the store holds it (claim, extensions)
	// confirmed is the lease end the owner's watchdog counts on: its claim's, or the latest
	// end an extension answered to it confirmed. The stored end must never fall below it.
	confirmed time.Time
	shortened bool // a.leaseShortened was reported for it
	// ownerClock marks a lease measured on the owner's clock (no deadline, a deadline
	// beyond WithMaxLease, an extension), whose stored end is off by the owner's skew;
	// else the lease ends at the deadline plus the margin, in true time.
	ownerClock bool
	// skew0 is the owner's clock skew when the lease was granted (FeatClockStep may step it
	// since).
	skew0 time.Duration
	// claimSkew is how far the time its claim carried ran ahead of true time when the claim
	// applied: what the store judged the lease it took over by. It is the claimer's skew
	// when it read its clock, less the time the request took, so a claim stamped before a
	// step of its clock (FeatClockStep) counts with the reading it carried.
	claimSkew time.Duration
	hctx      context.Context // the handler's context, once it started
	expectCp  string          // the checkpoint this owner must see
	alsoCp    []string        // or one of these: written after it, applied, not acknowledged
	staleCp   bool            // or any old one, or none: the key expired since (TTL deletion lags)
	cpCause   string          // why the record it replaced lacks expectCp, if it does
	resent    bool            // its claim applied, the response was lost, and the resend met it
	orphan    bool            // granted by a late claim, for no caller: no handler runs under it
	tag       string          // the batch request whose own claim granted it (reqTag), or empty
	how       string          // how its handler ended

	started, ended bool
	startAt, endAt time.Time
	succeeded      bool
	outlived       bool // its handler was still running when true time reached its lease end
	attached       bool // the handler attached a write that does not fail

	sentAt        time.Time // first completion request carrying its token
	sentPastLease bool      // finished within its lease, outcome sent after it
	landed        bool
	landedStatus  idemstore.Status
	acked         bool // a completion carrying its token was answered nil
	lost          bool // its completion met another owner (ErrLeaseLost)
}

type completion struct {
	token   string
	status  idemstore.Status
	data    []byte
	fp      string
	at      time.Time
	expires time.Time
}

type attachment struct {
	token string
	at    time.Time
}

// keyState is the ground truth of one key.
type keyState struct {
	name string
	kind string // do, sqs, http: how its results are encoded
	// cp is the last checkpoint acknowledged to its owner since the key last completed or
	// expired (cpSet), and cpSeq the request sequence number of that acknowledgement, or of
	// the start of the window. Owners must see cp, or one of since: the checkpoints applied
	// since, written by requests sent after it (not yet acknowledged). A checkpoint whose
	// request was sent before cpSeq and that lands after it (a late first attempt) is lost
	// work: the next owner would resume from an older step.
	cp          string
	cpFp        string
	cpSet       bool
	cpSeq       uint64
	since       []string
	heldCp      string          // the checkpoint the record last applied (by a checkpoint request)
	heldSeq     uint64          // and the sequence number of its request
	maxSeq      uint64          // the highest sequence number of a checkpoint request that applied
	gone        string          // why the stored record lost the checkpoint, while it has
	stale       bool            // the key expired since: owners may see an old checkpoint
	old         map[string]bool // every checkpoint recorded for the key
	completions []completion
	attached    []attachment
	effects     int
	// refusedFinal is the record that last refused a final call's claim.
	refusedFinal *refusal
}

// refusal is a record that refused a claim, the claim's fingerprint, and when, on the
// claimer's clock.
type refusal struct {
	rec idemstore.Record
	fp  string
	at  time.Time
}

// Stats are the counts a schedule reports besides its violations.
type Stats struct {
	// Runs is how many leases the store granted; Effects how many handler effects ran.
	Runs, Effects int
	// Reruns counts effects on a key that had one already, after the earlier run ended
	// without its outcome recorded (a crash, a failed completion): allowed by design.
	Reruns int
	// OverlapBeyondSkew counts effects that ran while an earlier owner of the key was still
	// running with its context live, and outcomes sent past their lease and taken over
	// meanwhile, where the later claim came from a clock beyond the skew the lease margin
	// tolerates (see ledger.tolerated).
	OverlapBeyondSkew int
	// LostBeyondSkew counts outcomes of SQS invocations killed at their deadline before
	// their early settle, because their clock ran behind true time by the settle margin
	// (sqs.WithDeadlineMargin) or more: beyond the tolerance.
	LostBeyondSkew int
	// Outlived counts runs whose handler was still running when their lease ended.
	Outlived int
	// Unguarded counts handler runs without a lease (WithFailOpen).
	Unguarded int
	// Orphans counts claims landing late (FeatDelay) that hold a key until their lease ends
	// for a caller that never held that lease: it gave up, or its resend was refused,
	// before it knew; as after a caller that crashes once its claim applied, the lease runs
	// out. (A late claim that re-creates a lease its owner released or completed is a
	// violation, d.heldByNobody.)
	Orphans int
	// Collisions counts scheduling points that shared a label (a determinism hazard).
	Collisions int
	// StreamInvocations counts the stream's invocations (FeatStream), duplicates included.
	StreamInvocations int
	// StreamWaits counts the stream's invocations with batch.WithWaitInFlight on.
	StreamWaits int
	// StreamPolls counts the claims of those invocations for a key a claim of theirs met
	// before: the wait's polls; StreamTakeovers, the polls that claimed the key.
	StreamPolls, StreamTakeovers int
	// AttachPanics counts completions whose attached write panicked (Config.AttachPanics).
	AttachPanics int
}

// ledger is the ground truth the invariants are checked against: every lease granted,
// every checkpoint, completion and attached write that applied, every effect and answer.
type ledger struct {
	mu          sync.Mutex
	runs        []*run
	byToken     map[string]*run
	keys        map[string]*keyState
	maxSkew     time.Duration
	seq         uint64          // numbers checkpoint requests and acknowledgements, in order
	releasedTok map[string]bool // the tokens whose release applied
	releaseSent map[string]bool // the tokens whose release a caller made (FeatStream)
	claimHeard  map[string]bool // the tokens whose claim's answer reached its caller (FeatStream)
	// met holds, per do or batch caller, the keys a claim of its answered with a record.
	met        map[*actor]map[string]bool
	violations []Violation
	stats      Stats
}

func (l *ledger) init() {
	l.byToken = make(map[string]*run)
	l.keys = make(map[string]*keyState)
	l.releasedTok = make(map[string]bool)
	l.releaseSent = make(map[string]bool)
	l.claimHeard = make(map[string]bool)
}

// claimAnswered notes that a claim of token reached its caller with the lease (granted,
// or its own record met by a resend): only then does the caller know the lease it may
// have to release.
func (l *ledger) claimAnswered(token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claimHeard[token] = true
}

// releaseMade notes that a caller made a release of tokens, whether or not it is sent or
// applies.
func (l *ledger) releaseMade(tokens ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range tokens {
		l.releaseSent[t] = true
	}
}

func (l *ledger) violate(inv, key, format string, args ...any) {
	l.violations = append(l.violations, Violation{Invariant: inv, Key: key, Detail: fmt.Sprintf(format, args...)})
}

func (w *world) trueNow() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

func fpCompatible(a, b string) bool { return a == "" || b == "" || a == b }

// claimed records a claim that applied, at claimNow on the claimer's clock: a lease granted, or
// for a final call the record that refused it. A claim landing late (at) grants no lease to
// a caller (see lateClaim).
func (l *ledger) claimed(w *world, a *actor, rec *idemstore.Record, claimNow time.Time, prev *idemstore.Record, claimed bool, err error, at attempt) {
	if at == attemptLate {
		if err == nil && claimed {
			l.lateClaim(w, a, rec, claimNow, prev)
		}
		return
	}
	if err == nil && !claimed && a.finisher && prev != nil {
		l.mu.Lock()
		l.keys[rec.Key].refusedFinal = &refusal{rec: *prev, fp: rec.Fingerprint, at: claimNow}
		l.mu.Unlock()
	}
	if err != nil || !claimed {
		return
	}
	now := w.trueNow()
	l.mu.Lock()
	defer l.mu.Unlock()
	ks := l.keys[rec.Key]
	stale := false
	// Whether the record replaced had expired is the claimer's clock's call, as the store
	// compares the claim's time with it.
	if prev != nil && !prev.Expires.IsZero() && !claimNow.Before(prev.Expires) {
		ks.stale = true
		l.newWindow(ks) // the key expired: a new window starts
	}
	// After an expiry an old checkpoint may or may not be seen, by this owner and by every
	// later one, until a new checkpoint is recorded or the key completes: a claim that read
	// the record in progress may carry its checkpoint into a record that completed and
	// expired meanwhile (on the claimer's clock).
	stale = ks.stale
	if prev != nil && prev.Status != idemstore.StatusInProgress && now.Add(l.maxSkew).Before(prev.Expires) {
		l.violate("a.afterComplete", ks.name, "%s claimed the key while its %s record was live until %s",
			a, prev.Status, prev.Expires.Sub(epoch))
	}
	if (ks.cpSet || len(ks.since) > 0) && !fpCompatible(rec.Fingerprint, ks.cpFp) {
		l.newWindow(ks) // other work: it inherits nothing
	}
	if o := l.byToken[rec.LeaseToken]; o != nil {
		// The token's own lease, granted again: a resend that met a record its first
		// attempt wrote and that no longer holds the key (a lease taken over meanwhile).
		o.leaseEnd = rec.LeaseExpires
		return
	}
	r := &run{
		id: len(l.runs) + 1, key: rec.Key, name: ks.name, token: rec.LeaseToken, a: a,
		fp: rec.Fingerprint, guarded: true, claimAt: now, leaseEnd: rec.LeaseExpires, confirmed: rec.LeaseExpires,
		ownerClock: !a.deadlineLease(rec.LeaseExpires), how: "its handler never ran", skew0: a.skew(),
		claimSkew: claimNow.Sub(now),
	}
	r.staleCp = stale
	r.alsoCp = slices.Clone(ks.since)
	if ks.cpSet {
		r.expectCp = ks.cp
		switch {
		case prev == nil && ks.gone == "":
			ks.gone = "c.checkpointLost: the record was gone"
		case prev != nil && prev.Checkpoint == ks.cp:
			// A takeover: the new record holds the checkpoint once the guard writes it back.
			ks.gone = fmt.Sprintf("c.checkpointLost.carry: run r%d took the key over from a record holding it and did not write it back", r.id)
		}
		r.cpCause = ks.gone
	}
	l.runs = append(l.runs, r)
	l.byToken[r.token] = r
	l.stats.Runs++
	w.logf("%s holds %s as run r%d, lease to %.3fs", a, ks.name, r.id, r.leaseEnd.Sub(epoch).Seconds())
}

// newWindow starts a new checkpoint window for ks: the key completed or expired, or is
// taken by other work; what was recorded before no longer binds its owners.
func (l *ledger) newWindow(ks *keyState) {
	l.seq++
	ks.cpSet, ks.cpSeq, ks.since, ks.gone = false, l.seq, nil, ""
}

// lateClaim records a claim that landed late and took the key: its first attempt, after its
// resend or after its caller gave up. If the token's lease is no one's (its caller never
// got it, or released or completed it) and the new lease still runs, the key is held in
// progress by nobody, and every retry is refused until the lease ends (d.heldByNobody).
func (l *ledger) lateClaim(w *world, a *actor, rec *idemstore.Record, claimNow time.Time, prev *idemstore.Record) {
	now := w.trueNow()
	l.mu.Lock()
	defer l.mu.Unlock()
	ks := l.keys[rec.Key]
	expired := prev != nil && !prev.Expires.IsZero() && !claimNow.Before(prev.Expires)
	if expired {
		ks.stale = true
		l.newWindow(ks)
	}
	r := l.byToken[rec.LeaseToken]
	why := ""
	switch {
	case r == nil:
		// Its caller gave up, or was refused, before it knew: like a caller that crashes
		// after its claim, the lease runs out.
		if rec.LeaseExpires.After(now) {
			l.stats.Orphans++
		}
		r = &run{
			id: len(l.runs) + 1, key: rec.Key, name: ks.name, token: rec.LeaseToken, a: a, fp: rec.Fingerprint,
			guarded: true, claimAt: now, orphan: true, how: "no handler runs under it", skew0: a.skew(),
			claimSkew: claimNow.Sub(now),
		}
		l.runs = append(l.runs, r)
		l.byToken[r.token] = r
	case expired:
		// The record it replaced had expired by the time the claim carried: the key was
		// free, as it is to any claim after the expiry, and what its owner released or
		// completed binds nobody any more. Like a late claim for no caller, its lease runs
		// out. Only whether that record had expired by a clock within the skew is to judge,
		// as for every claim (a.afterComplete).
		if rec.LeaseExpires.After(now) {
			l.stats.Orphans++
		}
		if prev.Status != idemstore.StatusInProgress && now.Add(l.maxSkew).Before(prev.Expires) {
			l.violate("a.afterComplete", ks.name, "%s's late claim took the key while its %s record was live until %s",
				a, prev.Status, prev.Expires.Sub(epoch))
		}
	case l.releasedTok[r.token]:
		why = fmt.Sprintf("run r%d released it (%s)", r.id, r.how)
	case r.landed:
		why = fmt.Sprintf("run r%d completed it", r.id)
	}
	r.leaseEnd, r.confirmed = rec.LeaseExpires, rec.LeaseExpires
	w.logf("%s's late claim holds %s as run r%d, lease to %.3fs", a, ks.name, r.id, r.leaseEnd.Sub(epoch).Seconds())
	if why != "" && rec.LeaseExpires.After(now) {
		l.violate("d.heldByNobody", ks.name, "%s's claim landed late at %.3fs and holds the key in progress until %.3fs, but %s: every retry is refused meanwhile",
			a, now.Sub(epoch).Seconds(), rec.LeaseExpires.Sub(epoch).Seconds(), why)
	}
}

// extended records an extension that applied: the lease end the store holds now.
func (l *ledger) extended(w *world, token string, end time.Time, at attempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.byToken[token]; r != nil {
		r.leaseEnd = end
		r.ownerClock = r.ownerClock || !r.a.deadlineLease(end)
		l.leaseCheck(w, r, at)
	}
}

// extendAcked records an extension answered to its owner: its watchdog counts on end.
func (l *ledger) extendAcked(w *world, token string, end time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.byToken[token]; r != nil {
		if end.After(r.confirmed) {
			r.confirmed = end
		}
		l.leaseCheck(w, r, attemptFirst)
	}
}

// leaseCheck checks that the stored lease end of r, while r holds its record, is not below
// the end its owner's watchdog counts on: else another caller may take the key over while
// the owner's context still runs (a.leaseShortened). The caller holds l.mu.
func (l *ledger) leaseCheck(w *world, r *run, at attempt) {
	if r.shortened || r.landed || l.releasedTok[r.token] || !r.leaseEnd.Before(r.confirmed) {
		return
	}
	r.shortened = true
	how := "an extension"
	if at == attemptLate {
		how = "an extension's first attempt, landing late,"
	}
	l.violate("a.leaseShortened", r.name, "%s moved the stored lease end of run r%d (%s) back to %.3fs, below the %.3fs its owner's watchdog counts on",
		how, r.id, r.a, r.leaseEnd.Sub(epoch).Seconds(), r.confirmed.Sub(epoch).Seconds())
}

// lowSkew is the lowest skew r's owner's clock had when it mattered to r: when its
// invocation started (its context's deadline timer runs from then), when the lease was
// granted, and now. They differ only after a step of its clock (FeatClockStep).
func (r *run) lowSkew() time.Duration { return min(r.a.skew0, r.skew0, r.a.skew()) }

// lossAt is the true time by which r's handler context must have ended: when the owner's
// clock reads the lease end less the margin. A context's deadline is read on the owner's
// clock too (see simCtx), so with a lease ending at the deadline plus the margin that is
// when the context ends; otherwise the lease watchdog must end it then. If the owner's
// clock stepped (FeatClockStep), its lowest reading counts (lowSkew): timers, a context's
// deadline among them, wait in monotonic time, which a step of the wall clock does not
// move; whether a caller then takes the key over within the tolerance is a.overlap's to
// judge.
func (l *ledger) lossAt(w *world, r *run) time.Time {
	return r.leaseEnd.Add(-w.p.margin - r.lowSkew())
}

// tolerated reports whether a claim by claimer, over the lease of r, comes from a clock
// within the skew the lease margin tolerates, where no owner may still run: ahead of the
// owner's clock by less than the margin (the owner's context ends by its lease end less
// the margin on its own clock); or, for a lease ending at a deadline that Lambda enforces
// by killing the owner there in true time, ahead of true time by less than the margin.
func (l *ledger) tolerated(w *world, r *run, claimer *run) bool {
	// The claimer is judged by the time its claim carried (claimSkew), not by its clock's
	// skew when the claim applied: a claim stamped before a step of its clock
	// (FeatClockStep) and applied after it took the key over by the earlier reading. An
	// owner is live at the claim only if its clock then reads below its lease end less the
	// margin, and the claim took over only if its time reached the lease end, so an overlap
	// needs claimSkew-lowSkew >= margin: below it, an overlap is the library's fault.
	cs := claimer.claimSkew
	if cs-r.lowSkew() < w.p.margin {
		return true
	}
	return !r.ownerClock && r.a.kill && cs < w.p.margin
}

// checkpointSent numbers a checkpoint request as it is sent.
func (l *ledger) checkpointSent() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	return l.seq
}

// checkpointed records a checkpoint request seq that applied.
func (l *ledger) checkpointed(w *world, key, token, cp string, seq uint64, at attempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ks := l.keys[key]
	ks.old[cp] = true
	ks.heldCp, ks.heldSeq, ks.maxSeq = cp, seq, max(ks.maxSeq, seq)
	r := l.byToken[token]
	if seq < ks.cpSeq {
		// Sent before the checkpoint acknowledged last, applied after it.
		if ks.cpSet {
			rid := 0
			if r != nil {
				rid = r.id
			}
			l.lateCheckpoint(ks, fmt.Sprintf("run r%d's checkpoint %q, sent before %q was acknowledged to its owner, landed after it", rid, cp, ks.cp))
		}
		return
	}
	ks.since = append(ks.since, cp)
	ks.gone, ks.stale = "", false
	if r != nil {
		ks.cpFp = r.fp
	}
}

// checkpointAcked records a checkpoint request seq answered nil to its owner: later owners
// must see it, unless a checkpoint sent after it applied already.
func (l *ledger) checkpointAcked(w *world, key, token, cp string, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ks := l.keys[key]
	if seq < ks.cpSeq || ks.maxSeq > seq {
		return // the window ended meanwhile, or a later checkpoint stands
	}
	l.seq++
	ks.cp, ks.cpSet, ks.cpSeq, ks.since, ks.gone, ks.stale = cp, true, l.seq, nil, "", false
	if r := l.byToken[token]; r != nil {
		ks.cpFp = r.fp
	}
	if ks.heldSeq < seq {
		l.lateCheckpoint(ks, fmt.Sprintf("checkpoint %q, sent before %q, landed after it and before its acknowledgement", ks.heldCp, cp))
	}
}

// lateCheckpoint reports that the record of ks holds a checkpoint whose request was sent
// before the one acknowledged last, and landed after it (c.checkpointLost.late): an owner
// taking over would resume from an earlier step and repeat the later one. Later owners are
// judged by what the record holds, so that it is reported once. The caller holds l.mu.
func (l *ledger) lateCheckpoint(ks *keyState, what string) {
	l.violate("c.checkpointLost.late", ks.name, "%s: the record holds %q, and an owner taking over would resume from it", what, ks.heldCp)
	l.seq++
	ks.cp, ks.cpSeq, ks.since, ks.gone = ks.heldCp, l.seq, nil, ""
}

// completeSent records that completions recs were sent, unless a is dead (a dead
// invocation's goroutines may still be woken by a timer, but a real one is frozen). A
// completion's first attempt is never sent already expired on its sender's clock
// (b.completedExpired): a retry would run the key again, though its handler finished
// within the expiry (a batch outcome waiting for Settle, say).
func (l *ledger) completeSent(w *world, a *actor, recs []*idemstore.Record) {
	if w.isDead(a) {
		return
	}
	now := w.trueNow()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, rec := range recs {
		// The sender's clock at its lowest reading since its invocation started.
		t := rec.LeaseToken
		r := l.byToken[t]
		// A resend after a store failure carries what the first attempt did: a store that
		// stalls past the expiry is the store's doing.
		if clk := now.Add(min(a.skew0, a.skew())); r != nil && r.sentAt.IsZero() && !a.finisher && !rec.Expires.After(clk) {
			l.violate("b.completedExpired", r.name, "%s sent run r%d's completion (%s) at %.3fs on its clock, already expired (at %.3fs); its handler ended at %.3fs",
				a, r.id, rec.Status, clk.Sub(epoch).Seconds(), rec.Expires.Sub(epoch).Seconds(), r.endAt.Sub(epoch).Seconds())
		}
		if r == nil || !r.sentAt.IsZero() {
			continue
		}
		r.sentAt = now
		if r.ended && r.succeeded && r.endAt.Before(r.leaseEnd) && !now.Before(r.leaseEnd) {
			r.sentPastLease = true
		}
	}
}

// completed records a completion request that applied (err nil) or failed.
func (l *ledger) completed(w *world, a *actor, rec *idemstore.Record, err error) {
	now := w.trueNow()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.byToken[rec.LeaseToken]
	if err != nil {
		if r != nil && errors.Is(err, idem.ErrLeaseLost) {
			r.lost = true
		}
		return
	}
	if r != nil && r.landed {
		return // a resend, or a first attempt landing late: the store did nothing
	}
	ks := l.keys[rec.Key]
	ks.completions = append(ks.completions, completion{
		token: rec.LeaseToken, status: rec.Status, data: append([]byte(nil), rec.Data...),
		fp: rec.Fingerprint, at: now, expires: rec.Expires,
	})
	l.newWindow(ks)
	ks.stale = false
	if r != nil {
		r.landed, r.landedStatus = true, rec.Status
	}
	w.logf("%s recorded %s %s", a, ks.name, rec.Status)
}

func (l *ledger) completeAnswered(a *actor, token string, err error) {
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.byToken[token]; r != nil {
		r.acked = true
	}
}

func (l *ledger) released(w *world, key, token string, err error) {
	if err != nil {
		return
	}
	l.mu.Lock()
	ks := l.keys[key]
	l.releasedTok[token] = true
	if r := l.byToken[token]; ks.cpSet && r != nil && ks.gone == "" {
		ks.gone = fmt.Sprintf("c.checkpointLost.release: the record was deleted by the release after run r%d (%s) ended: %s", r.id, r.a, r.how)
	}
	l.mu.Unlock()
	w.logf("%s released", ks.name)
}

// tagRun notes which request of a batch with duplicate keys a claim of token was made for.
func (l *ledger) tagRun(token, tag string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.byToken[token]; r != nil && !r.orphan {
		r.tag = tag
	}
}

// resent marks the run of token as claimed by a resent request that met its own record.
func (l *ledger) markResent(token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.byToken[token]; r != nil {
		r.resent = true
	}
}

// attachedWrite records an attached write committing, inside the store's completion.
func (l *ledger) attachedWrite(w *world, key, token string) {
	now := w.trueNow()
	l.mu.Lock()
	defer l.mu.Unlock()
	ks := l.keys[key]
	ks.attached = append(ks.attached, attachment{token: token, at: now})
}

// handlerStart finds the run a handler of a starts under, and checks invariant (c).
func (l *ledger) handlerStart(w *world, a *actor, key string, ctx context.Context, guarded bool, ctxErr error, met bool) *run {
	now := w.trueNow()
	l.mu.Lock()
	defer l.mu.Unlock()
	ks := l.keys[key]
	var r *run
	if guarded {
		// In a batch with duplicate keys one caller may hold two leases of a key (one per
		// body): the request's own claim's, else its batch claim's.
		tag := reqTag(ctx)
		match := func(tag string) *run {
			for i := len(l.runs) - 1; i >= 0; i-- {
				if c := l.runs[i]; c.a == a && c.key == key && !c.started && !c.orphan && c.tag == tag {
					return c
				}
			}
			return nil
		}
		if r = match(tag); r == nil && tag != "" {
			r = match("")
		}
		if r == nil {
			l.violate("a.unknownLease", ks.name, "%s runs its handler under a lease the store never granted it", a)
		}
	} else {
		l.stats.Unguarded++
		if err := ctxErr; err != nil {
			l.violate("a.failOpenCancelled", ks.name, "%s runs its handler unguarded (fail-open) on an ended context (%v)", a, err)
		}
		if met {
			l.violate("a.failOpenAfterMet", ks.name, "%s runs its handler unguarded (fail-open) though a claim of its (of its batch) met a record of the key before", a)
		}
	}
	if r == nil {
		r = &run{id: len(l.runs) + 1, key: key, name: ks.name, a: a}
		l.runs = append(l.runs, r)
	}
	r.started, r.startAt, r.hctx = true, now, ctx
	if r.guarded {
		if got := idem.LastCheckpoint(ctx); got != r.expectCp && !slices.Contains(r.alsoCp, got) && !(r.staleCp && (got == "" || ks.old[got])) {
			class, cause := "c.checkpointLost", r.cpCause
			switch {
			case strings.HasPrefix(cause, "c.checkpointLost.late"):
				class, cause, _ = strings.Cut(cause, ": ")
			case r.resent:
				class, cause = "c.checkpointLost.resend", "its claim's response was lost and the resend met its own record"
			case cause != "":
				class, cause, _ = strings.Cut(cause, ": ")
			}
			l.violate(class, ks.name, "run r%d of %s sees checkpoint %q, want %q, recorded before its claim (%s)", r.id, a, got, r.expectCp, cause)
			if ks.cpSet && ks.cp == r.expectCp {
				// Reported once: later owners are judged by what this one could see.
				l.seq++
				ks.cp, ks.cpSet, ks.cpSeq, ks.since, ks.gone = got, got != "", l.seq, nil, ""
			}
		}
	}
	return r
}

// effect records r's effect at the true time, checking invariant (a).
func (l *ledger) effect(w *world, r *run) {
	now := w.trueNow()
	l.mu.Lock()
	defer l.mu.Unlock()
	ks := l.keys[r.key]
	l.stats.Effects++
	ks.effects++
	if !r.guarded {
		return
	}
	if ks.effects > 1 {
		l.stats.Reruns++
	}
	for _, o := range l.runs {
		if o == r || o.key != r.key || !o.guarded || !o.started || o.ended || o.hctx.Err() != nil {
			continue // o has ended, or its context has: it can perform no effect any more
		}
		// Two runs of the key at once, both with live contexts: fine only if the later one
		// claimed from a clock beyond the tolerance.
		early, late := o, r
		if r.id < o.id { // runs are numbered in the order their claims applied
			early, late = r, o
		}
		if !l.tolerated(w, early, late) || l.takenBeyondSkew(w, early, late) {
			l.stats.OverlapBeyondSkew++
			w.logf("r%d and r%d run %s at once; r%d's claim (its time %s off true time) is beyond the tolerance of r%d's lease (owner's skew %s)", r.id, o.id, ks.name, late.id, late.claimSkew, early.id, early.lowSkew())
			continue
		}
		l.violate("a.overlap", ks.name, "run r%d (%s) ran its effect while run r%d (%s) also ran with its context live; r%d claimed at %.3fs, r%d's lease ends at %.3fs (the claim's time %s off true time, the owner's clock %s)",
			r.id, r.a, o.id, o.a, late.id, late.claimAt.Sub(epoch).Seconds(), early.id, early.leaseEnd.Sub(epoch).Seconds(), late.claimSkew, early.lowSkew())
	}
	// The handler's context never outlives its lease: it ends by the lease end less the
	// margin (the deadline, or the lease watchdog), and the handler honours it.
	if loss := l.lossAt(w, r); !now.Before(loss) {
		l.violate(r.a.pastLeaseClass(), ks.name, "run r%d (%s) ran its effect at %.3fs, after its lease's point of loss at %.3fs (lease end %.3fs less the margin, true time), with its context still live (%s)",
			r.id, r.a, now.Sub(epoch).Seconds(), loss.Sub(epoch).Seconds(), r.leaseEnd.Sub(epoch).Seconds(), r.a.leaseWhy())
	}
}

// takenBeyondSkew reports whether a claim between early's and late's took the key over
// from early from a clock beyond the tolerance: from then on early's lease protects
// nothing, so a later claim (of a key that run released, say) from any clock is a
// consequence of that skew, not a breach within the tolerance. The caller holds l.mu.
func (l *ledger) takenBeyondSkew(w *world, early, late *run) bool {
	for _, m := range l.runs[early.id : late.id-1] {
		if m.key == early.key && m.guarded && !l.tolerated(w, early, m) {
			return true
		}
	}
	return false
}

// handlerEnd records that r's handler returned (or panicked).
func (l *ledger) handlerEnd(w *world, r *run, ok, attached bool, how string) {
	now := w.trueNow()
	l.mu.Lock()
	defer l.mu.Unlock()
	r.ended, r.endAt, r.succeeded, r.attached, r.how = true, now, ok, attached, how
}

// actorDied ends the runs of a dead actor.
func (l *ledger) actorDied(w *world, a *actor) {
	now := w.trueNow()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.runs {
		if r.a == a && r.started && !r.ended {
			r.ended, r.endAt, r.how = true, now, "its invocation died"
		}
	}
}

// observeTime marks runs whose handler is still running at their lease end.
func (l *ledger) observeTime(w *world, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.runs {
		if r.guarded && r.started && !r.ended && !r.outlived && !now.Before(r.leaseEnd) {
			r.outlived = true
			l.stats.Outlived++
		}
	}
}

// decode returns the answer a completion stands for: the result string, or an HTTP body.
func (ks *keyState) decode(c completion) (string, bool) {
	if c.status == idemstore.StatusFailed {
		return string(c.data), true
	}
	switch ks.kind {
	case "http":
		var resp struct {
			Body string `json:"body"`
		}
		if json.Unmarshal(c.data, &resp) != nil {
			return "", false
		}
		return resp.Body, true
	default:
		var s string
		if json.Unmarshal(c.data, &s) != nil {
			return "", false
		}
		return s, true
	}
}

// answer checks invariant (b) for a caller that was answered value for key: a result it
// computed (replayed false), a replay, or a remembered failure's message (failed). fp is
// the fingerprint of the request's body, or empty if not judged: a request is never
// answered with the result of a request with another body (b.answerOtherBody).
func (l *ledger) answer(w *world, a *actor, key, fp, value string, replayed, failed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ks := l.keys[key]
	want := idemstore.StatusCompleted
	if failed {
		want = idemstore.StatusFailed
	}
	var r *run
	if id := runID(value); id >= 1 && id <= len(l.runs) {
		r = l.runs[id-1]
	}
	if !failed && r != nil && !r.guarded && (!replayed || r.a == a && r.key == key) {
		// fail-open: nothing is recorded, by design; the requests of its batch with its
		// key and body share its result (see idem.Guard.Claim).
		return
	}
	if !replayed && !failed {
		if r == nil || !r.landed {
			l.violate("b.answerNotRecorded", ks.name, "%s was answered %q but that run's result was never recorded", a, value)
			return
		}
		if !fpCompatible(fp, r.fp) {
			l.violate("b.answerOtherBody", ks.name, "%s was answered %q, computed by run r%d for a request with another body", a, value, r.id)
		}
		for _, c := range ks.completions {
			if c.token == r.token {
				if got, ok := ks.decode(c); !ok || got != value {
					l.violate("b.answerDiffers", ks.name, "%s was answered %q, the record holds %q", a, value, got)
				}
				return
			}
		}
		return
	}
	var recorded []string
	other := false
	for _, c := range ks.completions {
		if c.status != want {
			continue
		}
		got, ok := ks.decode(c)
		if ok && got == value {
			if fpCompatible(fp, c.fp) {
				return
			}
			other = true
		}
		recorded = append(recorded, got)
	}
	if other {
		l.violate("b.answerOtherBody", ks.name, "%s was replayed %q, recorded only for a request with another body", a, value)
		return
	}
	l.violate("b.replayDiffers", ks.name, "%s was replayed %q, recorded %s results: %q", a, value, want, recorded)
}

// mismatch checks an idem.ErrPayloadMismatch answered to a of a request for key with body
// fingerprint fp (invariant b): some lease of the key was granted to a request with another
// body, whose record the guard met (b.mismatchWithoutOther).
func (l *ledger) mismatch(a *actor, key, fp string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.runs {
		if r.key == key && r.guarded && r.fp != "" && r.fp != fp {
			return
		}
	}
	l.violate("b.mismatchWithoutOther", l.keys[key].name, "%s was answered ErrPayloadMismatch, but no request with another body ever held the key", a)
}

// settleAnswered checks a Settle's answer (invariant b): a nil error for a request whose
// DoClaimed returned a result before that Settle began means the result is recorded
// (b.settleNotRecorded). values[i] is that result, or empty.
func (l *ledger) settleAnswered(w *world, a *actor, what string, keys []*keyInfo, values []string, errs []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, v := range values {
		if v == "" || i >= len(errs) || errs[i] != nil {
			continue
		}
		id := runID(v)
		if id < 1 || id > len(l.runs) {
			continue
		}
		if r := l.runs[id-1]; r.guarded && !r.landed {
			l.violate("b.settleNotRecorded", keys[i].name, "%s's %s Settle answered nil for request %d, whose DoClaimed returned %q before that Settle began, but run r%d's result is not recorded",
				a, what, i, v, r.id)
		}
	}
}

// metRecord notes that a claim answered a (for key) with a record: one holding the key, or
// its own. From then on no request of a's (one Do call, or one batch) fails open for key.
func (l *ledger) metRecord(a *actor, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.met == nil {
		l.met = make(map[*actor]map[string]bool)
	}
	if l.met[a] == nil {
		l.met[a] = make(map[string]bool)
	}
	l.met[a][key] = true
}

// hasMet reports whether a claim answered a with a record for key (see metRecord).
func (l *ledger) hasMet(a *actor, key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.met[a][key]
}

// finalChecks checks what can only be judged once the schedule is over.
func (l *ledger) finalChecks(w *world) {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := make([]string, 0, len(l.keys))
	byName := make(map[string]*keyState, len(l.keys))
	for _, ks := range l.keys {
		names = append(names, ks.name)
		byName[ks.name] = ks
	}
	sort.Strings(names)
	for _, r := range l.runs {
		if !r.guarded {
			continue
		}
		if r.succeeded && r.sentAt.IsZero() && r.a.killedByDeadline && r.endAt.Before(r.a.killedAt) && r.a.lambdaBatch() {
			if !r.a.settlesBeforeKill() {
				l.stats.LostBeyondSkew++
				continue
			}
			l.violate("a.lostOutcome", r.name, "run r%d (%s) finished at %.3fs, before the invocation was killed at its deadline (%.3fs), but its outcome was never sent to the store",
				r.id, r.a, r.endAt.Sub(epoch).Seconds(), r.a.killedAt.Sub(epoch).Seconds())
		}
		if r.sentPastLease && !r.landed {
			for _, o := range l.runs {
				if o.key == r.key && o.guarded && o.claimAt.After(r.claimAt) && !o.claimAt.After(r.sentAt) {
					if !l.tolerated(w, r, o) {
						l.stats.OverlapBeyondSkew++
						break
					}
					l.violate("a.outcomePastLease", r.name, "run r%d (%s) finished at %.3fs within its lease (to %.3fs), but its outcome was sent only at %.3fs; run r%d (%s) took the key over at %.3fs, so the work is done twice",
						r.id, r.a, r.endAt.Sub(epoch).Seconds(), r.leaseEnd.Sub(epoch).Seconds(), r.sentAt.Sub(epoch).Seconds(), o.id, o.a, o.claimAt.Sub(epoch).Seconds())
					break
				}
			}
		}
	}
	for _, name := range names {
		ks := byName[name]
		// (e) attached writes: once, and only with their completion.
		seen := make(map[string]bool)
		for _, at := range ks.attached {
			if seen[at.token] {
				l.violate("e.attachedTwice", name, "an attached write of one lease committed twice")
			}
			seen[at.token] = true
			r := l.byToken[at.token]
			if r == nil || !r.landed || r.landedStatus != idemstore.StatusCompleted {
				l.violate("e.attachedWithoutRecord", name, "an attached write committed at %.3fs without its COMPLETED record", at.at.Sub(epoch).Seconds())
			}
		}
		completed := 0
		for _, c := range ks.completions {
			if c.status == idemstore.StatusCompleted {
				completed++
				if r := l.byToken[c.token]; r != nil && r.attached && !seen[c.token] {
					l.violate("e.recordWithoutAttached", name, "run r%d's COMPLETED record landed without the write it attached", r.id)
				}
			}
		}
		if len(ks.attached) > completed {
			l.violate("e.attachedTwice", name, "%d attached writes committed for %d completions", len(ks.attached), completed)
		}
	}
	l.stats.Collisions = w.collisions
}

// runID returns the run id a result value ("d1#r7") names, or 0.
func runID(value string) int {
	i := strings.LastIndex(value, "#r")
	if i < 0 {
		return 0
	}
	id, err := strconv.Atoi(value[i+2:])
	if err != nil {
		return 0
	}
	return id
}

// attachPanicked counts a completion whose attached write panicked.
func (l *ledger) attachPanicked() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stats.AttachPanics++
}
