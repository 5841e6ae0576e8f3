package dynamostream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamostream"
	"github.com/idemkit/idem/memstore"
)

// TestOnBatchAndLogsNameSequenceNumbers: the guard's OnBatch hook and the log lines name
// the records by their sequence numbers, never by their keys or images.
func TestOnBatchAndLogsNameSequenceNumbers(t *testing.T) {
	t.Parallel()
	const secret = "o-secret-4111"
	var (
		mu    sync.Mutex
		got   []idem.BatchEvent
		lines strings.Builder
	)
	hooks := idem.Hooks{OnBatch: func(_ context.Context, e idem.BatchEvent) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e)
	}}
	logger := slog.New(slog.NewJSONHandler(&lines, nil))
	g, err := idem.New(memstore.New(), "hooks", idem.WithHooks(hooks), idem.WithLogger(logger))
	require.NoError(t, err)
	h, err := dynamostream.New(g, func(_ context.Context, r events.DynamoDBEventRecord) error {
		if r.Change.NewImage["status"].String() == "PAID" {
			return errors.New("failed")
		}
		return nil
	}, dynamostream.WithKeyJMESPath("[Keys.order_id, NewImage.status]"), dynamostream.WithConcurrency(1))
	require.NoError(t, err)
	var ev events.DynamoDBEvent
	for i, status := range []string{"NEW", "PAID", "SHIPPED"} {
		r := change(fmt.Sprint(600+i), secret, status)
		r.EventSourceArn = "arn:aws:dynamodb:eu-west-1:123456789012:table/orders/stream/2024-05-01T12:00:00.000"
		ev.Records = append(ev.Records, r)
	}
	_, err = h.Handle(lambdaContext(t), ev)
	require.NoError(t, err)

	require.Len(t, got, 1)
	assert.Equal(t, "aws_dynamodb_streams", got[0].System)
	assert.Equal(t, "orders", got[0].Destination, "the table's name")
	var ids, statuses []string
	for _, it := range got[0].Items {
		ids, statuses = append(ids, it.ID), append(statuses, it.Status+"/"+it.Reason)
	}
	assert.Equal(t, []string{"600", "601", "602"}, ids)
	assert.Equal(t, []string{"ran/", "failed/handler", "failed/group_stopped"}, statuses)
	dump, err := json.Marshal(got[0].Items)
	require.NoError(t, err)
	assert.NotContains(t, string(dump), secret)
	assert.NotContains(t, lines.String(), secret)
	assert.Contains(t, lines.String(), `"msg":"dynamostream: record failed","sequence_number":"601","stored_key":"`)
}
