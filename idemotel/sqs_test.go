package idemotel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
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

// With batch claims (the default), each message's handler runs on its idem.run span's
// context too: the spans it starts are children of idem.run, which ends once the batch's
// outcomes are recorded.
func TestSQSHandlerSpansNestUnderRun(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	store := memstore.New() // a batch store: the batch claims its keys at once
	_, isBatch := any(store).(idemstore.BatchStore)
	require.True(t, isBatch)
	g, err := idem.New(store, "test", idem.WithScope("orders"), idem.WithClock(r.clock), idem.WithHooks(r.tracer.Hooks()))
	require.NoError(t, err)
	h, err := sqs.New(g, func(ctx context.Context, m events.SQSMessage) error {
		_, s := r.tp.Tracer("aws-sdk").Start(ctx, "DynamoDB.UpdateItem "+m.MessageId)
		s.End()
		return nil
	}, sqs.WithBatchClaims(true))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a deadline, as in Lambda
	defer cancel()
	parent := r.invocation(func(ictx context.Context) {
		ictx, stop := context.WithDeadline(ictx, func() time.Time { d, _ := ctx.Deadline(); return d }())
		defer stop()
		_, err := h.Handle(ictx, events.SQSEvent{Records: []events.SQSMessage{
			sqsMessage("msg-1", rawKey+"-1", "ok"),
			sqsMessage("msg-2", rawKey+"-2", "ok"),
		}})
		require.NoError(t, err)
	})
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range r.exp.GetSpans().Snapshots() {
		byID[s.SpanContext().SpanID()] = s
	}
	runs, calls := 0, 0
	for _, s := range byID {
		switch {
		case s.Name() == idemotel.SpanRun:
			runs++
			assert.Equal(t, parent.SpanID(), s.Parent().SpanID(), "idem.run is a child of the invocation")
			assert.Equal(t, "ran", attrOf(s, "idem.outcome"))
		case strings.HasPrefix(s.Name(), "DynamoDB."):
			calls++
			p, ok := byID[s.Parent().SpanID()]
			require.True(t, ok, "%s has a recorded parent", s.Name())
			assert.Equal(t, idemotel.SpanRun, p.Name(), "%s is a child of idem.run", s.Name())
		}
	}
	assert.Equal(t, 2, runs, "one run span per message")
	assert.Equal(t, 2, calls)
}

func attrOf(s sdktrace.ReadOnlySpan, key string) any {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.AsInterface()
		}
	}
	return nil
}
