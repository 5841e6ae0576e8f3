package sqs_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/ddbcount"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/ledgertest"
	"github.com/idemkit/idem/internal/samtables"
)

// ddbBackend runs on DynamoDB Local, with the idempotency and ledger tables of
// infra/template.yaml. It skips under -short.
func ddbBackend() backend {
	return backend{name: "dynamodb", open: func(t *testing.T) (idemstore.Store, ledger) {
		t.Helper()
		client, idemTable, ledgerTable := ddbTables(t)
		store, err := dynamo.New(client, idemTable)
		require.NoError(t, err)
		return store, &ddbLedger{client: client, table: ledgerTable}
	}}
}

// ddbTables creates the example's tables on DynamoDB Local from infra/template.yaml.
func ddbTables(tb testing.TB) (client *dynamodb.Client, idemTable, ledgerTable string) {
	tb.Helper()
	client = ddblocal.Client(tb)
	names := samtables.NewTables(tb, client, "IdempotencyTable", "LedgerTable")
	return client, names["IdempotencyTable"], names["LedgerTable"]
}

// ddbLedger credits accounts with a non-idempotent ADD, attached to the completion of the
// message's key: only the guard keeps a redelivery from crediting twice.
type ddbLedger struct {
	client *dynamodb.Client
	table  string
}

func (l *ddbLedger) credit(ctx context.Context, m events.SQSMessage) error {
	c, err := parseCredit(m)
	if err != nil {
		return err
	}
	return dynamo.Attach(ctx, types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String(l.table),
		Key:                       map[string]types.AttributeValue{"account_id": &types.AttributeValueMemberS{Value: c.Account}},
		UpdateExpression:          aws.String("ADD balance :cents"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":cents": &types.AttributeValueMemberN{Value: strconv.Itoa(c.Cents)}},
	}})
}

func (l *ddbLedger) balance(t testing.TB, account string) int {
	t.Helper()
	return ledgertest.Ledger{DB: l.client, Table: l.table, Key: "account_id", Attr: "balance"}.Balance(t, account)
}

// countingAPI counts the calls that reach DynamoDB, by operation.
type countingAPI = ddbcount.API
