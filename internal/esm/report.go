package esm

import (
	"fmt"
	"slices"
)

// Invocation is one invocation the poller made, and what came of it.
type Invocation struct {
	// Shard is the shard the batch came from.
	Shard string
	// RequestID is the invocation's AwsRequestID in the handler's lambdacontext.
	RequestID string
	// Records are the batch's sequence numbers, in order.
	Records []string
	// Retry counts the failed invocations before this one that began with the same
	// record (0 the first time).
	Retry int
	// Outcome is what the poller made of the invocation.
	Outcome Outcome
	// Failures are the itemIdentifiers of the partial batch response, as reported.
	Failures []string
	// Done counts the records of the batch that the invocation finished: all of them on
	// [Success], those before the lowest reported one on [PartialFailure], none otherwise.
	Done int
	// Err is the function error ([ErrCrashed], [ErrTimeout], [ErrPanic],
	// [ErrResponseLost], [ErrInjected] or the handler's own), or for an
	// [InvalidResponse] an error saying what was wrong with it.
	Err error
	// Checkpoint is the shard's checkpoint after the invocation: the sequence number of
	// the last record done or discarded ("" for none yet).
	Checkpoint string
}

// Discard is a batch whose retries ran out ([WithMaximumRetryAttempts]): what Lambda
// sends to the on-failure destination (DDBStreamBatchInfo, KinesisBatchInfo), plus the
// sequence numbers. Its records are not processed again; the checkpoint moves past them.
type Discard struct {
	// Shard is the shard the records come from.
	Shard string
	// Condition is why they were discarded: "RetryAttemptsExhausted".
	Condition string
	// StartSequenceNumber and EndSequenceNumber bound the discarded batch.
	StartSequenceNumber, EndSequenceNumber string
	// Records are the discarded sequence numbers, in order.
	Records []string
	// ApproximateInvokeCount counts the invocations of the batch's first record.
	ApproximateInvokeCount int
}

// Report is everything a poller did, in the order it did it within each shard.
type Report struct {
	// Invocations lists every invocation; those of one shard appear in the order made.
	Invocations []Invocation
	// Discarded lists the batches sent to the on-failure destination.
	Discarded []Discard
	// Checkpoints maps each shard read to its checkpoint: the sequence number of the
	// last record done or discarded ("" for none).
	Checkpoints map[string]string
}

// Delivered returns how many times the handler was given each record, by sequence
// number (within a shard; sequence numbers of different shards of one Kinesis stream
// differ too).
func (r *Report) Delivered() map[string]int {
	n := map[string]int{}
	for _, inv := range r.Invocations {
		for _, seq := range inv.Records {
			n[seq]++
		}
	}
	return n
}

// Done returns, for each shard, the sequence numbers that invocations finished, in the
// order they were finished.
func (r *Report) Done() map[string][]string {
	done := map[string][]string{}
	for _, inv := range r.Invocations {
		done[inv.Shard] = append(done[inv.Shard], inv.Records[:inv.Done]...)
	}
	return done
}

// Settled returns, for each shard, the sequence numbers finished by an invocation or
// discarded, in sequence order. After a drain, a test compares it with the records it
// wrote: one missing was skipped.
func (r *Report) Settled() map[string][]string {
	settled := r.Done()
	for _, d := range r.Discarded {
		settled[d.Shard] = append(settled[d.Shard], d.Records...)
	}
	for _, seqs := range settled {
		slices.SortStableFunc(seqs, compareSequence)
	}
	return settled
}

// Check verifies, from the invocations alone, the event source mapping's promise to a
// stream: within each shard, the records finished or discarded follow one another in
// sequence order, each exactly once, and the checkpoint is the last of them, so it never
// passed a record that was neither; and every record delivered lies at or before the
// checkpoint once the poller has drained (none is left unfinished). It returns the first
// violation.
func (r *Report) Check() error {
	settled := r.Settled()
	for shard, seqs := range settled {
		for i := 1; i < len(seqs); i++ {
			if !SequenceLess(seqs[i-1], seqs[i]) {
				return fmt.Errorf("esm: shard %s: record %s was settled twice", shard, seqs[i])
			}
		}
		if cp := r.Checkpoints[shard]; len(seqs) > 0 && cp != seqs[len(seqs)-1] {
			return fmt.Errorf("esm: shard %s: checkpoint %s, but the last record settled is %s", shard, cp, seqs[len(seqs)-1])
		}
	}
	// Every record delivered must be settled: a gap is a record the checkpoint passed
	// without finishing or discarding it, or one still pending after a drain.
	for _, inv := range r.Invocations {
		have := settled[inv.Shard]
		for _, seq := range inv.Records {
			if _, found := slices.BinarySearchFunc(have, seq, compareSequence); !found {
				return fmt.Errorf("esm: shard %s: record %s was delivered but neither finished nor discarded", inv.Shard, seq)
			}
		}
	}
	return nil
}
