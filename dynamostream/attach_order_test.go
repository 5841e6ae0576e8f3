package dynamostream_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/dynamo/dynamomem"
	"github.com/idemkit/idem/dynamostream"
	"github.com/idemkit/idem/internal/adaptertest"
)

// TestAttachedConditionFailureStopsItem: the records of one item run one at a time in
// sequence order, and after a failure the rest of that item's records are not started. A
// change whose attached write fails its condition is such a failure (ReasonHandler,
// idem.ErrConditionFailed): it is known before the item's next change starts, since a
// change followed by another of its item is recorded before that one starts. The next
// change is held back (group_stopped), and its write does not commit. Before, with batch
// claims, the failure was found only at the batch's end, after the next change had run and
// committed.
func TestAttachedConditionFailureStopsItem(t *testing.T) {
	ctx := context.Background()
	store := dynamomem.New()
	_, err := store.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("shipments"),
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
	})
	require.NoError(t, err)
	_, err = store.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("shipments"),
		Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "base"}}})
	require.NoError(t, err)
	g, err := idem.New(store, "attach-order")
	require.NoError(t, err)

	var mu sync.Mutex
	var ran []string
	// Each change writes its own row, on condition that the row its image names ("prev") is
	// in place: change 1's condition fails (no row "start"), change 2's holds ("base").
	apply := func(ctx context.Context, r events.DynamoDBEventRecord) error {
		mu.Lock()
		ran = append(ran, r.EventID)
		mu.Unlock()
		prev := r.Change.NewImage["prev"].String()
		return dynamo.Attach(ctx,
			types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
				TableName:           aws.String("shipments"),
				Key:                 map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: prev}},
				ConditionExpression: aws.String("attribute_exists(pk)"),
			}},
			types.TransactWriteItem{Put: &types.Put{
				TableName: aws.String("shipments"),
				Item:      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: r.EventID}},
			}})
	}
	h, err := dynamostream.New(g, apply)
	require.NoError(t, err)

	change := func(id, seq, prev string) events.DynamoDBEventRecord {
		return events.DynamoDBEventRecord{
			EventID: id, EventName: "MODIFY",
			EventSourceArn: "arn:aws:dynamodb:eu-west-1:123456789012:table/orders/stream/2026-01-01T00:00:00.000",
			Change: events.DynamoDBStreamRecord{
				SequenceNumber: seq,
				Keys:           map[string]events.DynamoDBAttributeValue{"order_id": events.NewStringAttribute("o-1")},
				NewImage:       map[string]events.DynamoDBAttributeValue{"order_id": events.NewStringAttribute("o-1"), "prev": events.NewStringAttribute(prev)},
			},
		}
	}
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{change("c-1", "100", "start"), change("c-2", "200", "base")}}
	rep, err := h.Process(adaptertest.Context(t), ev)
	require.NoError(t, err)
	require.Len(t, rep.Outcomes, 2)
	require.True(t, rep.Outcomes[0].Failed(), "change 1's attached write failed its condition")
	assert.True(t, errors.Is(rep.Outcomes[0].Err, idem.ErrConditionFailed), "%v", rep.Outcomes[0].Err)

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"c-1"}, ran, "change 2 must not start after change 1 of its item failed")
	assert.Equal(t, dynamostream.ReasonGroupStopped, rep.Outcomes[1].Reason, "change 2 held back")
	out, err := store.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("shipments"),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "c-2"}}})
	require.NoError(t, err)
	assert.Nil(t, out.Item, "change 2's write must not commit before change 1's")
}
