package esm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/dynamo/dynamotest"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/esm"
)

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

// streamTable creates a table with a NEW_AND_OLD_IMAGES stream on DynamoDB Local and
// returns its client, its name and its stream as a source.
func streamTable(t *testing.T) (*dynamodb.Client, string, *esm.DynamoDBStream) {
	t.Helper()
	endpoint := ddblocal.Endpoint(t)
	client := ddblocal.NewClient(endpoint)
	table := dynamotest.CreateTable(t, client, &dynamodb.CreateTableInput{
		TableName:            aws.String("esm-orders"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
	})
	arn, err := esm.TableStreamARN(context.Background(), client, table)
	require.NoError(t, err)
	return client, table, esm.NewDynamoDBStream(esm.NewStreamsClient(endpoint), arn)
}

// putItems writes items id item-<from> to item-<to-1>, one after the other.
func putItems(t *testing.T, client *dynamodb.Client, table string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		_, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{
			TableName: aws.String(table),
			Item: map[string]types.AttributeValue{
				"id": &types.AttributeValueMemberS{Value: fmt.Sprintf("item-%02d", i)},
				"n":  &types.AttributeValueMemberN{Value: fmt.Sprint(i)},
			},
		})
		require.NoError(t, err)
	}
}

// effects counts what a plain handler (no idempotency) did per item id.
type effects struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *effects) apply(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[string]int{}
	}
	e.n[id]++
}

func (e *effects) count(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[id]
}

func itemID(r events.DynamoDBEventRecord) string { return r.Change.Keys["id"].String() }

func drainCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// keyShape returns the keys of a JSON object, and of the objects under "dynamodb".
func keyShape(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m))
	var keys []string
	for k, v := range m {
		keys = append(keys, k)
		if k == "dynamodb" {
			for _, sub := range keyShape(t, v) {
				keys = append(keys, "dynamodb."+sub)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// TestDynamoDBEventAsLambdaSendsIt: the event of an INSERT, a MODIFY and a REMOVE read
// from DynamoDB Local has the shape of Lambda's (testdata/dynamodb-modify.json, after
// AWS's documented example), and decodes into events.DynamoDBEvent.
func TestDynamoDBEventAsLambdaSendsIt(t *testing.T) {
	t.Parallel()
	client, table, src := streamTable(t)
	ctx := drainCtx(t)
	putItems(t, client, table, 0, 1)
	_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "item-00"}},
		UpdateExpression:          aws.String("SET n = :n"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: "7"}},
	})
	require.NoError(t, err)
	_, err = client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(table),
		Key:       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "item-00"}},
	})
	require.NoError(t, err)

	var payloads []json.RawMessage
	handler := lambdaHandlerFunc(func(_ context.Context, payload []byte) ([]byte, error) {
		payloads = append(payloads, append(json.RawMessage(nil), payload...))
		return nil, nil
	})
	p, err := esm.New(src, handler)
	require.NoError(t, err)
	r, err := p.Drain(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Check())
	require.Len(t, payloads, 1)

	var raw struct{ Records []json.RawMessage }
	require.NoError(t, json.Unmarshal(payloads[0], &raw))
	require.Len(t, raw.Records, 3)
	fixture, err := os.ReadFile("testdata/dynamodb-modify.json")
	require.NoError(t, err)
	var want struct{ Records []json.RawMessage }
	require.NoError(t, json.Unmarshal(fixture, &want))
	assert.Equal(t, keyShape(t, want.Records[0]), keyShape(t, raw.Records[1]), "MODIFY")

	var ev events.DynamoDBEvent
	require.NoError(t, json.Unmarshal(payloads[0], &ev))
	names := []string{ev.Records[0].EventName, ev.Records[1].EventName, ev.Records[2].EventName}
	assert.Equal(t, []string{"INSERT", "MODIFY", "REMOVE"}, names)
	for i, rec := range ev.Records {
		assert.Equal(t, "aws:dynamodb", rec.EventSource)
		assert.Equal(t, "1.1", rec.EventVersion)
		assert.NotEmpty(t, rec.EventID)
		assert.NotEmpty(t, rec.AWSRegion)
		assert.Equal(t, src.ARN(), rec.EventSourceArn)
		assert.Equal(t, "item-00", itemID(rec))
		assert.Equal(t, "NEW_AND_OLD_IMAGES", rec.Change.StreamViewType)
		assert.Positive(t, rec.Change.SizeBytes)
		assert.False(t, rec.Change.ApproximateCreationDateTime.IsZero())
		assert.Equal(t, r.Invocations[0].Records[i], rec.Change.SequenceNumber)
	}
	assert.Nil(t, ev.Records[0].Change.OldImage, "INSERT has no old image")
	assert.Equal(t, "7", ev.Records[1].Change.NewImage["n"].Number())
	assert.Equal(t, "0", ev.Records[1].Change.OldImage["n"].Number())
	assert.Nil(t, ev.Records[2].Change.NewImage, "REMOVE has no new image")
}

// lambdaHandlerFunc is a lambda.Handler made of a function.
type lambdaHandlerFunc func(ctx context.Context, payload []byte) ([]byte, error)

func (f lambdaHandlerFunc) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	return f(ctx, payload)
}

