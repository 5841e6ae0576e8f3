package emf

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqs"
)

// The metrics of [Recorder.Hooks], one count per hook call unless said otherwise.
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

// The metrics of [Recorder.SQSHooks], per batch.
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

// Hooks returns the [idem.Hooks] that record the Metric* counts and [MetricHandlerDuration].
// They record nothing of the event but its kind and duration: never a key.
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
	}
}

// SQSHooks returns the [sqs.Hooks] that record, for each batch, the MetricSQS* counts and
// [MetricSQSBatchDuration], and the failures by reason under [SQSFailedMetric]. The status
// counts are recorded even when zero, so an alarm on failures sees a value for every batch;
// a reason's count only when some message failed for it. Message IDs and keys are never
// recorded.
func (r *Recorder) SQSHooks() sqs.Hooks {
	return sqs.Hooks{OnBatch: func(_ context.Context, rep *sqs.Report) {
		_ = r.Count(MetricSQSBatches, 1)
		_ = r.Count(MetricSQSMessages, float64(len(rep.Outcomes)))
		_ = r.Count(MetricSQSRan, float64(rep.Ran))
		_ = r.Count(MetricSQSReplayed, float64(rep.Replayed))
		_ = r.Count(MetricSQSDuplicates, float64(rep.Duplicates))
		_ = r.Count(MetricSQSFailed, float64(rep.Failed))
		failed := rep.FailedBy()
		for _, reason := range slices.Sorted(maps.Keys(failed)) {
			_ = r.Count(SQSFailedMetric(reason), float64(failed[reason]))
		}
		_ = r.Observe(MetricSQSBatchDuration, UnitMilliseconds, millis(rep.Duration))
	}}
}

// SQSFailedMetric returns the name of the count of messages failed for reason: "SQSFailed"
// followed by the reason in camel case, such as "SQSFailedInProgress" for
// sqs.ReasonInProgress. Reasons are a closed set, so these names are few.
func SQSFailedMetric(reason sqs.Reason) string {
	var b strings.Builder
	b.WriteString(MetricSQSFailed)
	for _, word := range strings.Split(string(reason), "_") {
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
