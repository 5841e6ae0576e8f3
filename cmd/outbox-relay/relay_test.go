package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/emf"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/samtables"
	"github.com/idemkit/idem/internal/sqsfake"
	"github.com/idemkit/idem/outbox"
)

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

// TestRelay runs the function's relay, as main wires it, on DynamoDB Local's idempotency
// table (from the template) and a fake SQS FIFO queue: a run's two events go out in their
// recorded order, group = ordering key, the TTL deletion is skipped, the batch's lag is a
// metric; the same batch delivered again sends nothing twice.
func TestRelay(t *testing.T) {
	client := ddblocal.Client(t)
	table := samtables.NewTables(t, client, "IdempotencyTable")["IdempotencyTable"]
	queue := sqsfake.New(t, "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo", "arn:aws:sqs:eu-west-1:123456789012:orders.fifo", nil)
	var metricsOut bytes.Buffer
	metrics, err := emf.New(&metricsOut, "test")
	require.NoError(t, err)
	relay, err := newRelay(client, table, queue, slog.New(slog.NewTextHandler(io.Discard, nil)), metrics)
	require.NoError(t, err)

	data, err := os.ReadFile("testdata/dynamodb-outbox-two-keys.json")
	require.NoError(t, err)
	var event events.DynamoDBEvent
	require.NoError(t, json.Unmarshal(data, &event))
	for range 2 {
		resp, err := relay.Handle(context.Background(), event)
		require.NoError(t, err)
		assert.Empty(t, resp.BatchItemFailures)
	}
	delivered := queue.Delivered()
	require.Len(t, delivered, 2, "published once each")
	for i, typ := range []string{"OrderPlaced", "OrderCharged"} {
		m := delivered[i]
		assert.Equal(t, typ, aws.ToString(m.MessageAttributes["Event-Type"].StringValue))
		assert.Equal(t, "019ac3a0-0000-7000-8000-00000000000"+string(rune('1'+i)), aws.ToString(m.MessageAttributes[outbox.IDAttribute].StringValue))
		assert.Equal(t, "customer-42", m.Attributes["MessageGroupId"])
		assert.JSONEq(t, `{"order":"ord-1"}`, m.Body)
	}
	assert.Equal(t, "t-1", aws.ToString(delivered[0].MessageAttributes["tenant"].StringValue))
	require.NoError(t, metrics.Flush())
	assert.Contains(t, metricsOut.String(), `"`+LagMetric+`"`)
}

// TestRecordExpiryOutlivesTheStream: the relay remembers a published event longer than the
// stream keeps its record, so a record delivered again finds its key and is not sent again.
func TestRecordExpiryOutlivesTheStream(t *testing.T) {
	t.Parallel()
	assert.Greater(t, recordExpiry, 24*time.Hour)
}
