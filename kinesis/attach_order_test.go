package kinesis_test

import (
	"context"
	"encoding/json"
	"strconv"
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
	"github.com/idemkit/idem/dynamo/dynamotest"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/samtables"
	"github.com/idemkit/idem/kinesis"
)

// TestNextRecordOfPartitionKeySeesAttachedWriteOfPrevious: the records of a partition key
// run one at a time in sequence order, and a record followed in the batch by another of its
// partition key is recorded, with its attached writes (dynamo.Attach), before that one
// starts. So a read-modify-write in the handler sees the previous record's write, and no
// credit is lost. Before, with batch claims, record 1's write committed only at the batch's
// end: record 2 read the balance without it and overwrote it. On the in-memory store and on
// DynamoDB Local.
func TestNextRecordOfPartitionKeySeesAttachedWriteOfPrevious(t *testing.T) {
	accounts := &dynamodb.CreateTableInput{
		TableName:            aws.String("accounts"),
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
	}
	t.Run("memory", func(t *testing.T) {
		store := dynamomem.New()
		_, err := store.CreateTable(context.Background(), accounts)
		require.NoError(t, err)
		nextRecordSeesPrevious(t, store, store, "accounts")
	})
	t.Run("dynamodb_local", func(t *testing.T) {
		client := ddblocal.Client(t)
		table := dynamotest.CreateTable(t, client, accounts)
		idemTable := samtables.NewTables(t, client, "IdempotencyTable")["IdempotencyTable"]
		store, err := dynamo.New(client, idemTable)
		require.NoError(t, err)
		nextRecordSeesPrevious(t, store, client, table)
	})
}

type itemGetter interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

func nextRecordSeesPrevious(t *testing.T, store idemstore.Store, db itemGetter, table string) {
	ctx := context.Background()
	g, err := idem.New(store, "attach-order")
	require.NoError(t, err)

	var mu sync.Mutex
	seen := map[string]int{} // event_id → balance the handler read before applying it
	apply := func(ctx context.Context, r events.KinesisEventRecord) error {
		var c credit
		if err := json.Unmarshal(r.Kinesis.Data, &c); err != nil {
			return err
		}
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: c.AccountID}}})
		if err != nil {
			return err
		}
		balance := 0
		if out.Item != nil {
			balance, _ = strconv.Atoi(out.Item["balance"].(*types.AttributeValueMemberN).Value)
		}
		mu.Lock()
		seen[c.EventID] = balance
		mu.Unlock()
		// Per-partition-key order makes a plain read-modify-write correct.
		return dynamo.Attach(ctx, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(table),
			Item: map[string]types.AttributeValue{
				"pk":      &types.AttributeValueMemberS{Value: c.AccountID},
				"balance": &types.AttributeValueMemberN{Value: strconv.Itoa(balance + c.Amount)},
			},
		}})
	}
	h, err := kinesis.New(g, apply)
	require.NoError(t, err)

	rec := func(seq, id string, amount int) events.KinesisEventRecord {
		data, _ := json.Marshal(credit{EventID: id, AccountID: "acct-1", Amount: amount})
		var r events.KinesisEventRecord
		r.EventID = "shardId-000000000000:" + seq
		r.EventSourceArn = "arn:aws:kinesis:eu-west-1:123456789012:stream/credits"
		r.Kinesis.SequenceNumber, r.Kinesis.PartitionKey, r.Kinesis.Data = seq, "acct-1", data
		return r
	}
	ev := events.KinesisEvent{Records: []events.KinesisEventRecord{rec("100", "e-1", 10), rec("101", "e-2", 5)}}
	reported := adaptertest.Failures(t, invoke(t, h, ev))
	require.Empty(t, reported, "both records acknowledged")

	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "acct-1"}}})
	require.NoError(t, err)
	require.NotNil(t, out.Item)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 10, seen["e-2"], "record 2 read the balance with record 1's credit")
	assert.Equal(t, "15", out.Item["balance"].(*types.AttributeValueMemberN).Value, "both credits applied")
}
