package dynamo_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
)

// TestDefaultAttributes checks the defaults against the attribute names of the Powertools
// for AWS Lambda idempotency utilities, which a shared table depends on.
func TestDefaultAttributes(t *testing.T) {
	t.Parallel()
	assert.Equal(t, dynamo.Attributes{
		ID: "id", Status: "status", Expiration: "expiration", InProgressExpiration: "in_progress_expiration",
		Validation: "validation", Data: "data", DataRef: "data_ref", LeaseToken: "lease_token",
		Checkpoint: "checkpoint", CheckpointSeq: "checkpoint_seq", Version: "v", Encoding: "enc",
	}, dynamo.DefaultAttributes())
}

// TestOptionsShapeTheItem checks, on the item a claim writes, that WithAttributes renames
// the fields it sets and keeps the defaults of those left empty, and that WithSortKey puts
// the partition value in the partition key and the record key in the sort key.
func TestOptionsShapeTheItem(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts []dynamo.Option
		want map[string]string // the item's string attributes that name the record
		// wantAttrs is the names of all the item's attributes.
		wantAttrs []string
	}{
		{
			"Defaults", nil,
			map[string]string{"id": "k", "status": "INPROGRESS", "lease_token": "tok"},
			[]string{"id", "status", "expiration", "in_progress_expiration", "validation", "lease_token", "v"},
		},
		{
			"NilOptionIgnored", []dynamo.Option{nil},
			map[string]string{"id": "k", "status": "INPROGRESS", "lease_token": "tok"},
			[]string{"id", "status", "expiration", "in_progress_expiration", "validation", "lease_token", "v"},
		},
		{
			"PartlyRenamed", []dynamo.Option{dynamo.WithAttributes(dynamo.Attributes{ID: "pk", Expiration: "ttl", LeaseToken: "owner"})},
			map[string]string{"pk": "k", "status": "INPROGRESS", "owner": "tok"},
			[]string{"pk", "status", "ttl", "in_progress_expiration", "validation", "owner", "v"},
		},
		{
			"SortKey", []dynamo.Option{dynamo.WithAttributes(dynamo.Attributes{ID: "PK"}), dynamo.WithSortKey("SK", "idempotency#f")},
			map[string]string{"PK": "idempotency#f", "SK": "k", "lease_token": "tok"},
			[]string{"PK", "SK", "status", "expiration", "in_progress_expiration", "validation", "lease_token", "v"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var item map[string]types.AttributeValue
			api := &fakeAPI{put: func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
				item = in.Item
				return &dynamodb.PutItemOutput{}, nil
			}}
			s, err := dynamo.New(api, "t", tc.opts...)
			require.NoError(t, err)
			now := time.Now()
			_, claimed, err := s.Claim(context.Background(), record("k", now, "tok"), now)
			require.NoError(t, err)
			require.True(t, claimed)
			assert.ElementsMatch(t, tc.wantAttrs, slices.Collect(maps.Keys(item)))
			for name, want := range tc.want {
				assert.Equal(t, &types.AttributeValueMemberS{Value: want}, item[name], name)
			}
		})
	}
}

// TestOptionRefusals checks that each refused option value makes New fail with an error
// wrapping idem.ErrInvalidOption that names the option, whatever the order of the options.
func TestOptionRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		opts   []dynamo.Option
		option string // the option the error names
	}{
		{"AttributesShareName", []dynamo.Option{dynamo.WithAttributes(dynamo.Attributes{Checkpoint: "data"})}, "WithAttributes"},
		{"RenamedAttributesShareName", []dynamo.Option{dynamo.WithAttributes(dynamo.Attributes{ID: "pk", LeaseToken: "pk"})}, "WithAttributes"},
		{"SortKeyIsAnAttribute", []dynamo.Option{dynamo.WithSortKey("lease_token", "p")}, "WithSortKey"},
		{"SortKeyIsARenamedAttribute", []dynamo.Option{dynamo.WithSortKey("body", "p"), dynamo.WithAttributes(dynamo.Attributes{Data: "body"})}, "WithSortKey"},
		{"EmptySortKey", []dynamo.Option{dynamo.WithSortKey("", "p")}, "WithSortKey"},
		{"EmptyPartitionValue", []dynamo.Option{dynamo.WithSortKey("sk", "")}, "WithSortKey"},
		{"InlineLimitZero", []dynamo.Option{dynamo.WithInlineLimit(0)}, "WithInlineLimit"},
		{"InlineLimitNegative", []dynamo.Option{dynamo.WithInlineLimit(-1)}, "WithInlineLimit"},
		{"InlineLimitJustBelow", []dynamo.Option{dynamo.WithInlineLimit(dynamo.DefaultInlineLimit - 1)}, "WithInlineLimit"},
		{"InlineLimitOverItemLimit", []dynamo.Option{dynamo.WithInlineLimit(1 << 30)}, "WithInlineLimit"},
		{"RefusalNotUndoneByLaterOption", []dynamo.Option{dynamo.WithInlineLimit(1), dynamo.WithInlineLimit(2048)}, "WithInlineLimit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := dynamo.New(&fakeAPI{}, "t", tc.opts...)
			require.ErrorIs(t, err, idem.ErrInvalidOption)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), "dynamo: "+tc.option)
		})
	}
}
