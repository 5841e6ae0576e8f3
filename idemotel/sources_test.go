package idemotel_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamostream"
	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/kinesis"
	"github.com/idemkit/idem/sqs"
)

// fixture reads one of a source package's testdata events.
func fixture(t *testing.T, pkg, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", pkg, "testdata", name))
	require.NoError(t, err)
	return raw
}

// batchSpans returns the spans of kind Consumer: the batches.
func batchSpans(r *rig) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.exp.GetSpans().Snapshots() {
		if s.SpanKind() == trace.SpanKindConsumer {
			out = append(out, s)
		}
	}
	return out
}

// Each source's batch, from its testdata fixture through Lambda's handler machinery, is a
// process span named for its destination with the source's messaging.system, and a failed
// record's event names it by the source's own identifier (the message ID, the sequence
// number), never by its key or data.
func TestBatchSpanPerSource(t *testing.T) {
	t.Parallel()
	errFails := errors.New("fails")
	tests := []struct {
		name, system, dest, span string
		ordered                  bool
		items, ran, failed       int64
		failedIDs                []string // of the failed items, with their reasons
		seqAttr                  bool     // the failed event carries idem.batch.sequence_number
		secrets                  []string
		handler                  func(t *testing.T, g *idem.Guard) lambda.Handler
		payload                  []byte
	}{
		{
			name: "sqs", system: "aws_sqs", dest: "ledger-credits", span: "process ledger-credits",
			items: 10, ran: 9, failed: 1,
			handler: func(t *testing.T, g *idem.Guard) lambda.Handler {
				var ev events.SQSEvent
				require.NoError(t, json.Unmarshal(fixture(t, "sqs", "sqs-standard-ten.json"), &ev))
				third := ev.Records[2].MessageId
				h, err := sqs.New(g, func(_ context.Context, m events.SQSMessage) error {
					if m.MessageId == third {
						return errFails
					}
					return nil
				})
				require.NoError(t, err)
				return lambda.NewHandler(h.Handle)
			},
			payload: fixture(t, "sqs", "sqs-standard-ten.json"),
		},
		{
			name: "kinesis", system: "aws_kinesis", dest: "ledger", span: "process ledger",
			ordered: true, items: 6, ran: 4, failed: 2,
			failedIDs: []string{
				"49590305843567998888888888888888888888888888888888000003/handler",
				"49590305843567998888888888888888888888888888888888000004/group_stopped",
			},
			seqAttr: true,
			secrets: []string{"acct-", "eyJ"},
			handler: func(t *testing.T, g *idem.Guard) lambda.Handler {
				h, err := kinesis.New(g, func(_ context.Context, rec events.KinesisEventRecord) error {
					if strings.HasSuffix(rec.Kinesis.SequenceNumber, "000003") {
						return errFails
					}
					return nil
				})
				require.NoError(t, err)
				return lambda.NewHandler(h.Handle)
			},
			payload: fixture(t, "kinesis", "kinesis-three-partition-keys.json"),
		},
		{
			name: "dynamostream", system: "aws_dynamodb_streams", dest: "orders", span: "process orders",
			ordered: true, items: 6, ran: 4, failed: 2,
			seqAttr: true,
			secrets: []string{"o-1", "c81e728d"},
			handler: func(t *testing.T, g *idem.Guard) lambda.Handler {
				var ev events.DynamoDBEvent
				require.NoError(t, json.Unmarshal(fixture(t, "dynamostream", "dynamodb-orders-three-items.json"), &ev))
				third := ev.Records[2].Change.SequenceNumber
				h, err := dynamostream.New(g, func(_ context.Context, rec events.DynamoDBEventRecord) error {
					if rec.Change.SequenceNumber == third {
						return errFails
					}
					return nil
				})
				require.NoError(t, err)
				return lambda.NewHandler(h.Handle)
			},
			payload: fixture(t, "dynamostream", "dynamodb-orders-three-items.json"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			h := tc.handler(t, r.guard)
			r.invocation(func(ctx context.Context) {
				ctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				_, err := h.Invoke(ctx, tc.payload)
				require.NoError(t, err)
			})
			spans := batchSpans(r)
			require.Len(t, spans, 1)
			s := spans[0]
			assert.Equal(t, tc.span, s.Name())
			attrs := map[string]any{}
			for _, kv := range s.Attributes() {
				attrs[string(kv.Key)] = kv.Value.AsInterface()
			}
			assert.Equal(t, map[string]any{
				"messaging.system":              tc.system,
				"messaging.operation.type":      "process",
				"messaging.operation.name":      "process",
				"messaging.destination.name":    tc.dest,
				"messaging.batch.message_count": tc.items,
				"idem.batch.ordered":            tc.ordered,
				"idem.batch.ran":                tc.ran,
				"idem.batch.replayed":           int64(0),
				"idem.batch.duplicates":         int64(0),
				"idem.batch.failed":             tc.failed,
			}, attrs)
			var failed []string
			for _, e := range s.Events() {
				assert.Equal(t, idemotel.EventItemFailed, e.Name)
				got := map[string]string{}
				for _, kv := range e.Attributes {
					got[string(kv.Key)] = kv.Value.AsString()
					for _, secret := range tc.secrets {
						assert.NotContains(t, kv.Value.Emit(), secret)
					}
				}
				if tc.seqAttr {
					assert.Equal(t, got["messaging.message.id"], got["idem.batch.sequence_number"], "a stream record's ID is its sequence number")
				} else {
					assert.NotContains(t, got, "idem.batch.sequence_number")
				}
				failed = append(failed, got["messaging.message.id"]+"/"+got["idem.batch.reason"])
			}
			assert.Len(t, failed, int(tc.failed))
			if tc.failedIDs != nil {
				assert.Equal(t, tc.failedIDs, failed)
			}
		})
	}
}

