package idem

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/idemkit/idem/idemstore"
)

// Event describes one step of a guarded call, for [Hooks].
type Event struct {
	// Key is the stored (scoped, hashed) key; never the caller's raw key.
	Key string
	// Op names the store operation for store errors: "claim", "get", "complete", "release",
	// "extend" or "checkpoint"; empty otherwise.
	Op string
	// Duration is how long the step took: the store call for claims, replays, conflicts
	// and store errors; the handler plus completion for completions and releases, and for
	// [Hooks.OnRunEnd].
	Duration time.Duration
	// HandlerDuration is how long the handler ran, without the store call that recorded
	// its outcome: set for [Hooks.OnCompleted], [Hooks.OnReleased], [Hooks.OnLeaseLost] at
	// the outcome, and [Hooks.OnRunEnd]; zero elsewhere.
	HandlerDuration time.Duration
	// LeaseExpires is when the lease just claimed ends: set for [Hooks.OnClaimed] and
	// [Hooks.OnRun]; zero elsewhere.
	LeaseExpires time.Time
	// HandlerFailed reports, for [Hooks.OnReleased], that the key was released because
	// the handler failed (returned an error, or panicked, in an attached write too: Err is
	// then the [*AttachPanicError]). It is false for the other releases: a completion that
	// committed nothing (Err wraps idemstore.ErrNotCommitted), and a batch request settled
	// before it started.
	HandlerFailed bool
	// FromCache reports, for [Hooks.OnReplayed], that the record replayed came from the
	// guard's local cache ([WithCache]) rather than from the store.
	FromCache bool
	// Err is the error involved, if any.
	Err error
}

// Hooks are optional callbacks for metrics, tracing and logging. A nil field does nothing.
// They run synchronously on the calling goroutine, so they must be quick and safe for
// concurrent use. The lease watchdog fires OnLeaseLost and an extension's OnStoreError on a
// goroutine of its own while the handler runs: a panic there is recovered and logged at
// ERROR, and the watchdog goes on. Elsewhere a hook's panic goes on to the caller.
type Hooks struct {
	// OnClaimed runs when a key is claimed and the handler is about to run.
	OnClaimed func(context.Context, Event)
	// OnRun runs after OnClaimed, just before the handler of [Do] or [DoClaimed] (and of
	// the functions and wrappers built on them) runs. The context it returns, derived
	// from the one it gets, is the handler's context, and the one the hooks reporting the
	// run get until [Hooks.OnRunEnd]: OnCompleted, OnReleased, OnLeaseLost, and
	// OnStoreError for the extension, completion or release. So a tracer can start a span
	// here that the handler's own spans (its DynamoDB or HTTP client calls) nest under. A
	// nil context keeps the one it got.
	OnRun func(context.Context, Event) context.Context
	// OnRunEnd runs once for each [Hooks.OnRun], after the hook that reported the run's
	// outcome, with the context OnRun returned, even if the handler panicked: for a
	// request of a batch whose outcome waits for [Batch.Settle], in Settle. Event.Err is
	// the caller's error (nil if the result was stored), Duration covers the handler and
	// the recording of its outcome, HandlerDuration the handler alone.
	OnRunEnd func(context.Context, Event)
	// OnCompleted runs when a result (or remembered failure) is stored.
	OnCompleted func(context.Context, Event)
	// OnReplayed runs when a stored result is replayed instead of running the handler.
	OnReplayed func(context.Context, Event)
	// OnInProgress runs when a request is refused because its key is in flight.
	OnInProgress func(context.Context, Event)
	// OnMismatch runs when a key is reused with a different fingerprint.
	OnMismatch func(context.Context, Event)
	// OnLeaseLost runs when completion finds the lease taken over: the handler's effects may
	// have happened twice unless they were attached to the completion. It also runs when
	// the lease watchdog cancels the handler's context because its lease came within the
	// margin of its end, or, with [WithHeartbeat], when a lease extension finds the lease
	// taken over (see [WithHeartbeat]). It runs at most once per run: the first of these
	// reports the incident, and a later one of the same run does not run it again.
	OnLeaseLost func(context.Context, Event)
	// OnReleased runs when a key is released for a retry without its outcome stored: its
	// handler failed ([Event.HandlerFailed]), its completion committed nothing, or its
	// batch request was settled before it started.
	OnReleased func(context.Context, Event)
	// OnStoreError runs when a store operation fails.
	OnStoreError func(context.Context, Event)
	// OnUnguarded runs when a handler runs without the guard: a wrapper found no key and
	// the key is optional (WithKeyRequired(false) in lambdawrap and idemhttp, lambdawrap's
	// OptionalKey), or [WithFailOpen] let a store failure through. Event.Key is empty for a
	// missing key. It also runs when a wrapper refuses a request because its configuration
	// cannot guard it (lambdawrap: an authenticated request without a caller identity to
	// scope its key by, with Event.Err wrapping lambdawrap.ErrUnknownCaller and an empty
	// Key); the handler does not run then.
	OnUnguarded func(context.Context, Event)
	// OnBatch runs once per batch that a batch wrapper processed (package sqs: one SQS
	// batch), after every message has its outcome and before the response is returned, on
	// the goroutine that processes the batch. The messages that reached the guard have
	// fired the hooks above as they went; the event also covers those that did not (a
	// duplicate within the batch, a message held back). The event is the hook's to keep.
	OnBatch func(context.Context, BatchEvent)
}

