package kafkaconsumer

import (
	"errors"

	"github.com/idemkit/idem/batch"
)

// Errors of this package. The errors in an [Outcome] also wrap the idem sentinels
// (idem.ErrInProgress, idem.ErrStore, …) and the handler's own error, so errors.Is and
// errors.As reach the cause.
var (
	// ErrClosed means the consumer's client was closed: [Consumer.Poll] returns it, and
	// [Consumer.Run] returns nil on it.
	ErrClosed = errors.New("kafkaconsumer: client closed")
	// ErrFetch wraps the errors a poll returned for its partitions (the broker unreachable,
	// a topic gone); the partitions fetched without error are processed all the same.
	ErrFetch = errors.New("kafkaconsumer: fetch failed")
	// ErrCommit means an offset commit failed (the broker unreachable, the member fenced
	// out of its group by a rebalance). The records stay acknowledged in the consumer and
	// their offsets are committed with the next batch or when their partitions are
	// revoked; a consumer that never commits them again leaves them to the partition's
	// next owner, which replays them from the store.
	ErrCommit = errors.New("kafkaconsumer: commit failed")
	// ErrNotStarted means a record was not started because the batch's deadline was near
	// or the context had ended (see [WithBatchTimeout]); it is polled again.
	ErrNotStarted = batch.ErrNotStarted
	// ErrGroupStopped means a record was not started because an earlier record of its key
	// in its partition failed in the same batch. The error also wraps that failure.
	ErrGroupStopped = batch.ErrGroupStopped
)

// PanicError reports a record handler that panicked: the batch engine's error. The record
// fails, its key is released, and the rest of the batch goes on.
type PanicError = batch.PanicError
