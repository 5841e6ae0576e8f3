package batch

import (
	"time"

	"github.com/idemkit/idem"
)

// Status says what became of one item of a batch.
type Status string

// The statuses of an [Outcome]. Every status but [StatusFailed] acknowledges the item: the
// source does not deliver it again.
const (
	// StatusRan means the handler ran and succeeded, and its completion was recorded.
	StatusRan Status = "ran"
	// StatusReplayed means the key had completed in an earlier invocation: the item is
	// acknowledged without running the handler.
	StatusReplayed Status = "replayed"
	// StatusDuplicate means an earlier item of the same batch had the same key and
	// fingerprint and succeeded: the item is acknowledged without running the handler or
	// calling the store.
	StatusDuplicate Status = "duplicate"
	// StatusFailed means the item is reported for redelivery. The [Reason] says why.
	StatusFailed Status = "failed"
)

// Reason says why an item failed. It is empty for items that did not.
type Reason string

// The reasons of a failed [Outcome].
const (
	// ReasonHandler means the handler returned an error (the key was released, so a
	// redelivery runs it again), a write it attached to the completion failed its condition
	// (idem.ErrConditionFailed), or, with idem.WithRememberFailures, an earlier run failed
	// permanently (idem.ErrFailed).
	ReasonHandler Reason = "handler"
	// ReasonPanic means the handler panicked; the error is a [*PanicError].
	ReasonPanic Reason = "panic"
	// ReasonInProgress means another invocation holds the key (idem.ErrInProgress). The
	// redelivery replays its result.
	ReasonInProgress Reason = "in_progress"
	// ReasonPayloadMismatch means the key was used before for a different fingerprint
	// (idem.ErrPayloadMismatch). Redeliveries fail the same way.
	ReasonPayloadMismatch Reason = "payload_mismatch"
	// ReasonKey means the item's key or fingerprint could not be determined ([Item.Err]),
	// or the key is missing or invalid (idem.ErrMissingKey, idem.ErrInvalidKey).
	ReasonKey Reason = "key"
	// ReasonLeaseLost means the handler ran, but its lease had ended and another invocation
	// took the key over before the completion (idem.ErrLeaseLost). The redelivery replays
	// the other invocation's result.
	ReasonLeaseLost Reason = "lease_lost"
	// ReasonStore means the idempotency store failed (idem.ErrStore) or holds a record this
	// version cannot read (idem.ErrIncompatibleRecord). If the claim failed, the handler did
	// not run (unless the guard fails open); if the completion failed, it ran, its attached
	// writes did not commit, and a redelivery after the lease ends runs it again.
	ReasonStore Reason = "store"
	// ReasonNotStarted means the item was not started because the deadline was near or the
	// context had ended ([ErrNotStarted]).
	ReasonNotStarted Reason = "not_started"
	// ReasonGroupStopped means an item of an ordered batch was not started because an
	// earlier item of its group failed ([ErrGroupStopped]); reporting it keeps the group in
	// order.
	ReasonGroupStopped Reason = "group_stopped"
	// ReasonDuplicateFailed means an earlier item of the batch with the same key and
	// fingerprint failed, and this one shares its failure ([ErrDuplicateFailed]) so that the
	// source delivers it again along with the original.
	ReasonDuplicateFailed Reason = "duplicate_failed"
)

// Outcome is what became of one item of a batch.
type Outcome struct {
	// ID is the item's [Item.ID].
	ID string
	// Group is the item's [Item.Group].
	Group string
	// Key is the idempotency key as [Item.Key] gave it (before scoping and hashing); empty
	// when it could not be determined. The engine never logs it.
	Key string
	// Status is what became of the item.
	Status Status
	// Reason says why the item failed; empty unless Status is [StatusFailed].
	Reason Reason
	// Err is the failure; nil unless Status is [StatusFailed]. It wraps the cause.
	Err error
	// Duration is how long the item took from its start (store and handler); zero for items
	// not started.
	Duration time.Duration
}

// Failed reports whether the item failed and must be delivered again.
func (o Outcome) Failed() bool { return o.Status == StatusFailed }

// Report is what became of a whole batch.
type Report struct {
	// Outcomes holds one [Outcome] per item, in the items' order.
	Outcomes []Outcome
	// Ordered reports whether the batch was processed group by group ([Mode.Ordered]).
	Ordered bool
	// Ran, Replayed, Duplicates and Failed count the outcomes by [Status].
	Ran, Replayed, Duplicates, Failed int
	// Duration is how long the batch took, on the guard's clock.
	Duration time.Duration
}

// FailedBy counts the failed outcomes by [Reason].
func (r *Report) FailedBy() map[Reason]int {
	by := make(map[Reason]int)
	for _, o := range r.Outcomes {
		if o.Failed() {
			by[o.Reason]++
		}
	}
	return by
}

// FirstFailures returns the index of the first failed outcome of each group, in the items'
// order: what a stream source reports, since it retries a shard from its lowest reported
// failure. In an unordered batch every item is its own group, so it returns every failed
// outcome.
func (r *Report) FirstFailures() []int {
	var first []int
	seen := make(map[string]bool)
	for i, o := range r.Outcomes {
		if !o.Failed() {
			continue
		}
		if r.Ordered {
			if seen[o.Group] {
				continue
			}
			seen[o.Group] = true
		}
		first = append(first, i)
	}
	return first
}

func (r *Report) count() {
	r.Ran, r.Replayed, r.Duplicates, r.Failed = 0, 0, 0, 0
	for _, o := range r.Outcomes {
		switch o.Status {
		case StatusRan:
			r.Ran++
		case StatusReplayed:
			r.Replayed++
		case StatusDuplicate:
			r.Duplicates++
		case StatusFailed:
			r.Failed++
		}
	}
}

// event returns the report of a batch from destination of system as the guard's hooks take
// it ([idem.Hooks.OnBatch]): item IDs, statuses, reasons and errors, never keys.
func (r *Report) event(system, destination string) idem.BatchEvent {
	items := make([]idem.BatchItem, len(r.Outcomes))
	for i, o := range r.Outcomes {
		items[i] = idem.BatchItem{ID: o.ID, Status: string(o.Status), Reason: string(o.Reason), Err: o.Err}
	}
	return idem.BatchEvent{
		FIFO: r.Ordered, System: system, Destination: destination, Items: items,
		Ran: r.Ran, Replayed: r.Replayed, Duplicates: r.Duplicates, Failed: r.Failed,
		Duration: r.Duration,
	}
}
