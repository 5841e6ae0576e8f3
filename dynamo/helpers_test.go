package dynamo_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/ddbcount"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/ledgertest"
)

// env is one test's table on DynamoDB Local and a store over it.
type env struct {
	client *dynamodb.Client
	api    *countingAPI
	table  string
	store  *dynamo.Store
}

// newEnv creates a table and a store over it. TTL is switched off: DynamoDB Local deletes
// expired items within seconds, while in AWS they linger for up to days, and the tests need
// them to linger.
func newEnv(t *testing.T, opts ...dynamo.Option) *env {
	t.Helper()
	client := ddblocal.Client(t)
	table := ddblocal.NewTable(t, client, opts...)
	ddblocal.DisableTTL(t, client, table)
	api := ddbcount.New(client)
	store, err := dynamo.New(api, table, opts...)
	require.NoError(t, err)
	return &env{client: client, api: api, table: table, store: store}
}

// countingAPI counts the calls that reach DynamoDB, by operation.
type countingAPI = ddbcount.API

// rawItem reads an item as stored, bypassing the store's decoding.
func (e *env) rawItem(t *testing.T, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	out, err := e.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(e.table), Key: key, ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	return out.Item
}

// putRaw writes an item as it is, as another (perhaps broken) writer would.
func (e *env) putRaw(t *testing.T, item map[string]types.AttributeValue) {
	t.Helper()
	_, err := e.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: item})
	require.NoError(t, err)
}

// ledger is a business table with one balance per account, updated with a non-idempotent
// ADD.
type ledger struct {
	client *dynamodb.Client
	table  string
}

func newLedger(t *testing.T, client *dynamodb.Client) *ledger {
	t.Helper()
	return &ledger{client: client, table: ddblocal.NewTable(t, client)}
}

// add returns a write that adds n to account's balance; with failCond its condition fails.
func (l *ledger) add(account string, n int, failCond bool) types.TransactWriteItem {
	u := &types.Update{
		TableName:        aws.String(l.table),
		Key:              map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: account}},
		UpdateExpression: aws.String("ADD balance :n"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":n": &types.AttributeValueMemberN{Value: strconv.Itoa(n)},
		},
	}
	if failCond {
		u.ConditionExpression = aws.String("attribute_exists(closed)")
	}
	return types.TransactWriteItem{Update: u}
}

func (l *ledger) balance(t *testing.T, account string) int {
	t.Helper()
	return ledgertest.Ledger{DB: l.client, Table: l.table, Key: "id", Attr: "balance"}.Balance(t, account)
}

// wallClock returns the current time rounded down to the second. Records in the tests are
// dated from it, so that DynamoDB Local's TTL, where on, leaves them alone.
func wallClock() time.Time { return time.Now().Truncate(time.Second).UTC() }

// record returns an in-progress record for key claimed at now.
func record(key string, now time.Time, token string) *idemstore.Record {
	return &idemstore.Record{
		Key:          key,
		Status:       idemstore.StatusInProgress,
		Expires:      now.Add(time.Hour),
		LeaseExpires: now.Add(time.Minute),
		Fingerprint:  "fp",
		LeaseToken:   token,
		Version:      idemstore.SchemaVersion,
	}
}