// BatchEvent describes a batch of messages that a batch wrapper processed, for
// [Hooks.OnBatch]. It names messages by their IDs, never by their keys or bodies.
type BatchEvent struct {
	// FIFO reports whether the batch was processed group by group, in order within each:
	// an SQS FIFO queue's, or a stream's (package kinesis, dynamostream).
	FIFO bool
	// System names the messaging system the batch came from, as the OpenTelemetry
	// messaging conventions' messaging.system does: "aws_sqs" for package sqs,
	// "aws_kinesis" for kinesis, "aws_dynamodb_streams" for dynamostream.
	System string
	// Destination is the name of the queue (or stream) the batch came from, as the
	// messaging conventions' messaging.destination.name: for SQS, the last part of the
	// records' event source ARN; for Kinesis, the stream's name; for DynamoDB Streams, the
	// table's. Empty if the event names none.
	Destination string
	// Items holds one item per message, in the event's order.
	Items []BatchItem
	// Ran, Replayed, Duplicates and Failed count the items by [BatchItem.Status].
	Ran, Replayed, Duplicates, Failed int
	// Duration is how long the batch took, on the guard's clock ([WithClock]).
	Duration time.Duration
}

// BatchItem is what became of one message of a [BatchEvent].
type BatchItem struct {
	// ID is the message's ID as its source names it, never its idempotency key:
	//   - SQS: the messageId;
	//   - Kinesis, DynamoDB Streams: the record's sequence number;
	//   - Kafka: <topic>-<partition>@<offset>;
	//   - Amazon MQ: the message ID, or <queue>::<vhost>#<index> without one.
	ID string
	// Status is what became of the message: "ran" (the handler ran and its completion was
	// recorded), "replayed" (completed earlier), "duplicate" (an earlier message of the batch
	// with the same key and fingerprint succeeded) or "failed" (reported for redelivery):
	// the values of sqs.Status.
	Status string
	// Reason says why the message failed, one of the values of sqs.Reason such as
	// "in_progress"; empty unless Status is "failed".
	Reason string
	// Err is the failure; nil unless Status is "failed". It wraps the cause, so errors.Is
	// reaches the idem sentinels and the handler's own error.
	Err error
}

// timed reports whether any hook that takes an [Event] is set, so that the guard's steps
// need timing. OnBatch is not among them: a [BatchEvent]'s duration is measured by the
// wrapper that fires it, whether or not any hook is set.
func (h *Hooks) timed() bool {
	return h.OnClaimed != nil || h.OnCompleted != nil || h.OnReplayed != nil || h.OnInProgress != nil ||
		h.OnMismatch != nil || h.OnLeaseLost != nil || h.OnReleased != nil || h.OnStoreError != nil ||
		h.OnUnguarded != nil || h.OnRun != nil || h.OnRunEnd != nil
}

// hookStart returns the start of a step that only hooks time: now, or the zero time (which
// [Guard.fire] skips timing) when no hook is set, sparing a clock read per call.
func (g *Guard) hookStart() time.Time {
	if !g.timed {
		return time.Time{}
	}
	return g.now()
}

