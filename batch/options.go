package batch

import (
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// Defaults of the [Engine] options.
const (
	// DefaultConcurrency is how many items (or ordered groups) are processed at once (see
	// [WithConcurrency]).
	DefaultConcurrency = 10
	// DefaultDeadlineMargin is how much Lambda time must remain for an item to be started
	// (see [WithDeadlineMargin]). Unless set explicitly, the margin is also never more than
	// a quarter of the time left when the batch arrives, so a function with a short timeout
	// still starts its items.
	DefaultDeadlineMargin = 5 * time.Second
	// WaitInFlightPoll is the first pause of an item waiting for its key in flight
	// elsewhere (see [WithWaitInFlight]); each later pause doubles, up to
	// [WaitInFlightMaxPoll].
	WaitInFlightPoll = 100 * time.Millisecond
	// WaitInFlightMaxPoll is the longest pause between two polls of a waiting item.
	WaitInFlightMaxPoll = 2 * time.Second
)

// Option configures an [Engine]. Options are applied in order by [New].
type Option func(*config) error

type config struct {
	concurrency int
	margin      time.Duration
	marginSet   bool
	batchClaims bool
	waitFlight  bool
}

func defaultConfig() config {
	return config{concurrency: DefaultConcurrency, margin: DefaultDeadlineMargin, batchClaims: true}
}

func optErr(name, msg string) error {
	return fmt.Errorf("%w: batch: %s: %s", idem.ErrInvalidOption, name, msg)
}

// WithConcurrency sets how many items are processed at once: up to n items of an
// unordered batch, or up to n groups of an ordered one, each in order. Default
// [DefaultConcurrency]; must be at least 1. With 1, a batch is processed in order on the
// invoking goroutine, one item after another.
func WithConcurrency(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return optErr("WithConcurrency", "must be at least 1")
		}
		c.concurrency = n
		return nil
	}
}

// WithDeadlineMargin sets how much time must remain before the Lambda deadline
// (ctx.Deadline()) for an item to be started. Must not be negative. Choose it above the
// time one item takes, including its two store round trips.
//
//   - Default: [DefaultDeadlineMargin], lowered to a quarter of the time left when the
//     batch arrives if that is less. An explicit value is used as is; 0 starts items until
//     the context ends.
//   - An item not started for lack of time fails with [ReasonNotStarted], so the source
//     delivers it again rather than losing it to a timeout. An item already started runs
//     to completion under ctx.
//   - Without a context deadline, no item is held back.
//   - The deadline is read on the guard's clock ([idem.WithClock]). With batch claims, the
//     margin is also how far behind the function's clock may run before an invocation is
//     stopped before it records the outcomes that finished (see [WithBatchClaims]).
func WithDeadlineMargin(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return optErr("WithDeadlineMargin", "must not be negative")
		}
		c.margin = d
		c.marginSet = true
		return nil
	}
}

// WithBatchClaims sets whether a batch's keys are claimed and its outcomes recorded
// together. Default true.
//
//   - On, the keys of a batch are claimed in one [idem.Guard.Claim]: a store that
//     implements [idemstore.BatchStore] (dynamo.Store) claims them in one round trip per
//     store batch (25 keys for DynamoDB), and answers the keys completed before in the same
//     calls.
//   - The outcome of a handler that ran waits to be recorded with the others once every
//     item has finished, while its lease lasts until the Lambda deadline; [idem.Batch]
//     lists when an outcome is recorded at once instead.
//   - Once less than the margin (see [WithDeadlineMargin]) is left, the batch records the
//     outcomes finished by then and releases the claims of items not yet started.
//   - With [Mode.RecordBeforeNext], an item that another item of its group follows is
//     recorded on its own before that item starts; the keys are still claimed together.
//   - Off, with [Mode.RecordEach], or when two items of the batch carry one key with
//     different fingerprints, each item claims and records its outcome on its own as it
//     runs.
func WithBatchClaims(on bool) Option {
	return func(c *config) error {
		c.batchClaims = on
		return nil
	}
}

// WithWaitInFlight sets whether an item whose key is in flight elsewhere waits for it.
// Default false: the item fails at once with [ReasonInProgress].
//
//   - On, and with a context deadline, the item polls its key through the guard (with
//     back-off from [WaitInFlightPoll] up to [WaitInFlightMaxPoll], and at the end of
//     the lease it met) until the other run completes (the item replays its result), its
//     lease ends (the item takes the key over, as [idem.Do] does after a lease ends, and
//     runs), or the item's cut-off comes: the deadline less the margin (see
//     [WithDeadlineMargin]). At the cut-off, or when ctx ends, it fails with
//     [ReasonInProgress] as before, its error the last in-progress answer: the key held
//     elsewhere is why it failed, not the time left ([ReasonNotStarted] is for an item
//     that never reached its key). Either way the source delivers it again.
//   - So a key whose lease ends before the cut-off (a crashed invocation's claim) is
//     taken over in this invocation rather than reported failed, and a key whose lease
//     ends later fails once per invocation, not once per quick retry of the source:
//     Lambda's retries of a stream batch are not all spent while a crashed run's claims
//     hold their keys.
//   - The item waits in its unit's place: the items of its group after it wait behind
//     it, so a group's order holds. Other units go on meanwhile on the batch's other
//     workers ([WithConcurrency]); at concurrency 1 the batch is one unit, and every item
//     after the waiter waits behind it.
//   - Each poll is a claim attempt (one store call); an item taken over is claimed and
//     recorded on its own, not with the batch's claims. A poll whose claim the store
//     fails never runs the item unguarded ([idem.WithFailOpen]): the batch's calls for
//     the key met the record holding it, and share it ([idem.KeyMet]). The item fails
//     with [ReasonStore].
//   - Without a deadline no item waits.
//   - Batches in flight at once that share keys (two overlapping Process calls, or two
//     invocations each holding a copy of the same messages) can wait for each other
//     until their cut-offs: on batch claims, an outcome is recorded at its batch's
//     settle, after every item of the batch returned, so when each batch ran a key the
//     other waits for, neither outcome is stored while the waiters poll. Both waiters
//     fail with [ReasonInProgress] at the cut-off; nothing runs twice, and the
//     redelivered items replay. Items recorded as they run ([WithBatchClaims] off,
//     [Mode.RecordEach], or an item followed in its group with [Mode.RecordBeforeNext])
//     do not wait so. A Lambda adapter processes one batch at a time per sandbox.
func WithWaitInFlight(on bool) Option {
	return func(c *config) error {
		c.waitFlight = on
		return nil
	}
}
