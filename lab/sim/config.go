package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Features is a set of things a schedule may vary. Each feature in the set is switched on
// or off per schedule by the seed; a feature outside the set never occurs, so a bug class
// can be hunted with only the features it needs.
type Features uint32

// The features.
const (
	FeatFail Features = 1 << iota // store calls fail without applying
	// FeatLost: store calls apply and lose their response (claims: the SDK resends).
	FeatLost
	FeatLate       // store calls apply and answer late
	FeatCrash      // an actor stops for good between two steps
	FeatKill       // Lambda kills an invocation at its deadline
	FeatSkew       // container clocks skewed within the tolerated range
	FeatHeartbeat  // WithHeartbeat
	FeatWait       // WithWait
	FeatRemember   // WithRememberFailures
	FeatAttach     // handlers attach writes to their completion
	FeatCache      // WithCache
	FeatPanic      // handlers panic
	FeatError      // handlers return errors
	FeatCheckpoint // handlers record checkpoints
	FeatMaxLease   // WithMaxLease below the deadline
	FeatFailOpen   // WithFailOpen
	FeatExpiry     // a short WithExpiry
	FeatBatchStore // the store implements idemstore.BatchStore
	FeatDo         // idem.Do callers
	FeatBatch      // Guard.Claim, DoClaimed and Settle callers
	FeatSQS        // sqs.Handler on a standard queue
	FeatFIFO       // sqs.Handler on a FIFO queue
	FeatHTTP       // lambdawrap.HTTPAPI callers
	// FeatDelay: write requests land late, after their resend or after their caller gave up.
	FeatDelay
	// FeatPause: a handler's step stalls for up to twice the lease, ignoring its context,
	// then resumes.
	FeatPause
	// FeatItemFail: some items of a batch request fail while the others apply.
	FeatItemFail
	// FeatClockStep: a container's wall clock steps once mid-run, staying within the
	// tolerated skew.
	FeatClockStep
	// FeatBatchMix: batches with duplicate keys and other bodies, per-request deadlines,
	// overlapping Settles, claims met with an error.
	FeatBatchMix
	// FeatStream: a stream's shards delivered to the batch engine's ordered mode by a
	// simulated event source mapping (see stream.go).
	FeatStream
	// FeatStreamWait: a stream invocation (FeatStream) draws batch.WithWaitInFlight on or
	// off, from a generator of its own.
	FeatStreamWait
	featEnd
)

// AllFeatures is every feature.
const AllFeatures = featEnd - 1

var featureNames = []string{
	"fail", "lost", "late", "crash", "kill", "skew", "heartbeat", "wait", "remember",
	"attach", "cache", "panic", "error", "checkpoint", "maxlease", "failopen", "expiry",
	"batchstore", "do", "batch", "sqs", "fifo", "http", "delay", "pause", "itemfail", "clockstep",
	"batchmix", "stream", "streamwait",
}

const actorFeatures = FeatDo | FeatBatch | FeatSQS | FeatFIFO | FeatHTTP | FeatStream

// baseKinds are the kinds of caller drawn before FeatStream: a profile keeps one of them
// whenever the allowed set has one, as before FeatStream existed.
const baseKinds = FeatDo | FeatBatch | FeatSQS | FeatFIFO | FeatHTTP

// baseFeatures counts the features whose draws come from the schedule's main generator:
// those before FeatDelay. The later ones draw from a generator of their own, so that a
// schedule without them is what it was before they existed. FeatDelay is 1<<baseFeatures.
const baseFeatures = 23

// String lists the features by name, separated by commas; "all" for every one.
func (f Features) String() string {
	if f == AllFeatures {
		return "all"
	}
	var names []string
	for i, n := range featureNames {
		if f&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, ",")
}

