package emf

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idem"
)

// The metrics of [Recorder.Hooks] for each guarded call, one count per hook call unless
// said otherwise, under the dimension [DimensionOperation] beside the recorder's own.
const (
	// MetricClaims counts keys claimed: the handler was about to run.
	MetricClaims = "Claims"
	// MetricCompletions counts results (or remembered failures) stored.
	MetricCompletions = "Completions"
	// MetricReplays counts stored results replayed instead of running the handler.
	MetricReplays = "Replays"
	// MetricCacheReplays counts the replays (among MetricReplays) that came from the
	// guard's local cache ([idem.WithCache]), with no store round trip.
	MetricCacheReplays = "CacheReplays"
	// MetricInProgressRefusals counts requests refused because their key was in flight
	// (answered 409, or an SQS message failed as in_progress): refusals, not keys in
	// flight. Before, it was named "InProgress".
	MetricInProgressRefusals = "InProgressRefusals"
	// MetricPayloadMismatches counts requests refused because their key was used before
	// with a different request.
	MetricPayloadMismatches = "PayloadMismatches"
	// MetricLeaseLost counts runs whose lease was found taken over or ran out, once per
	// run: the handler's effects may have happened twice unless they were attached to the
	// completion. Alarm on it.
	MetricLeaseLost = "LeaseLost"
	// MetricHandlerFailures counts keys released because their handler failed (returned
	// an error or panicked), so that a retry runs it again. With MetricOtherReleases, it
	// replaces "Releases", which counted both.
	MetricHandlerFailures = "HandlerFailures"
	// MetricOtherReleases counts keys released although their handler did not fail: a
	// completion that committed nothing (an attached write refused), or a batch request
	// settled before it started.
	MetricOtherReleases = "OtherReleases"
	// MetricStoreErrors counts failed store operations.
	MetricStoreErrors = "StoreErrors"
	// MetricHandlerDuration observes, in milliseconds, each handler's run alone
	// ([idem.Event.HandlerDuration]). Before, it covered the recording too, as
	// MetricRunDuration does.
	MetricHandlerDuration = "HandlerDuration"
	// MetricRunDuration observes, in milliseconds, each handler's run together with the
	// store call that recorded its outcome (completion or release): what
	// [idem.Event.Duration] covers.
	MetricRunDuration = "RunDuration"
)

// DimensionOperation is the dimension that [Recorder.Hooks] gives the metrics of each
// guarded call: the guard's operation (the name given to [idem.New]), from the stored
// key, so that two guards in one function have metrics of their own. The batch metrics
// have no operation. A recorder given a dimension of this name ([WithDimension]), or as
// many dimensions as [MaxDimensions], records without it.
const DimensionOperation = "Operation"

// The metrics of [Recorder.Hooks] for each SQS batch (package sqs), from the guard's
// OnBatch hook.
const (
	// MetricSQSBatches counts batches processed.
	MetricSQSBatches = "SQSBatches"
	// MetricSQSMessages counts messages received.
	MetricSQSMessages = "SQSMessages"
	// MetricSQSRan counts messages whose handler ran and succeeded.
	MetricSQSRan = "SQSRan"
	// MetricSQSReplayed counts messages acknowledged as completed earlier.
	MetricSQSReplayed = "SQSReplayed"
	// MetricSQSDuplicates counts messages acknowledged as duplicates within their batch.
	MetricSQSDuplicates = "SQSDuplicates"
	// MetricSQSFailed counts batch item failures; [SQSFailedMetric] names the count of one
	// reason.
	MetricSQSFailed = "SQSFailed"
	// MetricSQSBatchDuration observes each batch's duration in milliseconds.
	MetricSQSBatchDuration = "SQSBatchDuration"
)

