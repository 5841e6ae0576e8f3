package idemotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem/sqs"
)

// Attribute keys of [SpanSQSBatch] and its events.
const (
	// AttrMessagingSystem is the semantic convention's messaging.system: "aws_sqs".
	AttrMessagingSystem = attribute.Key("messaging.system")
	// AttrBatchSize is the semantic convention's messaging.batch.message_count.
	AttrBatchSize = attribute.Key("messaging.batch.message_count")
	// AttrMessageID is the semantic convention's messaging.message.id, on the event of a
	// failed message.
	AttrMessageID = attribute.Key("messaging.message.id")
	// AttrFIFO reports whether the batch came from a FIFO queue.
	AttrFIFO = attribute.Key("idem.sqs.fifo")
	// AttrRan, AttrReplayed, AttrDuplicates and AttrFailed count the batch's outcomes.
	AttrRan        = attribute.Key("idem.sqs.ran")
	AttrReplayed   = attribute.Key("idem.sqs.replayed")
	AttrDuplicates = attribute.Key("idem.sqs.duplicates")
	AttrFailed     = attribute.Key("idem.sqs.failed")
	// AttrReason is a failed message's [sqs.Reason], on its event.
	AttrReason = attribute.Key("idem.sqs.reason")
)

// EventMessageFailed is the span event of [SpanSQSBatch] for each failed message.
const EventMessageFailed = "idem.sqs.message_failed"

// SQSHooks returns the [sqs.Hooks] that make a [SpanSQSBatch] span per batch, with its
// outcome counts and an [EventMessageFailed] event per failed message (its ID and reason;
// never its key or body). A batch with failures keeps the status Unset: the failed
// messages go back to the queue, which is the batch working as designed.
func (t *Tracer) SQSHooks() sqs.Hooks {
	return sqs.Hooks{OnBatch: func(ctx context.Context, rep *sqs.Report) {
		end := t.clock.Now()
		_, s := t.tracer.Start(ctx, SpanSQSBatch, trace.WithTimestamp(end.Add(-rep.Duration)),
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
				AttrMessagingSystem.String("aws_sqs"),
				AttrBatchSize.Int(len(rep.Outcomes)),
				AttrFIFO.Bool(rep.FIFO),
				AttrRan.Int(rep.Ran),
				AttrReplayed.Int(rep.Replayed),
				AttrDuplicates.Int(rep.Duplicates),
				AttrFailed.Int(rep.Failed),
			))
		for _, o := range rep.Outcomes {
			if o.Failed() {
				s.AddEvent(EventMessageFailed, trace.WithTimestamp(end), trace.WithAttributes(
					AttrMessageID.String(o.MessageID), AttrReason.String(string(o.Reason))))
			}
		}
		s.End(trace.WithTimestamp(end))
	}}
}
