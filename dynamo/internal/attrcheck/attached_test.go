package attrcheck_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/dynamo/internal/attrcheck"
)

// TestAppendAttached: attached values become DynamoDB items after dst, values and pointers
// alike, and what no completion could send is refused, naming the write.
func TestAppendAttached(t *testing.T) {
	t.Parallel()
	del := types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String("t")}}
	dst := []types.TransactWriteItem{{Update: &types.Update{TableName: aws.String("idem")}}}
	got, err := attrcheck.AppendAttached(dst, []any{del, &del}, 2)
	require.NoError(t, err)
	assert.Equal(t, []types.TransactWriteItem{dst[0], del, del}, got)

	for _, tc := range []struct {
		name     string
		attached []any
		says     string
	}{
		{"TooMany", []any{del, del, del}, "3 attached writes, but at most 2 fit one transaction with the completion"},
		{"NilPointer", []any{del, (*types.TransactWriteItem)(nil)}, "attached write 1 is a nil *types.TransactWriteItem"},
		{"AnotherType", []any{func() error { return nil }}, "attached write 0 is func() error, want types.TransactWriteItem (use dynamo.Attach)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := attrcheck.AppendAttached(nil, tc.attached, 2)
			assert.EqualError(t, err, tc.says)
		})
	}
}

// TestAction: a write holds exactly one action, which names its table.
func TestAction(t *testing.T) {
	t.Parallel()
	table := aws.String("t")
	for _, tc := range []struct {
		name string
		w    types.TransactWriteItem
		says string // "" for a write of the right shape
	}{
		{"Put", types.TransactWriteItem{Put: &types.Put{TableName: table}}, ""},
		{"Update", types.TransactWriteItem{Update: &types.Update{TableName: table}}, ""},
		{"Delete", types.TransactWriteItem{Delete: &types.Delete{TableName: table}}, ""},
		{"ConditionCheck", types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: table}}, ""},
		{"NoAction", types.TransactWriteItem{}, "no action: set one of Put, Update, Delete or ConditionCheck"},
		{"TwoActions", types.TransactWriteItem{Put: &types.Put{TableName: table}, Delete: &types.Delete{TableName: table}},
			"2 actions: a types.TransactWriteItem holds exactly one of Put, Update, Delete or ConditionCheck"},
		{"NoTable", types.TransactWriteItem{Update: &types.Update{}}, "no TableName"},
		{"EmptyTable", types.TransactWriteItem{Update: &types.Update{TableName: aws.String("")}}, "no TableName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := attrcheck.Action(tc.w)
			if tc.says == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tc.says)
		})
	}
}

// TestTypeName: DynamoDB's name of every attribute value type.
func TestTypeName(t *testing.T) {
	t.Parallel()
	for want, v := range map[string]types.AttributeValue{
		"S":                         &types.AttributeValueMemberS{},
		"N":                         &types.AttributeValueMemberN{},
		"B":                         &types.AttributeValueMemberB{},
		"BOOL":                      &types.AttributeValueMemberBOOL{},
		"NULL":                      &types.AttributeValueMemberNULL{},
		"SS":                        &types.AttributeValueMemberSS{},
		"NS":                        &types.AttributeValueMemberNS{},
		"BS":                        &types.AttributeValueMemberBS{},
		"L":                         &types.AttributeValueMemberL{},
		"M":                         &types.AttributeValueMemberM{},
		"<nil>":                     nil,
		"*types.UnknownUnionMember": &types.UnknownUnionMember{},
	} {
		assert.Equal(t, want, attrcheck.TypeName(v))
	}
}
