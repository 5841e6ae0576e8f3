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
// said otherwise.
const (
	// MetricClaims counts keys claimed: the handler was about to run.
	MetricClaims = "Claims"
	// MetricCompletions counts results (or remembered failures) stored.
	MetricCompletions = "Completions"
	// MetricReplays counts stored results replayed instead of running the handler.
	MetricReplays = "Replays"
	// MetricInProgress counts requests refused because their key was in flight.
	MetricInProgress = "InProgress"
	// MetricPayloadMismatches counts keys reused with a different request.
	MetricPayloadMismatches = "PayloadMismatches"
	// MetricLeaseLost counts leases found taken over: the handler's effects may have
	// happened twice unless they were attached to the completion. Alarm on it.
	MetricLeaseLost = "LeaseLost"
	// MetricReleases counts keys released after their handler failed.
	MetricReleases = "Releases"
	// MetricStoreErrors counts failed store operations.
	MetricStoreErrors = "StoreErrors"
	// MetricHandlerDuration observes, in milliseconds, each handler run together with the
	// store call that recorded its outcome (completion or release): what
	// [idem.Event.Duration] covers.
	MetricHandlerDuration = "HandlerDuration"
)

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
// the counts from MetricClaims to MetricStoreErrors and [MetricHandlerDuration]; for each
// SQS batch (OnBatch), the MetricSQS* counts and [MetricSQSBatchDuration], and the failures
// by reason under [SQSFailedMetric]. The SQS status counts are recorded even when zero, so
// an alarm on failures sees a value for every batch; a reason's count only when some
// message failed for it. They record nothing of an event but its kind, counts and
// duration: never a key or a message ID.
func (r *Recorder) Hooks() idem.Hooks {
	count := func(name string) func(context.Context, idem.Event) {
		return func(context.Context, idem.Event) { _ = r.Count(name, 1) }
	}
	ran := func(name string) func(context.Context, idem.Event) {
		return func(_ context.Context, e idem.Event) {
			_ = r.Count(name, 1)
			_ = r.Observe(MetricHandlerDuration, UnitMilliseconds, millis(e.Duration))
		}
	}
	// The names are constants and the values finite, so the errors Count and Observe can
	// return cannot happen here.
	return idem.Hooks{
		OnClaimed:    count(MetricClaims),
		OnCompleted:  ran(MetricCompletions),
		OnReplayed:   count(MetricReplays),
		OnInProgress: count(MetricInProgress),
		OnMismatch:   count(MetricPayloadMismatches),
		OnLeaseLost:  count(MetricLeaseLost),
		OnReleased:   ran(MetricReleases),
		OnStoreError: count(MetricStoreErrors),
		OnBatch:      r.batch,
	}
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
	case MetricClaims, MetricCompletions, MetricReplays, MetricInProgress, MetricPayloadMismatches,
		MetricLeaseLost, MetricReleases, MetricStoreErrors, MetricHandlerDuration,
		MetricSQSBatches, MetricSQSMessages, MetricSQSRan, MetricSQSReplayed, MetricSQSDuplicates,
		MetricSQSBatchDuration:
		return true
	}
	return strings.HasPrefix(name, MetricSQSFailed)
}