// ParseFeatures reads a comma-separated list of feature names. "all" is every feature; a
// name prefixed with "-" removes it ("all,-crash,-kill"). The set must keep at least one
// kind of caller (do, batch, sqs, fifo, http).
func ParseFeatures(s string) (Features, error) {
	var f Features
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		remove := strings.HasPrefix(name, "-")
		name = strings.TrimPrefix(name, "-")
		var bit Features
		if name == "all" {
			bit = AllFeatures
		} else if i := slices.Index(featureNames, name); i >= 0 {
			bit = 1 << i
		} else {
			return 0, fmt.Errorf("sim: unknown feature %q (known: all, %s)", name, strings.Join(featureNames, ", "))
		}
		if remove {
			f &^= bit
		} else {
			f |= bit
		}
	}
	if f&actorFeatures == 0 {
		return 0, fmt.Errorf("sim: features %q name no kind of caller (do, batch, sqs, fifo, http, stream)", s)
	}
	return f, nil
}

// Config says which schedule to run.
type Config struct {
	// Seed decides everything about the schedule.
	Seed uint64
	// Features is the set of features the schedule may use; zero means all.
	Features Features
	// MaxSteps bounds the scheduling steps; zero means the default, 3000.
	MaxSteps int

	// AttachPanics makes an attached write whose condition would fail panic instead (a
	// handler's bug), in its completion's transaction, which rolls back: nothing of the
	// store call applies, and the panic goes on from it on the caller's goroutine. It draws
	// nothing from the seed: a schedule is what it was, but for those writes.
	AttachPanics bool

	mutant string // see store.mutant
}

func (c Config) maxSteps() int {
	if c.MaxSteps > 0 {
		return c.MaxSteps
	}
	return 3000
}

// profile is what one schedule looks like, drawn from the seed: the features it uses, the
// guard's options, and the odds of each fault.
type profile struct {
	on Features

	failBefore, lose, late float64 // per store request
	// per write request: resent, its first attempt late (FeatDelay)
	delay    float64
	pause    float64        // per handler work step: it stalls (FeatPause)
	itemFail float64        // per batch request: some of its items fail (FeatItemFail)
	metFail  float64        // per batch claim: items fail with a record met (FeatBatchMix)
	stream   *streamProfile // FeatStream: the shards and the mapping's settings
	crash    float64        // per released point
	advance  float64        // per step: move time rather than release a point

	margin     time.Duration // WithLeaseMargin
	lease      time.Duration // WithLease
	maxLease   time.Duration // WithMaxLease; 0: the default
	heartbeat  time.Duration // WithHeartbeat; 0: off
	waitMax    time.Duration // WithWait; 0: off
	waitPoll   time.Duration
	expiry     time.Duration // WithExpiry
	cache      int
	failOpen   bool
	remember   bool
	containers int
	actors     int
	keys       int
}

func (p *profile) has(f Features) bool { return p.on&f != 0 }