// fire calls hook f, if set, with e, timing it from start. Reading the clock only when a
// hook is set keeps it off the hot path.
func (g *Guard) fire(ctx context.Context, f func(context.Context, Event), start time.Time, e Event) {
	if f == nil {
		return
	}
	if !start.IsZero() {
		e.Duration = g.now().Sub(start)
	}
	f(ctx, e)
}

// runHooks is one run's OnRun and OnRunEnd: a nil *runHooks, when neither hook is set,
// does nothing.
type runHooks struct {
	g     *Guard
	ctx   context.Context // the context OnRun returned
	key   string
	start time.Time
	ended bool
}

// startRun runs [Hooks.OnRun] for the run of rec, whose handler is about to start, and
// returns the context for the handler and the hooks of the run, and the run's end.
func (g *Guard) startRun(ctx context.Context, rec *idemstore.Record) (context.Context, *runHooks) {
	h := &g.cfg.hooks
	if h.OnRun == nil && h.OnRunEnd == nil {
		return ctx, nil
	}
	if h.OnRun != nil {
		if rctx := h.OnRun(ctx, Event{Key: rec.Key, LeaseExpires: rec.LeaseExpires}); rctx != nil {
			ctx = rctx
		}
	}
	return ctx, &runHooks{g: g, ctx: ctx, key: rec.Key, start: g.now()}
}

// runHooked runs the handler under the lease on rec as [Guard.runHandler] does, on the
// context [Hooks.OnRun] returns; the settlement carries the run, which [Guard.settle],
// [Guard.settleWritten] or [Batch.Settle] ends. A run whose handler panics ends at once.
func (g *Guard) runHooked(ctx context.Context, rec *idemstore.Record, claimedAt time.Time, run func(context.Context) (any, error)) settlement {
	ctx, hooks := g.startRun(ctx, rec)
	returned := false
	defer func() {
		if !returned {
			hooks.panicked()
		}
	}()
	s := g.runHandler(ctx, rec, claimedAt, run)
	returned = true
	s.run = hooks
	return s
}

// context returns the context for the hooks of the run: the one OnRun returned, or ctx
// when there is no run.
func (r *runHooks) context(ctx context.Context) context.Context {
	if r == nil {
		return ctx
	}
	return r.ctx
}

// end runs [Hooks.OnRunEnd] for a run whose handler ran for handler, and whose caller
// gets err.
func (r *runHooks) end(handler time.Duration, err error) {
	if r == nil || r.ended {
		return
	}
	r.ended = true
	r.g.fire(r.ctx, r.g.cfg.hooks.OnRunEnd, r.start, Event{Key: r.key, HandlerDuration: handler, Err: err})
}

// errHandlerPanicked is the error of a run whose handler panicked, for the hooks.
var errHandlerPanicked = errors.New("idem: handler panicked")

// panicked ends a run that [runHooks.end] has not: its handler panicked. It is deferred.
func (r *runHooks) panicked() { r.end(0, errHandlerPanicked) }

// sinceStart returns the time since start, or zero for a zero start (no hook timed it).
func (g *Guard) sinceStart(start time.Time) time.Duration {
	if start.IsZero() {
		return 0
	}
	return g.now().Sub(start)
}

// leaseLost runs [Hooks.OnLeaseLost] for l with e, unless it ran for l already: a run
// that loses its lease is one incident, though the watchdog and then the completion or
// release may each find it lost.
func (g *Guard) leaseLost(ctx context.Context, l *lease, start time.Time, e Event) {
	if l.lostReported.Swap(true) {
		return
	}
	e.Key = l.key
	g.fire(ctx, g.cfg.hooks.OnLeaseLost, start, e)
}