// Hooks returns the [idem.Hooks] that record this package's metrics: for each guarded call,
// the counts from MetricClaims to MetricStoreErrors, [MetricHandlerDuration] and
// [MetricRunDuration], under [DimensionOperation]; for each SQS batch (OnBatch), the
// MetricSQS* counts and [MetricSQSBatchDuration], and the failures by reason under
// [SQSFailedMetric]. The SQS status counts are recorded even when zero, so an alarm on
// failures sees a value for every batch; a reason's count only when some message failed
// for it. They record nothing of an event but its kind, operation, counts and duration:
// never a key or a message ID. To record traces too, join them with [idem.JoinHooks].
func (r *Recorder) Hooks() idem.Hooks {
	count := func(name string) func(context.Context, idem.Event) {
		return func(_ context.Context, e idem.Event) { r.countOp(name, operation(e.Key)) }
	}
	ran := func(e idem.Event) {
		op := operation(e.Key)
		r.observeOp(MetricHandlerDuration, op, millis(e.HandlerDuration))
		r.observeOp(MetricRunDuration, op, millis(e.Duration))
	}
	return idem.Hooks{
		OnClaimed: count(MetricClaims),
		OnCompleted: func(_ context.Context, e idem.Event) {
			r.countOp(MetricCompletions, operation(e.Key))
			ran(e)
		},
		OnReplayed: func(_ context.Context, e idem.Event) {
			op := operation(e.Key)
			r.countOp(MetricReplays, op)
			if e.FromCache {
				r.countOp(MetricCacheReplays, op)
			}
		},
		OnInProgress: count(MetricInProgressRefusals),
		OnMismatch:   count(MetricPayloadMismatches),
		OnLeaseLost:  count(MetricLeaseLost),
		OnReleased: func(_ context.Context, e idem.Event) {
			if !e.HandlerFailed {
				r.countOp(MetricOtherReleases, operation(e.Key))
				return // no handler ran, or its run was timed by its completion
			}
			r.countOp(MetricHandlerFailures, operation(e.Key))
			ran(e)
		},
		OnStoreError: count(MetricStoreErrors),
		OnBatch:      r.batch,
	}
}

// countOp adds one to the count name of operation op. The names are constants, so the
// error record can return cannot happen here.
func (r *Recorder) countOp(name, op string) { _ = r.record(name, op, UnitCount, true, 1) }

// observeOp records v milliseconds of name for operation op.
func (r *Recorder) observeOp(name, op string, v float64) {
	_ = r.record(name, op, UnitMilliseconds, false, v)
}

// operation returns the operation of a stored key "<scope>.<operation>#<hash>": what
// follows the last '.' before the '#' (an operation holds no '.'); "" for another form.
func operation(key string) string {
	i := strings.LastIndexByte(key, '#')
	if i < 0 {
		return ""
	}
	prefix := key[:i]
	j := strings.LastIndexByte(prefix, '.')
	if j < 0 {
		return ""
	}
	return prefix[j+1:]
}

// batch records an SQS batch's metrics.
func (r *Recorder) batch(_ context.Context, e idem.BatchEvent) {
	_ = r.Count(MetricSQSBatches, 1)
	_ = r.Count(MetricSQSMessages, float64(len(e.Items)))
	_ = r.Count(MetricSQSRan, float64(e.Ran))
	_ = r.Count(MetricSQSReplayed, float64(e.Replayed))
	_ = r.Count(MetricSQSDuplicates, float64(e.Duplicates))
	_ = r.Count(MetricSQSFailed, float64(e.Failed))
	failed := make(map[string]int)
	for _, it := range e.Items {
		if it.Reason != "" {
			failed[it.Reason]++
		}
	}
	for _, reason := range slices.Sorted(maps.Keys(failed)) {
		_ = r.Count(SQSFailedMetric(reason), float64(failed[reason]))
	}
	_ = r.Observe(MetricSQSBatchDuration, UnitMilliseconds, millis(e.Duration))
}

// SQSFailedMetric returns the name of the count of messages failed for reason (an
// sqs.Reason, as [idem.BatchItem.Reason] carries it): "SQSFailed" followed by the reason in
// camel case, such as "SQSFailedInProgress" for "in_progress". Reasons are a closed set, so
// these names are few.
func SQSFailedMetric(reason string) string {
	var b strings.Builder
	b.WriteString(MetricSQSFailed)
	for _, word := range strings.Split(reason, "_") {
		if word != "" {
			b.WriteString(strings.ToUpper(word[:1]) + word[1:])
		}
	}
	return b.String()
}

// millis returns d in milliseconds, with microsecond precision.
func millis(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// reserved reports whether name is, or may be, the name of one of this package's metrics,
// and so cannot name a dimension.
func reserved(name string) bool {
	switch name {
	case MetricClaims, MetricCompletions, MetricReplays, MetricCacheReplays, MetricInProgressRefusals, MetricPayloadMismatches,
		MetricLeaseLost, MetricHandlerFailures, MetricOtherReleases, MetricStoreErrors,
		MetricHandlerDuration, MetricRunDuration,
		MetricSQSBatches, MetricSQSMessages, MetricSQSRan, MetricSQSReplayed, MetricSQSDuplicates,
		MetricSQSBatchDuration:
		return true
	}
	return strings.HasPrefix(name, MetricSQSFailed)
}
