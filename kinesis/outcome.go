package kinesis

import (
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem/batch"
)

// Status says what became of one record of a batch: the batch engine's status
// (batch.StatusRan, batch.StatusReplayed, batch.StatusDuplicate, batch.StatusFailed).
type Status = batch.Status

// The statuses of an [Outcome].
const (
	// StatusRan means the handler ran and succeeded, and its completion was recorded.
	StatusRan = batch.StatusRan
	// StatusReplayed means the key had completed before: the record is acknowledged
	// without running the handler.
	StatusReplayed = batch.StatusReplayed
	// StatusDuplicate means an earlier record of the batch had the same key and data and
	// succeeded: the record is acknowledged without running the handler.
	StatusDuplicate = batch.StatusDuplicate
	// StatusFailed means the record failed; the [Reason] says why. The first failed record
	// of its partition key is reported, so Lambda delivers it again.
	StatusFailed = batch.StatusFailed
)

// Reason says why a record failed: the batch engine's reason (see batch.Reason for each
// value). [ReasonGroupStopped] marks the records after a failure of their partition key.
type Reason = batch.Reason

// The reasons of a failed [Outcome] most often met; batch.Reason lists them all.
const (
	// ReasonHandler means the handler returned an error; the key was released.
	ReasonHandler = batch.ReasonHandler
	// ReasonInProgress means another invocation holds the key (idem.ErrInProgress).
	ReasonInProgress = batch.ReasonInProgress
	// ReasonNotStarted means the record was not started because the deadline was near.
	ReasonNotStarted = batch.ReasonNotStarted
	// ReasonGroupStopped means an earlier record of the partition key failed, so this one
	// was not started: Lambda delivers it again after that one.
	ReasonGroupStopped = batch.ReasonGroupStopped
)

// Outcome is what became of one record of a batch.
type Outcome struct {
	// SequenceNumber is the record's sequence number, the batch item failure's
	// itemIdentifier.
	SequenceNumber string
	// PartitionKey is the record's ordering group: its partition key, unless
	// [WithOrderingKey] says otherwise.
	PartitionKey string
	// Key is the idempotency key as the key function returned it (before scoping and
	// hashing); empty when it could not be determined. This package never logs it.
	Key string
	// Status is what became of the record.
	Status Status
	// Reason says why the record failed; empty unless Status is [StatusFailed].
	Reason Reason
	// Err is the failure; nil unless Status is [StatusFailed]. It wraps the cause.
	Err error
	// Duration is how long the record took from its start; zero for records not started.
	Duration time.Duration
}

// Failed reports whether the record failed.
func (o Outcome) Failed() bool { return o.Status == StatusFailed }

// Report is what became of a whole batch.
type Report struct {
	// Outcomes holds one [Outcome] per record, in the event's order.
	Outcomes []Outcome
	// Ran, Replayed, Duplicates and Failed count the outcomes by [Status].
	Ran, Replayed, Duplicates, Failed int
	// Duration is how long the batch took.
	Duration time.Duration

	first []int // the first failed outcome of each partition key
}

// Response returns the partial batch response for Lambda: the sequence number of the first
// failed record of each partition key, in the event's order. Lambda checkpoints before the
// lowest of them and delivers the shard again from it, so the records after it that
// finished replay from the store; with BisectBatchOnFunctionError, it splits the batch
// there. An empty list acknowledges the whole batch.
func (r *Report) Response() events.KinesisEventResponse {
	failures := make([]events.KinesisBatchItemFailure, 0, len(r.first))
	for _, i := range r.first {
		failures = append(failures, events.KinesisBatchItemFailure{ItemIdentifier: r.Outcomes[i].SequenceNumber})
	}
	return events.KinesisEventResponse{BatchItemFailures: failures}
}
