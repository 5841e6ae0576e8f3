package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/dynamo/dynamomem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/outbox"
)

// outboxItems returns the items of one ordering key in an outbox table, decoded.
func outboxItems(t *testing.T, query func(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error), table, orderingKey string) []idemstore.OutboxMessage {
	t.Helper()
	out, err := query(context.Background(), &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		KeyConditionExpression:    aws.String("#k = :k"),
		ExpressionAttributeNames:  map[string]string{"#k": dynamo.OutboxOrderingKeyAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":k": &types.AttributeValueMemberS{Value: orderingKey}},
		ConsistentRead:            aws.Bool(true),
	})
	require.NoError(t, err)
	msgs := make([]idemstore.OutboxMessage, len(out.Items))
	// The relay's order within one completion: by position.
	slices.SortStableFunc(out.Items, func(a, b map[string]types.AttributeValue) int {
		return dynamo.OutboxPosition(a) - dynamo.OutboxPosition(b)
	})
	for i, it := range out.Items {
		msgs[i], err = dynamo.OutboxMessage(it)
		require.NoError(t, err)
	}
	return msgs
}

// TestOutboxEventsCommitInTheCompletionTransaction: on DynamoDB Local, outbox.Record puts
// an item in the outbox table (which has a stream of new images) in the completion's
// TransactWriteItems: none for a failed run, one per event for a completed one, and
// nothing more on a replay.
func TestOutboxEventsCommitInTheCompletionTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	table := fmt.Sprintf("outbox-%d", time.Now().UnixNano())
	_, err := e.client.CreateTable(ctx, dynamo.OutboxTableInput(table))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = e.client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	desc, err := e.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	require.NotNil(t, desc.Table.StreamSpecification)
	assert.Equal(t, types.StreamViewTypeNewImage, desc.Table.StreamSpecification.StreamViewType)
	require.NoError(t, dynamo.EnableOutboxTTL(ctx, e.client, table))
	ttl, err := e.client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	require.NoError(t, err)
	assert.Equal(t, dynamo.OutboxExpirationAttr, aws.ToString(ttl.TimeToLiveDescription.AttributeName))

	store, err := dynamo.New(e.client, e.table, dynamo.WithOutboxTable(table))
	require.NoError(t, err)
	g, err := idem.New(store, "pay")
	require.NoError(t, err)

	declined := errors.New("declined")
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "p-0"}, func(ctx context.Context) (string, error) {
		_, err := outbox.Record(ctx, outbox.Event{Destination: "q", OrderingKey: "acct-0", Type: "Failed"})
		require.NoError(t, err)
		return "", declined
	})
	require.ErrorIs(t, err, declined)
	assert.Empty(t, outboxItems(t, e.client.Query, table, "acct-0"), "a failed run commits no event")

	var ids []string
	pay := func(ctx context.Context) (string, error) {
		for _, typ := range []string{"Taken", "ReceiptDue"} {
			id, err := outbox.Record(ctx, outbox.Event{Destination: "q", OrderingKey: "acct-1", Type: typ,
				Payload: []byte("{}"), Headers: map[string]string{"tenant": "t1"}})
			if err != nil {
				return "", err
			}
			ids = append(ids, id)
		}
		return "ok", nil
	}
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "p-1"}, pay)
	require.NoError(t, err)
	_, replayed, err := idem.Do(ctx, g, idem.Request{Key: "p-1"}, pay)
	require.NoError(t, err)
	require.True(t, replayed)

	got := outboxItems(t, e.client.Query, table, "acct-1")
	require.Len(t, got, 2)
	sk, err := g.StoredKey(idem.Request{Key: "p-1"})
	require.NoError(t, err)
	for i, m := range got {
		assert.Equal(t, ids[i], m.ID, "by position: the order of the Record calls")
		assert.Equal(t, sk, m.StoredKey)
		assert.Equal(t, []byte("{}"), m.Payload)
		assert.Equal(t, map[string]string{"tenant": "t1"}, m.Headers)
	}

	// dynamomem stores the same items.
	mem := &dynamomem.Store{OutboxTable: table}
	_, err = mem.CreateTable(ctx, dynamo.OutboxTableInput(table))
	require.NoError(t, err)
	mg, err := idem.New(mem, "pay")
	require.NoError(t, err)
	ids = nil
	_, _, err = idem.Do(ctx, mg, idem.Request{Key: "p-1"}, pay)
	require.NoError(t, err)
	for _, id := range ids {
		it, err := mem.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{
			dynamo.OutboxOrderingKeyAttr: &types.AttributeValueMemberS{Value: "acct-1"},
			dynamo.OutboxIDAttr:          &types.AttributeValueMemberS{Value: id},
		}})
		require.NoError(t, err)
		m, err := dynamo.OutboxMessage(it.Item)
		require.NoError(t, err)
		assert.Equal(t, id, m.ID)
	}
}

// TestOutboxWithoutTableIsRefused: a store without an outbox table refuses an event at the
// call, and WithOutboxTable refuses an empty name.
func TestOutboxWithoutTableIsRefused(t *testing.T) {
	t.Parallel()
	store, err := dynamo.New(dynamodb.New(dynamodb.Options{Region: "us-east-1"}), "records")
	require.NoError(t, err)
	err = store.CheckAttached([]any{idemstore.OutboxMessage{ID: "x"}})
	require.Error(t, err)
	_, err = dynamo.New(dynamodb.New(dynamodb.Options{Region: "us-east-1"}), "records", dynamo.WithOutboxTable(""))
	require.ErrorIs(t, err, idem.ErrInvalidOption)
}

// TestOutboxWritesNameTheRun: the outbox items of one completion carry its run, the id of
// its first event, and their positions; so a relay tells two runs of one stored key (a
// request run again after its record expired) apart. Other writes are kept as they are.
func TestOutboxWritesNameTheRun(t *testing.T) {
	t.Parallel()
	other := types.TransactWriteItem{Put: &types.Put{TableName: aws.String("orders")}}
	msg := func(id string) idemstore.OutboxMessage {
		return idemstore.OutboxMessage{OutboxEvent: outbox.Event{Destination: "q", OrderingKey: "k", Type: "T"}, ID: id, StoredKey: "s"}
	}
	out, err := dynamo.OutboxWrites("outbox", []any{other, msg("e-1"), msg("e-2")})
	require.NoError(t, err)
	require.Len(t, out, 3)
	assert.Equal(t, other, out[0])
	for i, w := range out[1:] {
		item := w.(types.TransactWriteItem).Put.Item
		assert.Equal(t, "e-1", dynamo.OutboxRun(item))
		assert.Equal(t, i, dynamo.OutboxPosition(item))
	}
	again, err := dynamo.OutboxWrites("outbox", []any{msg("e-3")})
	require.NoError(t, err)
	assert.Equal(t, "e-3", dynamo.OutboxRun(again[0].(types.TransactWriteItem).Put.Item), "another run")
	assert.Empty(t, dynamo.OutboxRun(dynamo.OutboxItem("outbox", msg("e-4"), 0).Put.Item), "an item without a run")
}
