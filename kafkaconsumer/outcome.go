package kafkaconsumer

import (
	"time"

	"github.com/idemkit/idem/batch"
)

// Status says what became of one record of a batch: the batch engine's status
// (batch.StatusRan, batch.StatusReplayed, batch.StatusDuplicate; batch.StatusFailed, after
// which the record's partition is consumed again from it).
type Status = batch.Status

// Reason says why a record failed: the batch engine's reason. Those a consumer meets most:
// batch.ReasonHandler (the handler failed and its key was released), batch.ReasonInProgress
// (another consumer holds the key: after a rebalance the partition's previous owner may
// still run it; the record is polled again until it replays that owner's result),
// batch.ReasonStore (the store failed: the handler did not run, or its outcome was not
// recorded), batch.ReasonKey, batch.ReasonNotStarted (the batch's deadline was near or its
// context ended) and batch.ReasonGroupStopped (an earlier record of its key in its
// partition failed).
type Reason = batch.Reason

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
	// Reason says why the record failed; empty unless the record failed.
	Reason Reason
	// Err is the failure; nil unless Status is batch.StatusFailed. It wraps the cause.
	Err error
	// Duration is how long the record took from its start; zero for records not started.
	Duration time.Duration
}

// Failed reports whether the record failed.
func (o Outcome) Failed() bool { return o.Status == batch.StatusFailed }

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