// drawProfile draws a profile from rng, the parts added with the late-delivery faults
// (FeatDelay, FeatPause, FeatItemFail, FeatClockStep) from lrng, FeatBatchMix from brng
// and FeatStream from srng, so that profiles without them are those drawn before they
// existed.
func drawProfile(rng, lrng, brng, srng *rand.Rand, allowed Features) profile {
	var p profile
	for f := Features(1); f < featEnd; f <<= 1 {
		if f == FeatDelay || f == FeatPause || f == FeatItemFail || f == FeatClockStep || f == FeatBatchMix || f == FeatStream || f == FeatStreamWait {
			continue
		}
		if allowed&f != 0 && rng.IntN(100) < 60 {
			p.on |= f
		}
	}
	if allowed&FeatDelay != 0 && lrng.IntN(100) < 60 {
		p.on |= FeatDelay
		p.delay = []float64{0.05, 0.1, 0.2}[lrng.IntN(3)]
	}
	if allowed&FeatPause != 0 && lrng.IntN(100) < 60 {
		p.on |= FeatPause
		p.pause = []float64{0.05, 0.15, 0.3}[lrng.IntN(3)]
	}
	if allowed&FeatItemFail != 0 && lrng.IntN(100) < 60 {
		p.on |= FeatItemFail
		p.itemFail = []float64{0.1, 0.2, 0.4}[lrng.IntN(3)]
	}
	if allowed&FeatClockStep != 0 && lrng.IntN(100) < 60 {
		p.on |= FeatClockStep
	}
	if allowed&FeatBatchMix != 0 && brng.IntN(100) < 60 {
		p.on |= FeatBatchMix
		p.metFail = []float64{0.1, 0.2, 0.4}[brng.IntN(3)]
	}
	if allowed&FeatStream != 0 && (srng.IntN(100) < 60 || allowed&baseKinds == 0) {
		p.on |= FeatStream
		p.stream = drawStreamProfile(srng)
		if allowed&FeatStreamWait != 0 {
			p.on |= FeatStreamWait // each invocation draws the wait (stream.go)
		}
	}
	if p.on&baseKinds == 0 && allowed&baseKinds != 0 {
		kinds := allowed & baseKinds
		for {
			f := Features(1) << rng.IntN(int(baseFeatures))
			if kinds&f != 0 {
				p.on |= f
				break
			}
		}
	}
	level := []float64{0.02, 0.05, 0.1}[rng.IntN(3)]
	if p.has(FeatFail) {
		p.failBefore = level
	}
	if p.has(FeatLost) {
		p.lose = level
	}
	if p.has(FeatLate) {
		p.late = 2 * level
	}
	if p.has(FeatCrash) {
		p.crash = []float64{0.005, 0.02, 0.05}[rng.IntN(3)]
	}
	p.advance = []float64{0.1, 0.2, 0.35}[rng.IntN(3)]
	p.margin = time.Duration(500+rng.IntN(1500)) * time.Millisecond
	p.lease = time.Duration(2+rng.IntN(12)) * time.Second
	if p.has(FeatMaxLease) {
		p.maxLease = time.Duration(1+rng.IntN(5)) * time.Second
	}
	if p.has(FeatHeartbeat) {
		// Valid for WithLease: at most half of it.
		p.heartbeat = p.lease/8 + time.Duration(rng.Int64N(int64(p.lease/2-p.lease/8)))
	}
	if p.has(FeatWait) {
		p.waitMax = time.Duration(1+rng.IntN(5)) * time.Second
		p.waitPoll = time.Duration(50+rng.IntN(400)) * time.Millisecond
	}
	p.expiry = time.Hour
	if p.has(FeatExpiry) {
		p.expiry = time.Duration(2+rng.IntN(10)) * time.Second
	}
	if p.has(FeatCache) {
		p.cache = 16
	}
	p.failOpen = p.has(FeatFailOpen)
	p.remember = p.has(FeatRemember)
	p.containers = 1 + rng.IntN(3)
	p.actors = 2 + rng.IntN(5)
	p.keys = 1 + rng.IntN(3)
	return p
}

// String describes the profile for the trace.
func (p *profile) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "features %s; faults fail %.2f lost %.2f late %.2f", p.on, p.failBefore, p.lose, p.late)
	if p.delay > 0 {
		fmt.Fprintf(&b, " delay %.2f", p.delay)
	}
	if p.itemFail > 0 {
		fmt.Fprintf(&b, " itemfail %.2f", p.itemFail)
	}
	if p.metFail > 0 {
		fmt.Fprintf(&b, " metfail %.2f", p.metFail)
	}
	if p.pause > 0 {
		fmt.Fprintf(&b, " pause %.2f", p.pause)
	}
	if p.stream != nil {
		fmt.Fprintf(&b, "; %s", p.stream)
	}
	fmt.Fprintf(&b, "; crash %.3f; margin %s lease %s", p.crash, p.margin, p.lease)
	if p.maxLease > 0 {
		fmt.Fprintf(&b, " maxLease %s", p.maxLease)
	}
	if p.heartbeat > 0 {
		fmt.Fprintf(&b, " heartbeat %s", p.heartbeat)
	}
	if p.waitMax > 0 {
		fmt.Fprintf(&b, " wait %s/%s", p.waitMax, p.waitPoll)
	}
	fmt.Fprintf(&b, " expiry %s cache %d failOpen %t remember %t; %d containers, %d actors, %d keys per kind",
		p.expiry, p.cache, p.failOpen, p.remember, p.containers, p.actors, p.keys)
	return b.String()
}
