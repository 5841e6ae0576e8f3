// Package ledgertest reads the ledger tables of the tests: one item per account, whose
// number attribute a non-idempotent ADD credits, so that only the guard keeps a retry
// from crediting twice. A test reads the balance back from DynamoDB Local or from the
// in-memory DynamoDB (package dynamomem) the same way.
package ledgertest

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// ItemGetter reads an item: a *dynamodb.Client does, and so does a *dynamomem.Store.
type ItemGetter interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// Ledger is a table of balances: one item per account, keyed by the string attribute
// Key, with the balance in the number attribute Attr.
type Ledger struct {
	DB    ItemGetter
	Table string
	Key   string // the partition key attribute, of type S
	Attr  string // the balance attribute, of type N
}

// Balance returns account's balance, read strongly consistent: 0 when the account has no
// item or its item no balance. It fails tb on error.
func (l Ledger) Balance(tb testing.TB, account string) int {
	tb.Helper()
	out, err := l.DB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      aws.String(l.Table),
		Key:            map[string]types.AttributeValue{l.Key: &types.AttributeValueMemberS{Value: account}},
		ConsistentRead: aws.Bool(true),
	})
	require.NoError(tb, err)
	n, ok := out.Item[l.Attr].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	v, err := strconv.Atoi(n.Value)
	require.NoError(tb, err)
	return v
}

// Scanner reads a whole table: a *dynamodb.Client does.
type Scanner interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Balances returns the balance of every account of table, keyed by the string attribute
// key with the balance in the number attribute attr (0 when absent), read with one
// strongly consistent Scan: the tests' ledgers are small. It fails tb on error.
func Balances(tb testing.TB, db Scanner, table, key, attr string) map[string]int64 {
	tb.Helper()
	out, err := db.Scan(context.Background(), &dynamodb.ScanInput{
		TableName:      aws.String(table),
		ConsistentRead: aws.Bool(true),
	})
	require.NoError(tb, err)
	got := make(map[string]int64, len(out.Items))
	for _, item := range out.Items {
		account, ok := item[key].(*types.AttributeValueMemberS)
		require.True(tb, ok, "item without the string key %s", key)
		var balance int64
		if n, ok := item[attr].(*types.AttributeValueMemberN); ok {
			balance, err = strconv.ParseInt(n.Value, 10, 64)
			require.NoError(tb, err)
		}
		got[account.Value] = balance
	}
	return got
}
