package samtables

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/internal/ddblocal"
)

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

// A *dynamodb.Client must satisfy TableAPI.
var _ TableAPI = (*dynamodb.Client)(nil)

// The logical IDs of the template's tables.
const (
	idempotencyTable = "IdempotencyTable"
	ordersTable      = "OrdersTable"
	ledgerTable      = "LedgerTable"
)

// TestCreateTablesLocal creates the template's tables on DynamoDB Local and runs the
// DynamoDB store with its default options against the idempotency table: the template and
// the library's defaults agree.
func TestCreateTablesLocal(t *testing.T) {
	t.Parallel()
	client := ddblocal.Client(t)
	names := NewTables(t, client, idempotencyTable, ordersTable, ledgerTable)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	tests := []struct {
		name    string
		id      string
		hashKey string
		ttl     string
		stream  types.StreamViewType // "" for no stream
	}{
		{name: "idempotency", id: idempotencyTable, hashKey: "id", ttl: "expiration"},
		// example-stream consumes the orders table's stream, and needs new images.
		{name: "orders", id: ordersTable, hashKey: "id", stream: types.StreamViewTypeNewImage},
		{name: "ledger", id: ledgerTable, hashKey: "account_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(names[tc.id])})
			require.NoError(t, err)
			require.Len(t, desc.Table.KeySchema, 1)
			assert.Equal(t, tc.hashKey, *desc.Table.KeySchema[0].AttributeName)
			if tc.stream == "" {
				assert.Nil(t, desc.Table.LatestStreamArn)
			} else if assert.NotNil(t, desc.Table.StreamSpecification) {
				assert.True(t, aws.ToBool(desc.Table.StreamSpecification.StreamEnabled))
				assert.Equal(t, tc.stream, desc.Table.StreamSpecification.StreamViewType)
				assert.NotNil(t, desc.Table.LatestStreamArn)
			}
			ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(names[tc.id])})
			require.NoError(t, err)
			if tc.ttl == "" {
				assert.Nil(t, ttl.TimeToLiveDescription.AttributeName)
			} else {
				assert.Equal(t, tc.ttl, aws.ToString(ttl.TimeToLiveDescription.AttributeName))
			}
		})
	}

	store, err := dynamo.New(client, names[idempotencyTable])
	require.NoError(t, err)
	guard, err := idem.New(store, "test")
	require.NoError(t, err)
	runs := 0
	for range 2 {
		got, _, err := idem.Do(ctx, guard, idem.Request{Key: "k", Fingerprint: []byte("body")}, func(context.Context) (int, error) {
			runs++
			return 42, nil
		})
		require.NoError(t, err)
		assert.Equal(t, 42, got)
	}
	assert.Equal(t, 1, runs)
}

func TestCreateTablesErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		names map[string]string
	}{
		{name: "none", names: nil},
		{name: "unknown logical ID", names: map[string]string{"Nope": "t"}},
		{name: "not a table", names: map[string]string{"LedgerQueue": "t"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The client is never reached: every case fails before the first request.
			assert.Error(t, CreateTables(context.Background(), (*dynamodb.Client)(nil), tc.names))
		})
	}
}
