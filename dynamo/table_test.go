package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

func TestCreateTable(t *testing.T) {
	t.Parallel()
	client := ddblocal.Client(t)
	ctx := context.Background()
	table := ddblocal.NewTable(t, client)

	require.NoError(t, dynamo.CreateTable(ctx, client, table), "creating an existing table is a no-op")
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	require.NoError(t, err)
	assert.Equal(t, types.TimeToLiveStatusEnabled, ttl.TimeToLiveDescription.TimeToLiveStatus)
	assert.Equal(t, "expiration", aws.ToString(ttl.TimeToLiveDescription.AttributeName))
	desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	assert.Equal(t, types.BillingModePayPerRequest, desc.Table.BillingModeSummary.BillingMode)

	err = dynamo.CreateTable(ctx, client, table, dynamo.WithSortKey("sk", "p"))
	require.Error(t, err, "an existing table with another key schema")
	assert.Contains(t, err.Error(), "key schema")

	err = dynamo.CreateTable(ctx, client, table, dynamo.WithAttributes(dynamo.Attributes{Expiration: "ttl"}))
	require.Error(t, err, "an existing table with TTL on another attribute")
	assert.Contains(t, err.Error(), "TTL")

	err = dynamo.CreateTable(ctx, client, table, dynamo.WithSortKey("", "p"))
	require.ErrorContains(t, err, "WithSortKey")
}

// TestCreateTableSchema creates tables on DynamoDB Local and checks that each has the key
// schema, attribute types, billing mode and TTL attribute its options give, and that
// creating it again changes nothing.
func TestCreateTableSchema(t *testing.T) {
	t.Parallel()
	type key struct {
		name string
		typ  types.KeyType
	}
	cases := []struct {
		name    string
		opts    []dynamo.Option
		wantKey []key
		wantTTL string
	}{
		{"Defaults", nil, []key{{"id", types.KeyTypeHash}}, "expiration"},
		{
			"Renamed",
			[]dynamo.Option{dynamo.WithAttributes(dynamo.Attributes{ID: "pk", Expiration: "ttl"})},
			[]key{{"pk", types.KeyTypeHash}}, "ttl",
		},
		{
			"SortKey",
			[]dynamo.Option{dynamo.WithAttributes(dynamo.Attributes{ID: "PK"}), dynamo.WithSortKey("SK", "idempotency#f")},
			[]key{{"PK", types.KeyTypeHash}, {"SK", types.KeyTypeRange}}, "expiration",
		},
	}
	client := ddblocal.Client(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			table := fmt.Sprintf("idem-create-%s-%d", strings.ToLower(tc.name), time.Now().UnixNano())
			t.Cleanup(func() {
				_, err := client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
				assert.NoError(t, err)
			})
			for i := range 2 {
				require.NoError(t, dynamo.CreateTable(ctx, client, table, tc.opts...), "call %d", i+1)

				desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
				require.NoError(t, err)
				assert.Equal(t, types.TableStatusActive, desc.Table.TableStatus)
				var gotKey []key
				for _, k := range desc.Table.KeySchema {
					gotKey = append(gotKey, key{aws.ToString(k.AttributeName), k.KeyType})
				}
				assert.ElementsMatch(t, tc.wantKey, gotKey)
				require.Len(t, desc.Table.AttributeDefinitions, len(tc.wantKey), "only key attributes are defined")
				for _, d := range desc.Table.AttributeDefinitions {
					assert.Equal(t, types.ScalarAttributeTypeS, d.AttributeType, aws.ToString(d.AttributeName))
				}
				assert.Equal(t, types.BillingModePayPerRequest, desc.Table.BillingModeSummary.BillingMode)

				ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
				require.NoError(t, err)
				assert.Equal(t, types.TimeToLiveStatusEnabled, ttl.TimeToLiveDescription.TimeToLiveStatus)
				assert.Equal(t, tc.wantTTL, aws.ToString(ttl.TimeToLiveDescription.AttributeName))
			}
		})
	}
}

// tableAPIFunc is a dynamo.TableAPI that counts and refuses CreateTable calls; any other
// call panics on the nil embedded interface.
type tableAPIFunc struct {
	dynamo.TableAPI
	calls int
}

func (f *tableAPIFunc) CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	f.calls++
	return nil, errors.New("unexpected CreateTable")
}

// TestCreateTableRefusesOptions checks that CreateTable refuses the options New refuses,
// with an error wrapping idem.ErrInvalidOption, before calling DynamoDB.
func TestCreateTableRefusesOptions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts []dynamo.Option
	}{
		{"DuplicateAttribute", []dynamo.Option{dynamo.WithAttributes(dynamo.Attributes{Expiration: "id"})}},
		{"SortKeyClashes", []dynamo.Option{dynamo.WithSortKey("status", "p")}},
		{"EmptySortKey", []dynamo.Option{dynamo.WithSortKey("", "p")}},
		{"InlineLimit", []dynamo.Option{dynamo.WithInlineLimit(1)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := &tableAPIFunc{}
			err := dynamo.CreateTable(context.Background(), api, "t", tc.opts...)
			require.ErrorIs(t, err, idem.ErrInvalidOption)
			assert.Zero(t, api.calls, "nothing is sent")
		})
	}
}
