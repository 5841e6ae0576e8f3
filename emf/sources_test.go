package emf_test

import (
	"bytes"
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

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamostream"
	"github.com/idemkit/idem/emf"
	"github.com/idemkit/idem/kinesis"
	"github.com/idemkit/idem/memstore"
)

// fixture reads one of a source package's testdata events.
func fixture(t *testing.T, pkg, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", pkg, "testdata", name))
	require.NoError(t, err)
	return raw
}

// invokeFixture sends a fixture through Lambda's handler machinery with emf.Wrap, twice
// (the second delivery replays what succeeded), and returns the recorder's output.
func invokeFixture[E, R any](t *testing.T, r *emf.Recorder, out *bytes.Buffer, handle func(context.Context, E) (R, error), payload []byte) []map[string]any {
	t.Helper()
	invoke := lambda.NewHandler(emf.Wrap(r, handle))
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := invoke.Invoke(ctx, payload)
		cancel()
		require.NoError(t, err)
	}
	return documents(t, out.Bytes())
}

// Each stream source's batches are counted under metric names of their own (the SQS
// names, which TestWrapFlushesEachSQSInvocation checks, unchanged), driven by the source's testdata fixtures, with no record ID, key or data in
// the output.
func TestHooksNameBatchMetricsBySource(t *testing.T) {
	t.Parallel()
	errFails := errors.New("fails")
	tests := []struct {
		name    string
		run     func(t *testing.T, r *emf.Recorder, out *bytes.Buffer) []map[string]any
		prefix  string
		items   string
		secrets []string
	}{
		{
			name: "kinesis", prefix: "Kinesis", items: "Records",
			secrets: []string{"49590305843567998888", "acct-", "eyJ"},
			run: func(t *testing.T, r *emf.Recorder, out *bytes.Buffer) []map[string]any {
				g, err := idem.New(memstore.New(), "sources", idem.WithHooks(r.Hooks()))
				require.NoError(t, err)
				h, err := kinesis.New(g, func(_ context.Context, rec events.KinesisEventRecord) error {
					if strings.HasSuffix(rec.Kinesis.SequenceNumber, "000003") {
						return errFails
					}
					return nil
				})
				require.NoError(t, err)
				return invokeFixture(t, r, out, h.Handle, fixture(t, "kinesis", "kinesis-three-partition-keys.json"))
			},
		},
		{
			name: "dynamostream", prefix: "DynamoDBStreams", items: "Records",
			secrets: []string{"44215845000000000174504390", "o-1", "c81e728d"},
			run: func(t *testing.T, r *emf.Recorder, out *bytes.Buffer) []map[string]any {
				g, err := idem.New(memstore.New(), "sources", idem.WithHooks(r.Hooks()))
				require.NoError(t, err)
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
				return invokeFixture(t, r, out, h.Handle, fixture(t, "dynamostream", "dynamodb-orders-three-items.json"))
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			r := newRecorder(t, &out, emf.WithDimension("Service", "orders"))
			docs := tc.run(t, r, &out)
			require.Len(t, docs, 2, "one document per invocation")
			for i, doc := range docs {
				assert.InDelta(t, 1, doc[tc.prefix+"Batches"], 0, "invocation %d", i+1)
				assert.InDelta(t, 6, doc[tc.prefix+tc.items], 0, "invocation %d", i+1)
				assert.InDelta(t, 2, doc[tc.prefix+"Failed"], 0, "invocation %d", i+1)
				assert.InDelta(t, 1, doc[tc.prefix+"FailedHandler"], 0, "invocation %d", i+1)
				assert.InDelta(t, 1, doc[tc.prefix+"FailedGroupStopped"], 0, "the next record of its key, not started")
				assert.Contains(t, doc, tc.prefix+"BatchDuration")
				for name := range doc {
					assert.False(t, strings.HasPrefix(name, "SQS"), "invocation %d: %s", i+1, name)
				}
			}
			assert.InDelta(t, 4, docs[0][tc.prefix+"Ran"], 0, "first delivery")
			assert.InDelta(t, 4, docs[1][tc.prefix+"Replayed"], 0, "redelivery")
			for _, secret := range tc.secrets {
				assert.NotContains(t, out.String(), secret)
			}
		})
	}
}

func TestBatchMetric(t *testing.T) {
	t.Parallel()
	tests := []struct {
		system, metric, want string
	}{
		{"", emf.BatchMetricBatches, "SQSBatches"},
		{"aws_sqs", emf.BatchMetricItems, "SQSMessages"},
		{"aws_kinesis", emf.BatchMetricItems, "KinesisRecords"},
		{"aws_dynamodb_streams", emf.BatchMetricRan, "DynamoDBStreamsRan"},
		{"kafka", emf.BatchMetricItems, "KafkaRecords"},
		{"rabbitmq", emf.BatchMetricItems, "RabbitMQMessages"},
		{"activemq", emf.BatchMetricDuration, "ActiveMQBatchDuration"},
		{"some_other", emf.BatchMetricBatches, "Batches"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, emf.BatchMetric(tc.system, tc.metric), "%s %s", tc.system, tc.metric)
	}
	assert.Equal(t, "KinesisFailedGroupStopped", emf.FailedMetric("aws_kinesis", "group_stopped"))
	assert.Equal(t, emf.SQSFailedMetric("in_progress"), emf.FailedMetric("aws_sqs", "in_progress"))
}

// A dimension may not take the name of any source's batch metric.
func TestWithDimensionRefusesBatchMetricNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"SQSBatches", "KinesisRecords", "DynamoDBStreamsFailedHandler", "KafkaBatchDuration",
		"RabbitMQMessages", "ActiveMQReplayed", "Batches"} {
		_, err := emf.New(&bytes.Buffer{}, "idem-test", emf.WithDimension(name, "x"))
		assert.Error(t, err, name)
	}
	_, err := emf.New(&bytes.Buffer{}, "idem-test", emf.WithDimension("Stream", "x"))
	assert.NoError(t, err)
}
