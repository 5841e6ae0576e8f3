package idemotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/sqs"
)

func sqsMessage(id, key, body string) events.SQSMessage {
	return events.SQSMessage{
		MessageId:      id,
		Body:           body,
		EventSource:    "aws:sqs",
		EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:credits",
		Attributes:     map[string]string{"ApproximateReceiveCount": "1"},
		MessageAttributes: map[string]events.SQSMessageAttribute{
			sqs.KeyAttribute: {StringValue: &key, DataType: "String"},
		},
	}
}

// A batch span counts the outcomes and names each failed message and its reason, and the
// batch claim and settle make a claim and a run span per message under the same parent.
func TestSQSBatchSpan(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	h, err := sqs.New(r.guard, func(_ context.Context, m events.SQSMessage) error {
		r.clock.advance(3 * time.Millisecond)
		if m.Body == "frozen" {
			return errors.New("account frozen")
		}
		return nil
	}, sqs.WithConcurrency(1)) // the batch span from the guard's hooks, timed on its clock
	require.NoError(t, err)

	parent := r.invocation(func(ctx context.Context) {
		_, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{
			sqsMessage("msg-1", rawKey+"-1", "ok"),
			sqsMessage("msg-2", rawKey+"-1", "ok"), // a duplicate in the batch
			sqsMessage("msg-3", rawKey+"-3", "frozen"),
		}})
		require.NoError(t, err)
	})

	spans := r.idemSpans(t, parent)
	require.Len(t, spans, 5, "%v", spans)
	batch := spans[len(spans)-1]
	assert.Equal(t, idemotel.SpanSQSBatch, batch.name)
	assert.Equal(t, map[string]any{
		"messaging.system":              "aws_sqs",
		"messaging.operation.type":      "process",
		"messaging.operation.name":      "process",
		"messaging.destination.name":    "credits",
		"messaging.batch.message_count": int64(3),
		"idem.sqs.fifo":                 false,
		"idem.sqs.ran":                  int64(1),
		"idem.sqs.replayed":             int64(0),
		"idem.sqs.duplicates":           int64(1),
		"idem.sqs.failed":               int64(1),
	}, batch.attrs)
	assert.Equal(t, 6*time.Millisecond, batch.duration, "two handler runs on the batch's clock")
	assert.Equal(t, []string{idemotel.EventMessageFailed}, batch.events)

	var events []sdktrace.Event
	for _, s := range r.exp.GetSpans() {
		if s.Name == idemotel.SpanSQSBatch {
			events = s.Events
			assert.Equal(t, trace.SpanKindConsumer, s.SpanKind, "a messaging process span")
		}
	}
	require.Len(t, events, 1)
	got := map[string]string{}
	for _, kv := range events[0].Attributes {
		got[string(kv.Key)] = kv.Value.AsString()
	}
	assert.Equal(t, map[string]string{"messaging.message.id": "msg-3", "idem.sqs.reason": "handler"}, got)

	outcomes := map[string]int{}
	for _, s := range spans[:len(spans)-1] {
		outcome, _ := s.attrs["idem.outcome"].(string)
		outcomes[s.name+" "+outcome]++
	}
	assert.Equal(t, map[string]int{"idem.claim claimed": 2, "idem.run ran": 1, "idem.run released": 1}, outcomes)
}
