package idem

import (
	"context"
	"time"
)

// Event describes one step of a guarded call, for [Hooks].
type Event struct {
	// Key is the stored (scoped, hashed) key; never the caller's raw key.
	Key string
	// Op names the store operation for store errors: "claim", "get", "complete", "release",
	// "extend" or "checkpoint"; empty otherwise.
	Op string
	// Duration is how long the step took: the store call for claims, replays, conflicts
	// and store errors; the handler plus completion for completions and releases.
	Duration time.Duration
	// Err is the error involved, if any.
	Err error
}

// Hooks are optional callbacks for metrics, tracing and logging. A nil field does nothing.
// They run synchronously on the calling goroutine, so they must be quick and safe for
// concurrent use.
type Hooks struct {
	// OnClaimed runs when a key is claimed and the handler is about to run.
	OnClaimed func(context.Context, Event)
	// OnCompleted runs when a result (or remembered failure) is stored.
	OnCompleted func(context.Context, Event)
	// OnReplayed runs when a stored result is replayed instead of running the handler.
	OnReplayed func(context.Context, Event)
	// OnInProgress runs when a request is refused because its key is in flight.
	OnInProgress func(context.Context, Event)
	// OnMismatch runs when a key is reused with a different fingerprint.
	OnMismatch func(context.Context, Event)
	// OnLeaseLost runs when completion finds the lease taken over: the handler's effects may
	// have happened twice unless they were attached to the completion. With [WithHeartbeat]
	// it also runs when a lease extension finds the lease taken over, or when no extension
	// succeeded in time and the handler's context is cancelled (see [WithHeartbeat]).
	OnLeaseLost func(context.Context, Event)
	// OnReleased runs when a failed handler's key is released for a retry.
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
	// FIFO reports whether the batch came from a FIFO queue and was processed group by
	// group.
	FIFO bool
	// Items holds one item per message, in the event's order.
	Items []BatchItem
	// Ran, Replayed, Duplicates and Failed count the items by [BatchItem.Status].
	Ran, Replayed, Duplicates, Failed int
	// Duration is how long the batch took, on the guard's clock ([WithClock]).
	Duration time.Duration
}

// BatchItem is what became of one message of a [BatchEvent].
type BatchItem struct {
	// ID is the message's ID (the SQS messageId).
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
		h.OnUnguarded != nil
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
