package dynamomem_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/dynamo/dynamomem"
)

// TestCheckAttachedRefuses: what DynamoDB would refuse before running a transaction, and
// what the stand-in does not evaluate, is refused when attached, with an error that says
// which write and why.
func TestCheckAttachedRefuses(t *testing.T) {
	t.Parallel()
	type vals = map[string]types.AttributeValue
	key := vals{"pk": s("a")}
	upd := func(expr string, v vals) types.TransactWriteItem {
		return types.TransactWriteItem{Update: &types.Update{TableName: aws.String("ledger"), Key: key, UpdateExpression: aws.String(expr), ExpressionAttributeValues: v}}
	}
	cond := func(expr string, v vals, names map[string]string) types.TransactWriteItem {
		return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String("ledger"), Key: key,
			ConditionExpression: aws.String(expr), ExpressionAttributeValues: v, ExpressionAttributeNames: names}}
	}
	tooMany := make([]any, 100)
	for i := range tooMany {
		tooMany[i] = upd("ADD v :n", vals{":n": n("1")})
	}
	for _, tc := range []struct {
		name     string
		attached []any
		says     string
	}{
		{"AnotherType", []any{func() error { return nil }}, "func() error"},
		{"NilPointer", []any{(*types.TransactWriteItem)(nil)}, "nil *types.TransactWriteItem"},
		{"TooMany", tooMany, "at most 99"},
		{"NoAction", []any{types.TransactWriteItem{}}, "no action"},
		{"NoTable", []any{types.TransactWriteItem{Delete: &types.Delete{Key: key}}}, "no TableName"},
		{"TableNotCreated", []any{types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String("orders"), Key: key}}}, `"orders" was not created`},
		{"KeyMissingFromPut", []any{types.TransactWriteItem{Put: &types.Put{TableName: aws.String("ledger"), Item: vals{"v": n("1")}}}}, "required keys"},
		{"KeyOfAnotherType", []any{types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String("ledger"), Key: vals{"pk": n("1")}}}}, "type mismatch"},
		{"KeyWithExtraAttribute", []any{types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String("ledger"), Key: vals{"pk": s("a"), "v": n("1")}}}}, "does not match the schema"},
		{"ConditionCheckWithoutCondition", []any{types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String("ledger"), Key: key}}}, "needs a ConditionExpression"},
		{"ValuesWithoutExpression", []any{types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String("ledger"), Key: key, ExpressionAttributeValues: vals{":x": n("1")}}}}, "only be given with expressions"},
		{"UndefinedValue", []any{cond("v = :x", nil, nil)}, ":x is not defined"},
		{"UndefinedName", []any{cond("#v = :x", vals{":x": n("1")}, nil)}, "#v is not defined"},
		{"UnusedName", []any{cond("v = :x", vals{":x": n("1")}, map[string]string{"#w": "w"})}, "#w is unused"},
		{"ReservedWord", []any{cond("status = :x", vals{":x": n("1")}, nil)}, "reserved keyword: status"},
		{"SyntaxError", []any{cond("v = = :x", vals{":x": n("1")}, nil)}, "syntax error"},
		{"TrailingTokens", []any{cond("v = :x v", vals{":x": n("1")}, nil)}, "syntax error"},
		{"UpperCaseFunction", []any{cond("ATTRIBUTE_EXISTS(v)", nil, nil)}, "invalid function name"},
		{"OrderingABoolean", []any{cond("v < :x", vals{":x": &types.AttributeValueMemberBOOL{Value: true}}, nil)}, "operand type: BOOL"},
		{"NestedPath", []any{cond("attribute_exists(m.x)", nil, nil)}, "not supported in memory"},
		{"SizeFunction", []any{cond("size(v) > :x", vals{":x": n("1")}, nil)}, "not supported in memory"},
		{"AttributeType", []any{cond("attribute_type(v, :t)", vals{":t": s("N")}, nil)}, "not supported in memory"},
		{"ListAppend", []any{upd("SET l = list_append(l, :x)", vals{":x": &types.AttributeValueMemberL{}})}, "not supported in memory"},
		{"DeleteFromSet", []any{upd("DELETE tags :x", vals{":x": &types.AttributeValueMemberSS{Value: []string{"a"}}})}, "not supported in memory"},
		{"AddASet", []any{upd("ADD tags :x", vals{":x": &types.AttributeValueMemberSS{Value: []string{"a"}}})}, "not supported in memory"},
		{"ArithmeticOnAString", []any{upd("SET v = v + :x", vals{":x": s("1")})}, "operand type: S"},
		{"TwoSetSections", []any{upd("SET v = :x SET w = :x", vals{":x": n("1")})}, "only be used once"},
		{"OverlappingPaths", []any{upd("SET v = :x REMOVE v", vals{":x": n("1")})}, "overlap"},
		{"UpdateTheKey", []any{upd("REMOVE pk", nil)}, "part of the key"},
		{"TwoWritesOneItem", []any{upd("ADD v :x", vals{":x": n("1")}), types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String("ledger"), Key: key}}}, "multiple operations on one item"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := dynamomem.New()
			_, err := m.CreateTable(context.Background(), ledgerTable())
			require.NoError(t, err)
			err = m.CheckAttached(tc.attached)
			require.Error(t, err)
			assert.ErrorContains(t, err, tc.says)
		})
	}
}
