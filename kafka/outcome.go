package kafka

import (
	"fmt"
	"time"

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
	// StatusDuplicate means an earlier record of the batch had the same key and value and
	// succeeded: the record is acknowledged without running the handler.
	StatusDuplicate = batch.StatusDuplicate
	// StatusFailed means the record failed; the [Reason] says why.
	StatusFailed = batch.StatusFailed
)

// Reason says why a record failed: the batch engine's reason (see batch.Reason for each
// value). [ReasonGroupStopped] marks the records after a failure of their record key.
type Reason = batch.Reason

// The reasons of a failed [Outcome] most often met; batch.Reason lists them all.
const (
	// ReasonHandler means the handler returned an error; the key was released.
	ReasonHandler = batch.ReasonHandler
	// ReasonInProgress means another invocation holds the key (idem.ErrInProgress).
	ReasonInProgress = batch.ReasonInProgress
	// ReasonKey means the record's key or fingerprint could not be had, or is empty.
	ReasonKey = batch.ReasonKey
	// ReasonNotStarted means the record was not started because the deadline was near.
	ReasonNotStarted = batch.ReasonNotStarted
	// ReasonGroupStopped means an earlier record of its key in its partition failed, so
	// this one was not started.
	ReasonGroupStopped = batch.ReasonGroupStopped
)

// Outcome is what became of one record of a batch.
type Outcome struct {
	// ID names the record: "<topic>-<partition>@<offset>".
	ID string
	// TopicPartition is the record's "<topic>-<partition>".
	TopicPartition string
	// Offset is the record's offset in its partition.
	Offset int64
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
	// Outcomes holds one [Outcome] per record, partition by partition in offset order.
	Outcomes []Outcome
	// Ran, Replayed, Duplicates and Failed count the outcomes by [Status].
	Ran, Replayed, Duplicates, Failed int
	// Duration is how long the batch took.
	Duration time.Duration
}

// Err returns nil when no record failed, and otherwise an error wrapping [ErrBatchFailed]
// and the first failed record's error, naming that record and counting the failures: what
// [Handler.Handle] returns without [WithReportBatchItemFailures].
func (r *Report) Err() error {
	for _, o := range r.Outcomes {
		if o.Failed() {
			return fmt.Errorf("%w: %d of %d records failed, first %s (%s): %w",
				ErrBatchFailed, r.Failed, len(r.Outcomes), o.ID, o.Reason, o.Err)
		}
	}
	return nil
}

// Response returns the partial batch response of provisioned mode: every failed record
// by topic-partition and offset, in the report's order: the first failure of a record key
// and the records of that key not started after it. Whether Lambda retries a partition
// from its lowest reported offset, as it does a stream shard, or retries exactly the
// records named, no record that did not finish is acknowledged. An empty list acknowledges
// the whole batch.
func (r *Report) Response() Response {
	failures := make([]BatchItemFailure, 0, r.Failed)
	for _, o := range r.Outcomes {
		if !o.Failed() {
			continue
		}
		failures = append(failures, BatchItemFailure{ItemIdentifier: ItemIdentifier{Partition: o.TopicPartition, Offset: o.Offset}})
	}
	return Response{BatchItemFailures: failures}
}

// Response is the partial batch response for a Kafka event source mapping in provisioned
// poller mode with ReportBatchItemFailures; aws-lambda-go has no type for it.
type Response struct {
	// BatchItemFailures names the records Lambda retries.
	BatchItemFailures []BatchItemFailure `json:"batchItemFailures"`
}

// BatchItemFailure names one failed record.
type BatchItemFailure struct {
	// ItemIdentifier is the record's partition and offset.
	ItemIdentifier ItemIdentifier `json:"itemIdentifier"`
}

// ItemIdentifier names a record by its topic-partition and offset.
type ItemIdentifier struct {
	// Partition is "<topic>-<partition>".
	Partition string `json:"partition"`
	// Offset is the record's offset in that partition.
	Offset int64 `json:"offset"`
}
