package sqs

import (
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
)

// Status says what became of one message of a batch.
type Status string

// The statuses of an [Outcome]. Every status but [StatusFailed] acknowledges the message:
// SQS deletes it.
const (
	// StatusRan means the handler ran and succeeded, and its completion was recorded.
	StatusRan Status = "ran"
	// StatusReplayed means the key had completed in an earlier invocation: the message is
	// acknowledged without running the handler.
	StatusReplayed Status = "replayed"
	// StatusDuplicate means an earlier message of the same batch had the same key and
	// fingerprint and succeeded: the message is acknowledged without running the handler or
	// calling the store.
	StatusDuplicate Status = "duplicate"
	// StatusFailed means the message is reported as a batch item failure, so SQS delivers it
	// again (or moves it to the dead-letter queue after maxReceiveCount deliveries). The
	// [Reason] says why.
	StatusFailed Status = "failed"
)

// Reason says why a message failed. It is empty for messages that did not.
type Reason string

// The reasons of a failed [Outcome].
const (
	// ReasonHandler means the handler returned an error (the key was released, so a
	// redelivery runs it again), a write it attached to the completion failed its condition
	// (idem.ErrConditionFailed), or, with idem.WithRememberFailures, an earlier run failed
	// permanently (idem.ErrFailed), which sends the message on to the dead-letter queue.
	ReasonHandler Reason = "handler"
	// ReasonPanic means the handler panicked; the error is a [*PanicError].
	ReasonPanic Reason = "panic"
	// ReasonInProgress means another invocation holds the key (idem.ErrInProgress). The
	// redelivery, after the queue's visibility timeout, replays its result.
	ReasonInProgress Reason = "in_progress"
	// ReasonPayloadMismatch means the key was used before for a different fingerprint
	// (idem.ErrPayloadMismatch). Redeliveries fail the same way, so the message ends in the
	// dead-letter queue, where it belongs: its key collides with another message's.
	ReasonPayloadMismatch Reason = "payload_mismatch"
	// ReasonKey means the message's key or fingerprint could not be determined, or the key
	// is missing or invalid (idem.ErrMissingKey, idem.ErrInvalidKey).
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
	// ReasonNotStarted means the message was not started because the deadline was near or
	// the context had ended ([ErrNotStarted]).
	ReasonNotStarted Reason = "not_started"
	// ReasonGroupStopped means a FIFO message was not started because an earlier message of
	// its group failed ([ErrGroupStopped]); reporting it keeps the group in order.
	ReasonGroupStopped Reason = "group_stopped"
	// ReasonDuplicateFailed means an earlier message of the batch with the same key and
	// fingerprint failed, and this one shares its failure ([ErrDuplicateFailed]) so that
	// SQS delivers it again along with the original.
	ReasonDuplicateFailed Reason = "duplicate_failed"
)

// Outcome is what became of one message of a batch.
type Outcome struct {
	// MessageID is the message's ID, the batch item failure's itemIdentifier.
	MessageID string
	// GroupID is the message's MessageGroupId attribute: the FIFO group, or the fair-queue
	// tenant of a standard queue; empty when absent.
	GroupID string
	// Key is the idempotency key as the key function returned it (before scoping and
	// hashing); empty when it could not be determined. This package never logs it.
	Key string
	// Status is what became of the message.
	Status Status
	// Reason says why the message failed; empty unless Status is [StatusFailed].
	Reason Reason
	// Err is the failure; nil unless Status is [StatusFailed]. It wraps the cause.
	Err error
	// Duration is how long the message took from its start (key, store and handler); zero
	// for messages not started.
	Duration time.Duration
}

// Failed reports whether the message is a batch item failure.
func (o Outcome) Failed() bool { return o.Status == StatusFailed }

// Report is what became of a whole batch.
type Report struct {
	// Outcomes holds one [Outcome] per record, in the event's order.
	Outcomes []Outcome
	// FIFO reports whether the batch came from a FIFO queue and was processed group by group.
	FIFO bool
	// Ran, Replayed, Duplicates and Failed count the outcomes by [Status].
	Ran, Replayed, Duplicates, Failed int
	// Duration is how long the batch took.
	Duration time.Duration
}

// Response returns the partial batch response for Lambda: the message ID of every failed
// message, once each (SQS may deliver one message twice in a batch), in the event's order.
// An empty list acknowledges the whole batch.
func (r *Report) Response() events.SQSEventResponse {
	failures := make([]events.SQSBatchItemFailure, 0, r.Failed)
	var seen map[string]bool
	if r.Failed > 1 {
		seen = make(map[string]bool, r.Failed)
	}
	for _, o := range r.Outcomes {
		if !o.Failed() || seen[o.MessageID] {
			continue
		}
		if seen != nil {
			seen[o.MessageID] = true
		}
		failures = append(failures, events.SQSBatchItemFailure{ItemIdentifier: o.MessageID})
	}
	return events.SQSEventResponse{BatchItemFailures: failures}
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

// event returns the report of a batch from queue as the guard's hooks take it: message
// IDs, statuses, reasons and errors, never keys.
func (r *Report) event(queue string) idem.BatchEvent {
	items := make([]idem.BatchItem, len(r.Outcomes))
	for i, o := range r.Outcomes {
		items[i] = idem.BatchItem{ID: o.MessageID, Status: string(o.Status), Reason: string(o.Reason), Err: o.Err}
	}
	return idem.BatchEvent{
		FIFO: r.FIFO, System: "aws_sqs", Destination: queue, Items: items,
		Ran: r.Ran, Replayed: r.Replayed, Duplicates: r.Duplicates, Failed: r.Failed,
		Duration: r.Duration,
	}
}