// TestDynamoDBFailOnceRetriesFromRecord: a handler that stops at its first failure and
// reports it sees the stream again from that record, and every item's effect happens once.
func TestDynamoDBFailOnceRetriesFromRecord(t *testing.T) {
	t.Parallel()
	client, table, src := streamTable(t)
	ctx := drainCtx(t)
	putItems(t, client, table, 0, 10)
	var eff effects
	failed := false
	handler := func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		var resp events.DynamoDBEventResponse
		for _, rec := range ev.Records {
			if itemID(rec) == "item-04" && !failed {
				failed = true
				resp.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: rec.Change.SequenceNumber}}
				return resp, nil
			}
			eff.apply(itemID(rec))
		}
		return resp, nil
	}
	p, err := esm.New(src, handler, esm.WithBatchSize(10), esm.WithReportBatchItemFailures())
	require.NoError(t, err)
	r, err := p.Drain(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Check())
	require.Len(t, r.Invocations, 2)
	first, second := r.Invocations[0], r.Invocations[1]
	assert.Equal(t, esm.PartialFailure, first.Outcome)
	assert.Equal(t, 4, first.Done)
	assert.Equal(t, first.Records[3], first.Checkpoint, "the checkpoint stops before the failed record")
	assert.Equal(t, first.Records[4:], second.Records, "the retry starts at the failed record")
	assert.Equal(t, esm.Success, second.Outcome)

	// More writes: the next drain goes on from the checkpoint.
	putItems(t, client, table, 10, 13)
	r, err = p.Drain(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Check())
	require.Len(t, r.Invocations, 3)
	assert.Len(t, r.Invocations[2].Records, 3)
	assert.Len(t, r.Settled()[r.Invocations[0].Shard], 13, "every record written was settled")
	for i := range 13 {
		assert.Equal(t, 1, eff.count(fmt.Sprintf("item-%02d", i)), "item-%02d", i)
	}
}

// TestDynamoDBBisectThenDestination: a poisoned record fails its batches with a function
// error; bisection halves them down to the record alone, whose retries run out, and it
// goes to the on-failure destination while every other item's effect happens once.
func TestDynamoDBBisectThenDestination(t *testing.T) {
	t.Parallel()
	client, table, src := streamTable(t)
	ctx := drainCtx(t)
	putItems(t, client, table, 0, 8)
	var eff effects
	handler := func(_ context.Context, ev events.DynamoDBEvent) error {
		for _, rec := range ev.Records {
			if itemID(rec) == "item-05" {
				return errors.New("poisoned")
			}
		}
		for _, rec := range ev.Records {
			eff.apply(itemID(rec))
		}
		return nil
	}
	p, err := esm.New(src, handler, esm.WithBatchSize(8), esm.WithBisectBatchOnFunctionError(), esm.WithMaximumRetryAttempts(1))
	require.NoError(t, err)
	r, err := p.Drain(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Check())
	assert.Equal(t, []int{8, 4, 4, 2, 1, 1, 1, 2}, sizes(r))
	require.Len(t, r.Discarded, 1)
	d := r.Discarded[0]
	seqs := r.Invocations[0].Records
	assert.Equal(t, []string{seqs[5]}, d.Records)
	assert.Equal(t, seqs[5], d.StartSequenceNumber)
	assert.Equal(t, 2, d.ApproximateInvokeCount)
	assert.Equal(t, seqs[7], r.Checkpoints[d.Shard])
	assert.Equal(t, seqs, r.Settled()[d.Shard], "every record written was finished or discarded")
	for i := range 8 {
		want := 1
		if i == 5 {
			want = 0
		}
		assert.Equal(t, want, eff.count(fmt.Sprintf("item-%02d", i)), "item-%02d", i)
	}
}

// TestDynamoDBCrashMidBatch: an invocation that dies after three records is delivered
// again in full; without idempotency the first three effects happen twice, which is what
// the report lets a test see.
func TestDynamoDBCrashMidBatch(t *testing.T) {
	t.Parallel()
	client, table, src := streamTable(t)
	ctx := drainCtx(t)
	putItems(t, client, table, 0, 6)
	var eff effects
	crashed := false
	handler := func(ctx context.Context, ev events.DynamoDBEvent) error {
		for _, rec := range ev.Records {
			if itemID(rec) == "item-03" && !crashed {
				crashed = true
				esm.Crash(ctx)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			eff.apply(itemID(rec))
		}
		return nil
	}
	p, err := esm.New(src, handler)
	require.NoError(t, err)
	r, err := p.Drain(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Check())
	require.Len(t, r.Invocations, 2)
	assert.ErrorIs(t, r.Invocations[0].Err, esm.ErrCrashed)
	assert.Equal(t, r.Invocations[0].Records, r.Invocations[1].Records)
	for seq, n := range r.Delivered() {
		assert.Equal(t, 2, n, seq)
	}
	for i := range 6 {
		want := 1
		if i < 3 {
			want = 2
		}
		assert.Equal(t, want, eff.count(fmt.Sprintf("item-%02d", i)), "item-%02d", i)
	}
	assert.True(t, slices.Equal(r.Done()[r.Invocations[0].Shard], r.Invocations[0].Records))
}
