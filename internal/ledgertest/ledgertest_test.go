package ledgertest_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/dynamo/dynamomem"
	"github.com/idemkit/idem/internal/ledgertest"
)

// TestBalance: the balance is the number attribute of the account's item, 0 when the item
// or the attribute is absent.
func TestBalance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dynamomem.New()
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("ledger"),
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("account_id"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("account_id"), AttributeType: types.ScalarAttributeTypeS}},
	})
	require.NoError(t, err)
	for account, item := range map[string]map[string]types.AttributeValue{
		"credited": {"balance": &types.AttributeValueMemberN{Value: "4200"}},
		"negative": {"balance": &types.AttributeValueMemberN{Value: "-5"}},
		"other":    {"balance_cents": &types.AttributeValueMemberN{Value: "7"}},
	} {
		item["account_id"] = &types.AttributeValueMemberS{Value: account}
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("ledger"), Item: item})
		require.NoError(t, err)
	}
	l := ledgertest.Ledger{DB: db, Table: "ledger", Key: "account_id", Attr: "balance"}
	for _, tc := range []struct {
		account string
		want    int
	}{
		{"credited", 4200},
		{"negative", -5},
		{"other", 0},  // no such attribute
		{"absent", 0}, // no such item
	} {
		t.Run(tc.account, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, l.Balance(t, tc.account))
		})
	}
	cents := ledgertest.Ledger{DB: db, Table: "ledger", Key: "account_id", Attr: "balance_cents"}
	assert.Equal(t, 7, cents.Balance(t, "other"), "the attribute the ledger names")
}

// scanFunc answers a Scan.
type scanFunc func(in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error)

func (f scanFunc) Scan(_ context.Context, in *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return f(in)
}

// TestBalances: every account of the table with its balance, read strongly consistent;
// an item without the balance attribute counts 0.
func TestBalances(t *testing.T) {
	t.Parallel()
	db := scanFunc(func(in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
		assert.Equal(t, "ledger", aws.ToString(in.TableName))
		assert.True(t, aws.ToBool(in.ConsistentRead))
		return &dynamodb.ScanOutput{Items: []map[string]types.AttributeValue{
			{"account_id": &types.AttributeValueMemberS{Value: "sales#sku-1"}, "balance_cents": &types.AttributeValueMemberN{Value: "800"}},
			{"account_id": &types.AttributeValueMemberS{Value: "acct-2"}, "balance_cents": &types.AttributeValueMemberN{Value: "-250"}},
			{"account_id": &types.AttributeValueMemberS{Value: "acct-3"}},
		}}, nil
	})
	assert.Equal(t, map[string]int64{"sales#sku-1": 800, "acct-2": -250, "acct-3": 0},
		ledgertest.Balances(t, db, "ledger", "account_id", "balance_cents"))
}
