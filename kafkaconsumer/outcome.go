package kafkaconsumer

import (
	"time"

	"github.com/idemkit/idem/batch"
)

// Status says what became of one record of a batch: the batch engine's status.
type Status = batch.Status

// The statuses of an [Outcome].
const (
	// StatusRan means the handler ran and succeeded, and its completion was recorded.
	StatusRan = batch.StatusRan
	// StatusReplayed means the key had completed before (a redelivery after a crash or a
	// rebalance): the record is acknowledged without running the handler.
	StatusReplayed = batch.StatusReplayed
	// StatusDuplicate means an earlier record of the batch had the same key and value and
	// succeeded: the record is acknowledged without running the handler.
	StatusDuplicate = batch.StatusDuplicate
	// StatusFailed means the record failed and its partition is polled again from it; the
	// [Reason] says why.
	StatusFailed = batch.StatusFailed
)

// Reason says why a record failed: the batch engine's reason (see batch.Reason for each
// value).
type Reason = batch.Reason

// The reasons of a failed [Outcome] most often met; batch.Reason lists them all.
const (
	// ReasonHandler means the handler returned an error; the key was released.
	ReasonHandler = batch.ReasonHandler
	// ReasonInProgress means another consumer holds the key (idem.ErrInProgress): after a
	// rebalance, the partition's previous owner may still be running it. The record is
	// polled again, and replays that owner's result once it is recorded.
	ReasonInProgress = batch.ReasonInProgress
	// ReasonStore means the idempotency store failed (idem.ErrStore): the handler did not
	// run, or its outcome was not recorded.
	ReasonStore = batch.ReasonStore
	// ReasonKey means the record's key or fingerprint could not be had, or is empty.
	ReasonKey = batch.ReasonKey
	// ReasonNotStarted means the record was not started because the batch's deadline was
	// near or the context had ended.
	ReasonNotStarted = batch.ReasonNotStarted
	// ReasonGroupStopped means an earlier record of its key in its partition failed, so
	// this one was not started.
	ReasonGroupStopped = batch.ReasonGroupStopped
)

// Outcome is what became of one record of a batch.
type Outcome struct {
	// ID names the record: "<topic>-<partition>@<offset>".
	ID string
	// Topic, Partition and Offset place the record in the log.
	Topic     string
	Partition int32
	Offset    int64
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

// Offset names a position in one partition.
type Offset struct {
	Topic     string
	Partition int32
	// Offset is the position: for a commit, the next record to consume.
	Offset int64
}

// Report is what became of one polled batch.
type Report struct {
	// Outcomes holds one [Outcome] per record, in the order the poll returned them.
	Outcomes []Outcome
	// Ran, Replayed, Duplicates and Failed count the outcomes by [Status].
	Ran, Replayed, Duplicates, Failed int
	// Committed lists the offsets committed after the batch, one per partition that had
	// acknowledged records to commit (a commit that failed earlier included); empty if the
	// commit failed.
	Committed []Offset
	// Retried lists, per partition in which a record failed, the offset of its first
	// failure: the partition is consumed again from there.
	Retried []Offset
	// Duration is how long the batch took.
	Duration time.Duration
}
