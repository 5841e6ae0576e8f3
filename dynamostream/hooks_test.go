package dynamostream_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/dynamostream"
	"github.com/idemkit/idem/internal/adaptertest"
)

// TestOnBatchAndLogsNameSequenceNumbers: the guard's OnBatch hook and the log lines name
// the records by their sequence numbers, never by their keys or images.
func TestOnBatchAndLogsNameSequenceNumbers(t *testing.T) {
	t.Parallel()
	const secret = "o-secret-4111"
	obs := adaptertest.Observe(t, "hooks")
	g := obs.Guard
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
	_, err = h.Handle(adaptertest.Context(t), ev)
	require.NoError(t, err)

	got := obs.Events()
	require.Len(t, got, 1)
	assert.Equal(t, "aws_dynamodb_streams", got[0].System)
	assert.Equal(t, "orders", got[0].Destination, "the table's name")
	ids, statuses := adaptertest.Items(got[0])
	assert.Equal(t, []string{"600", "601", "602"}, ids)
	assert.Equal(t, []string{"ran/", "failed/handler", "failed/group_stopped"}, statuses)
	obs.NoSecret(t, secret)
	assert.Contains(t, obs.Lines(), `"msg":"dynamostream: record failed","sequence_number":"601","stored_key":"`)
}