// JoinHooks returns hooks that call the hooks of each of hs in turn, in the order given;
// [Hooks.OnRunEnd] in the reverse order, so that runs started by OnRun end innermost
// first. Each [Hooks.OnRun] gets the context the one before returned. A field none of hs
// sets stays nil. Use it to send a guard's events to metrics and traces together.
func JoinHooks(hs ...Hooks) Hooks {
	var j Hooks
	j.OnClaimed = joinEvent(hs, func(h *Hooks) func(context.Context, Event) { return h.OnClaimed })
	j.OnCompleted = joinEvent(hs, func(h *Hooks) func(context.Context, Event) { return h.OnCompleted })
	j.OnReplayed = joinEvent(hs, func(h *Hooks) func(context.Context, Event) { return h.OnReplayed })
	j.OnInProgress = joinEvent(hs, func(h *Hooks) func(context.Context, Event) { return h.OnInProgress })
	j.OnMismatch = joinEvent(hs, func(h *Hooks) func(context.Context, Event) { return h.OnMismatch })
	j.OnLeaseLost = joinEvent(hs, func(h *Hooks) func(context.Context, Event) { return h.OnLeaseLost })
	j.OnReleased = joinEvent(hs, func(h *Hooks) func(context.Context, Event) { return h.OnReleased })
	j.OnStoreError = joinEvent(hs, func(h *Hooks) func(context.Context, Event) { return h.OnStoreError })
	j.OnUnguarded = joinEvent(hs, func(h *Hooks) func(context.Context, Event) { return h.OnUnguarded })
	ends := make([]Hooks, len(hs))
	copy(ends, hs)
	slices.Reverse(ends)
	j.OnRunEnd = joinEvent(ends, func(h *Hooks) func(context.Context, Event) { return h.OnRunEnd })

	var runs []func(context.Context, Event) context.Context
	var batches []func(context.Context, BatchEvent)
	for i := range hs {
		if hs[i].OnRun != nil {
			runs = append(runs, hs[i].OnRun)
		}
		if hs[i].OnBatch != nil {
			batches = append(batches, hs[i].OnBatch)
		}
	}
	if len(runs) > 0 {
		j.OnRun = func(ctx context.Context, e Event) context.Context {
			for _, f := range runs {
				if next := f(ctx, e); next != nil {
					ctx = next
				}
			}
			return ctx
		}
	}
	if len(batches) > 0 {
		j.OnBatch = func(ctx context.Context, e BatchEvent) {
			for _, f := range batches {
				f(ctx, e)
			}
		}
	}
	return j
}

// joinEvent joins the field that field picks of each of hs: nil if none is set.
func joinEvent(hs []Hooks, field func(*Hooks) func(context.Context, Event)) func(context.Context, Event) {
	var fs []func(context.Context, Event)
	for i := range hs {
		if f := field(&hs[i]); f != nil {
			fs = append(fs, f)
		}
	}
	switch len(fs) {
	case 0:
		return nil
	case 1:
		return fs[0]
	}
	return func(ctx context.Context, e Event) {
		for _, f := range fs {
			f(ctx, e)
		}
	}
}

// errorTypes names the sentinels of packages idem and idemstore for [ErrorType], the
// more specific first: an error wrapping several is named by the first it matches. A
// test checks that every sentinel of errorKinds has a row. The table is never written.
var errorTypes = [...]struct {
	err  error
	name string
}{
	{ErrLeaseLost, "idem.ErrLeaseLost"},
	{ErrConditionFailed, "idem.ErrConditionFailed"},
	{idemstore.ErrNotCommitted, "idemstore.ErrNotCommitted"},
	{idemstore.ErrTooLarge, "idemstore.ErrTooLarge"},
	{ErrIncompatibleRecord, "idem.ErrIncompatibleRecord"},
	{ErrStore, "idem.ErrStore"},
	{ErrMissingKey, "idem.ErrMissingKey"},
	{ErrInvalidKey, "idem.ErrInvalidKey"},
	{ErrPayloadMismatch, "idem.ErrPayloadMismatch"},
	{ErrInProgress, "idem.ErrInProgress"},
	{ErrFailed, "idem.ErrFailed"},
	{ErrResultNotStored, "idem.ErrResultNotStored"},
	{ErrNoLease, "idem.ErrNoLease"},
	{ErrInvalidCheckpoint, "idem.ErrInvalidCheckpoint"},
	{ErrDoNotStore, "idem.ErrDoNotStore"},
	{ErrInvalidOption, "idem.ErrInvalidOption"},
	{idemstore.ErrInvalidAttach, "idemstore.ErrInvalidAttach"},
}

// ErrorType returns the name of the sentinel of package idem or idemstore that err
// matches with errors.Is, such as "idem.ErrLeaseLost" or "idem.ErrStore"; "" if none
// does. It says what kind of failure err is without its message, which a handler may
// have filled with personal data: for a span's error.type or a metric's dimension.
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	for _, row := range errorTypes {
		if errors.Is(err, row.err) {
			return row.name
		}
	}
	return ""
}
