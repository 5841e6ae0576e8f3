package dynamotest_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/dynamo/dynamomem"
	"github.com/idemkit/idem/dynamo/dynamotest"
)

// TestMemStoreForwards: the names kept here reach package dynamomem, and a handler's
// attached write commits with its completion on the store NewMemStore returns.
func TestMemStoreForwards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var store *dynamomem.Store = dynamotest.NewMemStore()
	_, err := store.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("orders"),
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
	})
	require.NoError(t, err)
	g, err := idem.New(store, "orders")
	require.NoError(t, err)
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "o-1"}}
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (int, error) {
		return 1, dynamo.Attach(ctx, types.TransactWriteItem{Put: &types.Put{TableName: aws.String("orders"), Item: key}})
	})
	require.NoError(t, err)
	out, err := store.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("orders"), Key: key})
	require.NoError(t, err)
	assert.Equal(t, key, out.Item, "the attached Put committed with the completion")
}
