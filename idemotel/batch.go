package idemotel

import (
	"context"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem"
)

// OperationProcess is the messaging operation of a batch span, its
// messaging.operation.name and the first word of its name: "process <destination>", or
// "process" alone when the event names no destination, as the OpenTelemetry messaging
// semantic conventions name a span.
const OperationProcess = "process"

// Attribute keys of a batch span and its events.
const (
	// AttrMessagingSystem is the semantic convention's messaging.system:
	// [idem.BatchEvent.System], such as "aws_sqs", "aws_kinesis", "aws_dynamodb_streams",
	// "kafka", "rabbitmq" or "activemq"; "aws_sqs" if the event names none.
	AttrMessagingSystem = semconv.MessagingSystemKey
	// AttrMessagingOperationType is the semantic convention's messaging.operation.type:
	// "process", since the batch span covers the processing of delivered messages.
	AttrMessagingOperationType = semconv.MessagingOperationTypeKey
	// AttrMessagingOperationName is the semantic convention's messaging.operation.name:
	// [OperationProcess].
	AttrMessagingOperationName = semconv.MessagingOperationNameKey
	// AttrMessagingDestination is the semantic convention's messaging.destination.name:
	// the queue's, stream's, table's or topic's name ([idem.BatchEvent.Destination]).
	AttrMessagingDestination = semconv.MessagingDestinationNameKey
	// AttrBatchSize is the semantic convention's messaging.batch.message_count.
	AttrBatchSize = semconv.MessagingBatchMessageCountKey
	// AttrMessageID is the semantic convention's messaging.message.id, on the event of a
	// failed item: its [idem.BatchItem.ID], the source's own identifier (an SQS message
	// ID, a stream record's sequence number, a Kafka record's "<topic>-<partition>@<offset>").
	AttrMessageID = semconv.MessagingMessageIDKey
	// AttrPartition is the semantic convention's messaging.destination.partition.id, on
	// the event of a failed Kafka record: its partition.
	AttrPartition = semconv.MessagingDestinationPartitionIDKey
	// AttrKafkaOffset is the semantic convention's messaging.kafka.offset, on the event of
	// a failed Kafka record: its offset.
	AttrKafkaOffset = semconv.MessagingKafkaOffsetKey
	// AttrSequenceNumber is a failed stream record's sequence number (Kinesis, DynamoDB
	// Streams), on its event: the position Lambda retries from.
	AttrSequenceNumber = attribute.Key("idem.batch.sequence_number")
	// AttrFIFO reports whether the batch was processed in order per group: an SQS FIFO
	// queue's, or a stream's ([idem.BatchEvent.FIFO]).
	AttrFIFO = attribute.Key("idem.batch.ordered")
	// AttrRan counts the batch's items whose handler ran and succeeded.
	AttrRan = attribute.Key("idem.batch.ran")
	// AttrReplayed counts the batch's items acknowledged as completed earlier.
	AttrReplayed = attribute.Key("idem.batch.replayed")
	// AttrDuplicates counts the batch's items acknowledged as duplicates within it.
	AttrDuplicates = attribute.Key("idem.batch.duplicates")
	// AttrFailed counts the batch's items reported for redelivery.
	AttrFailed = attribute.Key("idem.batch.failed")
	// AttrReason is a failed item's reason ([idem.BatchItem.Reason], a batch.Reason), on
	// its event.
	AttrReason = attribute.Key("idem.batch.reason")
)

// EventItemFailed is the span event of a batch span for each failed message or record.
const EventItemFailed = "idem.batch.item_failed"

// batch records a batch (the OnBatch hook of [Tracer.Hooks]) as a span named "process
// <destination>" that ends now and began the batch's duration earlier, with its outcome
// counts and an [EventItemFailed] event per failed item (its ID, with a Kafka record's
// partition and offset or a stream record's sequence number, and its reason; never its
// key or body). A batch with failures keeps the status Unset: the failed items are
// delivered again, which is the batch working as designed.
//
// The span follows the OpenTelemetry messaging semantic conventions (semconv v1.39.0) for
// a process span: kind Consumer, named "{messaging.operation.name} {destination}", with
// messaging.system, messaging.operation.type and .name ("process"),
// messaging.destination.name and messaging.batch.message_count.
func (t *Tracer) batch(ctx context.Context, e idem.BatchEvent) {
	end := t.clock.Now()
	system := e.System
	if system == "" {
		system = semconv.MessagingSystemAWSSQS.Value.AsString()
	}
	name := OperationProcess
	if e.Destination != "" {
		name += " " + e.Destination
	}
	_, s := t.tracer.Start(ctx, name, trace.WithTimestamp(end.Add(-e.Duration)),
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			AttrMessagingSystem.String(system),
			AttrMessagingOperationType.String("process"),
			AttrMessagingOperationName.String(OperationProcess),
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
			s.AddEvent(EventItemFailed, trace.WithTimestamp(end), trace.WithAttributes(itemAttrs(system, it)...))
		}
	}
	s.End(trace.WithTimestamp(end))
}

// itemAttrs returns the attributes of a failed item's event: its ID and reason, and what
// the ID holds of the source's identifiers.
func itemAttrs(system string, it idem.BatchItem) []attribute.KeyValue {
	attrs := []attribute.KeyValue{AttrMessageID.String(it.ID), AttrReason.String(it.Reason)}
	switch system {
	case "aws_kinesis", "aws_dynamodb_streams":
		attrs = append(attrs, AttrSequenceNumber.String(it.ID))
	case semconv.MessagingSystemKafka.Value.AsString():
		if partition, offset, ok := kafkaPosition(it.ID); ok {
			attrs = append(attrs, AttrPartition.String(partition), AttrKafkaOffset.Int64(offset))
		}
	}
	return attrs
}

// kafkaPosition returns the partition and offset of a Kafka record's ID,
// "<topic>-<partition>@<offset>" (a topic may hold '-', a partition and offset do not);
// ok false for an ID of another form.
func kafkaPosition(id string) (partition string, offset int64, ok bool) {
	at := strings.LastIndexByte(id, '@')
	if at < 0 {
		return "", 0, false
	}
	dash := strings.LastIndexByte(id[:at], '-')
	if dash < 0 {
		return "", 0, false
	}
	partition = id[dash+1 : at]
	if _, err := strconv.ParseUint(partition, 10, 31); err != nil {
		return "", 0, false
	}
	offset, err := strconv.ParseInt(id[at+1:], 10, 64)
	if err != nil || offset < 0 {
		return "", 0, false
	}
	return partition, offset, true
}
