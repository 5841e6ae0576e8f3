package mq

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idem/batch"
)

// Status says what became of one message of a batch: the batch engine's status
// (batch.StatusRan, batch.StatusReplayed, batch.StatusDuplicate, batch.StatusFailed).
type Status = batch.Status

// The statuses of an [Outcome].
const (
	// StatusRan means the handler ran and succeeded, and its completion was recorded.
	StatusRan = batch.StatusRan
	// StatusReplayed means the key had completed before: the message is acknowledged
	// without running the handler.
	StatusReplayed = batch.StatusReplayed
	// StatusDuplicate means an earlier message of the batch had the same key and data and
	// succeeded: the message is acknowledged without running the handler.
	StatusDuplicate = batch.StatusDuplicate
	// StatusFailed means the message failed; the [Reason] says why.
	StatusFailed = batch.StatusFailed
)

// Reason says why a message failed: the batch engine's reason (see batch.Reason for each
// value). [ReasonGroupStopped] marks the messages after a failure of their queue.
type Reason = batch.Reason

// The reasons of a failed [Outcome] most often met; batch.Reason lists them all.
const (
	// ReasonHandler means the handler returned an error; the key was released.
	ReasonHandler = batch.ReasonHandler
	// ReasonInProgress means another invocation holds the key (idem.ErrInProgress).
	ReasonInProgress = batch.ReasonInProgress
	// ReasonKey means the message's key could not be had ([ErrMissingMessageID]).
	ReasonKey = batch.ReasonKey
	// ReasonNotStarted means the message was not started because the deadline was near.
	ReasonNotStarted = batch.ReasonNotStarted
	// ReasonGroupStopped means an earlier message of its queue failed, so this one was not
	// started.
	ReasonGroupStopped = batch.ReasonGroupStopped
)

// Outcome is what became of one message of a batch.
type Outcome struct {
	// ID names the message: its message ID, or "<queue>#<index>" (its place in the queue's
	// messages of the batch) for a RabbitMQ message without one.
	ID string
	// Queue is the message's queue: ActiveMQ's destination physicalName, RabbitMQ's
	// "<queue>::<virtual host>".
	Queue string
	// Key is the idempotency key as the key function returned it (before scoping and
	// hashing); empty when it could not be determined. This package never logs it.
	Key string
	// Status is what became of the message.
	Status Status
	// Reason says why the message failed; empty unless Status is [StatusFailed].
	Reason Reason
	// Err is the failure; nil unless Status is [StatusFailed]. It wraps the cause.
	Err error
	// Duration is how long the message took from its start; zero for messages not started.
	Duration time.Duration
}

// Failed reports whether the message failed.
func (o Outcome) Failed() bool { return o.Status == StatusFailed }

// Report is what became of a whole batch.
type Report struct {
	// Outcomes holds one [Outcome] per message, in queue order.
	Outcomes []Outcome
	// Ran, Replayed, Duplicates and Failed count the outcomes by [Status].
	Ran, Replayed, Duplicates, Failed int
	// Duration is how long the batch took.
	Duration time.Duration
	first    []int // the first failed outcome of each queue
}

// Err returns nil when no message failed, and otherwise an error wrapping
// [ErrBatchFailed] and the first failure, naming that message and counting the failures:
// what Handle returns.
func (r *Report) Err() error {
	if len(r.first) == 0 {
		return nil
	}
	o := r.Outcomes[r.first[0]]
	return fmt.Errorf("%w: %d of %d messages failed, first %s (%s): %w",
		ErrBatchFailed, r.Failed, len(r.Outcomes), o.ID, o.Reason, o.Err)
}

// process runs items on engine in ordered mode, one group per queue, and reports.
func process(ctx context.Context, engine *batch.Engine, items []batch.Item, run func(ctx context.Context, i int) error, destination string) *Report {
	rep := engine.Process(ctx, items, run, batch.Mode{Ordered: true, RecordBeforeNext: true, Destination: destination})
	out := make([]Outcome, len(rep.Outcomes))
	for i, o := range rep.Outcomes {
		out[i] = Outcome{
			ID: o.ID, Queue: o.Group, Key: o.Key,
			Status: o.Status, Reason: o.Reason, Err: o.Err, Duration: o.Duration,
		}
	}
	return &Report{
		Outcomes: out, first: rep.FirstFailures(),
		Ran: rep.Ran, Replayed: rep.Replayed, Duplicates: rep.Duplicates, Failed: rep.Failed,
		Duration: rep.Duration,
	}
}