// A Kafka record's failure event carries its partition and offset, parsed from the ID the
// kafka adapter gives it ("<topic>-<partition>@<offset>"); an ID of another form, only
// itself.
func TestBatchSpanKafkaPartitionAndOffset(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.tracer.Hooks().OnBatch(context.Background(), idem.BatchEvent{
		System: "kafka", Destination: "orders-events", FIFO: true,
		Items: []idem.BatchItem{
			{ID: "orders-events-3@42", Status: "failed", Reason: "handler", Err: errors.New("x")},
			{ID: "not-a-kafka-id", Status: "failed", Reason: "group_stopped", Err: errors.New("x")},
		},
		Failed: 2,
	})
	spans := batchSpans(r)
	require.Len(t, spans, 1)
	assert.Equal(t, "process orders-events", spans[0].Name())
	require.Len(t, spans[0].Events(), 2)
	var got []map[string]any
	for _, e := range spans[0].Events() {
		m := map[string]any{}
		for _, kv := range e.Attributes {
			m[string(kv.Key)] = kv.Value.AsInterface()
		}
		got = append(got, m)
	}
	assert.Equal(t, []map[string]any{
		{"messaging.message.id": "orders-events-3@42", "idem.batch.reason": "handler",
			"messaging.destination.partition.id": "3", "messaging.kafka.offset": int64(42)},
		{"messaging.message.id": "not-a-kafka-id", "idem.batch.reason": "group_stopped"},
	}, got)
}

// A batch whose event names no destination is a span named for the operation alone.
func TestBatchSpanWithoutDestination(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.tracer.Hooks().OnBatch(context.Background(), idem.BatchEvent{System: "rabbitmq"})
	spans := batchSpans(r)
	require.Len(t, spans, 1)
	assert.Equal(t, "process", spans[0].Name())
	assert.Equal(t, "rabbitmq", attrOf(spans[0], "messaging.system"))
}
