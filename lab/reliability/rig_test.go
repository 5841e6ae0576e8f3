package reliability_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/ddblocal"
)

// counterTable creates a table of side-effect counters ("id" S, "n" N) for attached
// writes; an idempotency table has the right key.
func counterTable(t *testing.T, client *dynamodb.Client) string {
	t.Helper()
	return ddblocal.NewTable(t, client)
}

// addOne is the non-idempotent business write: ADD 1 to the counter of key.
func addOne(table, key string) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String(table),
		Key:                       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: key}},
		UpdateExpression:          aws.String("ADD n :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
	}}
}

// counter reads the counter of key, 0 when absent.
func counter(t *testing.T, client *dynamodb.Client, table, key string) int {
	t.Helper()
	out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: key}},
		ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	n, ok := out.Item["n"].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	v, err := strconv.Atoi(n.Value)
	require.NoError(t, err)
	return v
}

// storedRecord reads the record of req's key through store.
func storedRecord(t *testing.T, g *idem.Guard, store idemstore.Store, key string) *idemstore.Record {
	t.Helper()
	id, err := g.StoredKey(idem.Request{Key: key})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rec, err := store.Get(ctx, id)
	require.NoError(t, err)
	return rec
}

// newStore returns a DynamoDB store over api on table.
func newStore(t *testing.T, api dynamo.API, table string) *dynamo.Store {
	t.Helper()
	s, err := dynamo.New(api, table)
	require.NoError(t, err)
	return s
}
