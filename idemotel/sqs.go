package idemotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem"
)

// Attribute keys of [SpanSQSBatch] and its events.
const (
	// AttrMessagingSystem is the semantic convention's messaging.system: "aws_sqs".
	AttrMessagingSystem = semconv.MessagingSystemKey
	// AttrMessagingOperationType is the semantic convention's messaging.operation.type:
	// "process", since the batch span covers the processing of delivered messages.
	AttrMessagingOperationType = semconv.MessagingOperationTypeKey
	// AttrMessagingOperationName is the semantic convention's messaging.operation.name:
	// "process".
	AttrMessagingOperationName = semconv.MessagingOperationNameKey
	// AttrMessagingDestination is the semantic convention's messaging.destination.name:
	// the queue's name, from the records' event source ARN ([idem.BatchEvent.Destination]).
	AttrMessagingDestination = semconv.MessagingDestinationNameKey
	// AttrBatchSize is the semantic convention's messaging.batch.message_count.
	AttrBatchSize = semconv.MessagingBatchMessageCountKey
	// AttrMessageID is the semantic convention's messaging.message.id, on the event of a
	// failed message.
	AttrMessageID = semconv.MessagingMessageIDKey
	// AttrFIFO reports whether the batch came from a FIFO queue.
	AttrFIFO = attribute.Key("idem.sqs.fifo")
	// AttrRan counts the batch's messages whose handler ran and succeeded.
	AttrRan = attribute.Key("idem.sqs.ran")
	// AttrReplayed counts the batch's messages acknowledged as completed earlier.
	AttrReplayed = attribute.Key("idem.sqs.replayed")
	// AttrDuplicates counts the batch's messages acknowledged as duplicates within it.
	AttrDuplicates = attribute.Key("idem.sqs.duplicates")
	// AttrFailed counts the batch's messages reported for redelivery.
	AttrFailed = attribute.Key("idem.sqs.failed")
	// AttrReason is a failed message's reason ([idem.BatchItem.Reason], an sqs.Reason), on
	// its event.
	AttrReason = attribute.Key("idem.sqs.reason")
)

// EventMessageFailed is the span event of [SpanSQSBatch] for each failed message.
const EventMessageFailed = "idem.sqs.message_failed"

// batch records an SQS batch (the OnBatch hook of [Tracer.Hooks]) as a [SpanSQSBatch]
// span that ends now and began the batch's duration earlier, with its outcome counts and
// an [EventMessageFailed] event per failed message (its ID and reason; never its key or
// body). A batch with failures keeps the status Unset: the failed messages go back to the
// queue, which is the batch working as designed.
//
// The span follows the OpenTelemetry messaging semantic conventions (semconv v1.39.0) for
// a process span: kind Consumer, with messaging.system, messaging.operation.type and
// .name ("process") and messaging.destination.name (the queue).
func (t *Tracer) batch(ctx context.Context, e idem.BatchEvent) {
	end := t.clock.Now()
	system := e.System
	if system == "" {
		system = semconv.MessagingSystemAWSSQS.Value.AsString()
	}
	_, s := t.tracer.Start(ctx, SpanSQSBatch, trace.WithTimestamp(end.Add(-e.Duration)),
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			AttrMessagingSystem.String(system),
			AttrMessagingOperationType.String("process"),
			AttrMessagingOperationName.String("process"),
			AttrMessagingDestination.String(e.Destination),
			AttrBatchSize.Int(len(e.Items)),
			AttrFIFO.Bool(e.FIFO),
			AttrRan.Int(e.Ran),
			AttrReplayed.Int(e.Replayed),
			AttrDuplicates.Int(e.Duplicates),
			AttrFailed.Int(e.Failed),
		))
	for _, it := range e.Items {
		if it.Reason != "" {
			s.AddEvent(EventMessageFailed, trace.WithTimestamp(end), trace.WithAttributes(
				AttrMessageID.String(it.ID), AttrReason.String(it.Reason)))
		}
	}
	s.End(trace.WithTimestamp(end))
}
