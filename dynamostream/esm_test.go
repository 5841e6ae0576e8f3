package dynamostream_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/dynamo/dynamotest"
	"github.com/idemkit/idem/dynamostream"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/esm"
	"github.com/idemkit/idem/internal/samtables"
)

// TestEndToEndOnDynamoDBLocal drains a real stream (DynamoDB Local) through the handler the
// way Lambda's event source mapping does (internal/esm: batches per shard, checkpoint at the
// lowest reported failure, bisection), under a failing record, a crash mid-batch and a lost
// response. Each change's effect is a DynamoDB ADD attached to its completion: in the end
// every change was applied exactly once (none skipped, none twice), and the checkpoint never
// passed an unsettled record.
func TestEndToEndOnDynamoDBLocal(t *testing.T) {
	t.Parallel()
	endpoint := ddblocal.Endpoint(t)
	client := ddblocal.NewClient(endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	orders := dynamotest.CreateTable(t, client, &dynamodb.CreateTableInput{
		TableName:            aws.String("e2e-orders"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("order_id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("order_id"), KeyType: types.KeyTypeHash}},
		StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
	})
	effects := dynamotest.CreateTable(t, client, &dynamodb.CreateTableInput{
		TableName:            aws.String("e2e-effects"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	idemTable := samtables.NewTables(t, client, "IdempotencyTable")["IdempotencyTable"]
	arn, err := esm.TableStreamARN(ctx, client, orders)
	require.NoError(t, err)
	src := esm.NewDynamoDBStream(esm.NewStreamsClient(endpoint), arn)

	// Twelve orders, then a second change to every other one: 18 changes, two per order
	// for half of them.
	put := func(order string, status string) {
		_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(orders), Item: map[string]types.AttributeValue{
			"order_id": &types.AttributeValueMemberS{Value: order}, "status": &types.AttributeValueMemberS{Value: status},
		}})
		require.NoError(t, err)
	}
	for i := range 12 {
		put(fmt.Sprintf("o-%02d", i), "NEW")
	}
	for i := 0; i < 12; i += 2 {
		put(fmt.Sprintf("o-%02d", i), "PAID")
	}

	store, err := dynamo.New(client, idemTable)
	require.NoError(t, err)
	guard, err := idem.New(store, "e2e")
	require.NoError(t, err)
	var (
		mu      sync.Mutex
		tries   = map[string]int{} // eventID → handler runs
		applied []string           // change, in the order the handler applied it
	)
	apply := func(ctx context.Context, r events.DynamoDBEventRecord) error {
		order, status := r.Change.Keys["order_id"].String(), r.Change.NewImage["status"].String()
		mu.Lock()
		tries[r.EventID]++
		n := tries[r.EventID]
		mu.Unlock()
		switch {
		case order == "o-03" && n == 1:
			return errors.New("downstream unavailable") // fails once
		case order == "o-07" && n == 1:
			esm.Crash(ctx) // the invocation dies here
			return ctx.Err()
		}
		mu.Lock()
		applied = append(applied, order+":"+status)
		mu.Unlock()
		return dynamo.Attach(ctx, types.TransactWriteItem{Update: &types.Update{
			TableName:                 aws.String(effects),
			Key:                       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: r.EventID}},
			UpdateExpression:          aws.String("ADD applied :one"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
		}})
	}
	h, err := dynamostream.New(guard, apply)
	require.NoError(t, err)
	var lost atomic.Bool // the fault hook runs on each shard's goroutine
	p, err := esm.New(src, h.Handle,
		esm.WithReportBatchItemFailures(), esm.WithBisectBatchOnFunctionError(), esm.WithBatchSize(7),
		esm.WithTimeout(10*time.Second), esm.WithRetryDelay(50*time.Millisecond),
		esm.WithFault(func(b esm.Batch) esm.Fault {
			if b.Retry == 0 && len(b.Records) == 7 && lost.CompareAndSwap(false, true) {
				return esm.FaultLoseResponse // the second batch's work done, its answer lost
			}
			return esm.FaultNone
		}))
	require.NoError(t, err)
	rep, err := p.Drain(ctx)
	require.NoError(t, err)
	require.NoError(t, rep.Check())
	require.True(t, lost.Load())

	delivered := rep.Delivered()
	assert.Len(t, delivered, 18, "every change was delivered")
	for seq, n := range delivered {
		assert.GreaterOrEqual(t, n, 1, seq)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, tries, 18)
	for id := range tries {
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(effects), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}}})
		require.NoError(t, err)
		require.NotNil(t, out.Item, "change %s applied", id)
		n, err := strconv.Atoi(out.Item["applied"].(*types.AttributeValueMemberN).Value)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "change %s applied once", id)
	}
	pos := map[string]int{}
	for i, c := range applied {
		if _, ok := pos[c]; !ok {
			pos[c] = i
		}
	}
	for i := 0; i < 12; i += 2 {
		o := fmt.Sprintf("o-%02d", i)
		assert.Less(t, pos[o+":NEW"], pos[o+":PAID"], "%s's changes in order", o)
	}
	t.Logf("%d invocations, %d changes, deliveries %v", len(rep.Invocations), len(tries), delivered)
}
