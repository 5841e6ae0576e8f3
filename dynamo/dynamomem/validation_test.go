package dynamomem_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/dynamo/dynamomem"
	"github.com/idemkit/idem/dynamo/dynamotest"
	"github.com/idemkit/idem/idemstore"
)

// keyTable is a business table keyed by an attribute "pk" of type typ (S, N or B).
func keyTable(typ types.ScalarAttributeType) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:            aws.String("by-" + strings.ToLower(string(typ))),
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: typ}},
		BillingMode:          types.BillingModePayPerRequest,
	}
}

// validationTables are the names of the three business tables of one backend, by key type.
type validationTables map[types.ScalarAttributeType]string

type vals = map[string]types.AttributeValue

func ss(v ...string) types.AttributeValue { return &types.AttributeValueMemberSS{Value: v} }
func ns(v ...string) types.AttributeValue { return &types.AttributeValueMemberNS{Value: v} }
func bs(v ...[]byte) types.AttributeValue { return &types.AttributeValueMemberBS{Value: v} }
func b(v []byte) types.AttributeValue     { return &types.AttributeValueMemberB{Value: v} }

// validationCase is one write and whether DynamoDB takes it.
type validationCase struct {
	name string
	// write returns the write, to the tables of tbl; id is a fresh string key.
	write func(tbl validationTables, id string) types.TransactWriteItem
	// local is part of DynamoDB Local's ValidationException message (compared ignoring
	// case), and ours part of the refusal at Attach: both "" for a write DynamoDB takes.
	local, ours string
	// schemaOnly: only a store that knows the table's key schema can refuse it at Attach
	// (MemStore); dynamo.Store leaves it to DynamoDB, which refuses the completion.
	schemaOnly bool
}

// put is a Put of item, with a fresh key, to the table keyed by a string.
func put(item vals) func(validationTables, string) types.TransactWriteItem {
	return func(tbl validationTables, id string) types.TransactWriteItem {
		it := maps.Clone(item)
		if _, ok := it["pk"]; !ok {
			it["pk"] = s(id)
		}
		return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(tbl["S"]), Item: it}}
	}
}

// number is a Put of the number v.
func number(v string) func(validationTables, string) types.TransactWriteItem {
	return put(vals{"v": n(v)})
}

// set is an Update that sets attribute a to v, conditional on cond if not "".
func set(v types.AttributeValue, names map[string]string, expr, cond string) func(validationTables, string) types.TransactWriteItem {
	return func(tbl validationTables, id string) types.TransactWriteItem {
		u := &types.Update{TableName: aws.String(tbl["S"]), Key: vals{"pk": s(id)}, UpdateExpression: aws.String(expr),
			ExpressionAttributeNames: names, ExpressionAttributeValues: vals{":v": v}}
		if cond != "" {
			u.ConditionExpression = aws.String(cond)
		}
		return types.TransactWriteItem{Update: u}
	}
}

// keyed returns a write of the given kind to the table keyed by typ, with key k.
func keyed(kind string, typ types.ScalarAttributeType, k vals) func(validationTables, string) types.TransactWriteItem {
	return func(tbl validationTables, _ string) types.TransactWriteItem {
		table := aws.String(tbl[typ])
		switch kind {
		case "Put":
			return types.TransactWriteItem{Put: &types.Put{TableName: table, Item: k}}
		case "Update":
			return types.TransactWriteItem{Update: &types.Update{TableName: table, Key: k,
				UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: vals{":v": n("1")}}}
		case "Delete":
			return types.TransactWriteItem{Delete: &types.Delete{TableName: table, Key: k}}
		}
		return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: table, Key: k,
			ConditionExpression: aws.String("attribute_exists(v)")}}
	}
}

const (
	digits38 = "12345678901234567890123456789012345678"
	notANum  = "cannot be converted into a number"
	prec     = "precision up to 38 digits"
	over     = "number overflow"
	under    = "number underflow"
	dups     = "contains duplicates"
	noName   = "empty attribute name"
	emptyKey = "key attribute cannot contain an empty string value"
)

var validationCases = []validationCase{
	// Numbers DynamoDB parses and stores.
	{name: "ThirtyEightDigits", write: number(digits38)},
	{name: "ThirtyEightDigitsAndZeros", write: number("-0.000" + digits38 + "00")},
	{name: "Zero", write: number("0")},
	{name: "NegativeZero", write: number("-0")},
	{name: "NegativeExponent", write: number("-0.5e-3")},
	{name: "LargestMagnitude", write: number("9.9999999999999999999999999999999999999E+125")},
	{name: "SmallestMagnitude", write: number("-1E-130")},
	{name: "ZeroOfAnyExponent", write: number("0E-500")},
	{name: "PlusSign", write: number("+1")},
	{name: "NoIntegerPart", write: number(".5")},
	{name: "NoFraction", write: number("5.e3")},
	{name: "LeadingZeros", write: number("00012")},
	{name: "NonASCIIDigit", write: number("\u0663")}, // ARABIC-INDIC DIGIT THREE, as Java's BigDecimal
	// Sets, names and empty values DynamoDB takes.
	{name: "OneMemberSets", write: put(vals{"a": ss("x"), "b": ns("1"), "c": bs([]byte{1})})},
	{name: "DistinctNumbers", write: put(vals{"a": ns("1", "1.5", "-1")})},
	{name: "EmptyMembers", write: put(vals{"a": ss(""), "b": bs([]byte{})})},
	{name: "EmptyNonKeyValues", write: put(vals{"a": s(""), "b": b([]byte{}), "c": &types.AttributeValueMemberM{Value: vals{}}, "d": &types.AttributeValueMemberL{}})},
	{name: "UpdateSetsOneMemberSet", write: set(ss("x"), nil, "SET a = :v", "")},

	// Numbers DynamoDB cannot parse.
	{name: "Hexadecimal", write: number("0x10"), local: notANum, ours: notANum},
	{name: "Fraction", write: number("1/3"), local: notANum, ours: notANum},
	{name: "Space", write: number(" 1"), local: notANum, ours: notANum},
	{name: "Underscore", write: number("1_000"), local: notANum, ours: notANum},
	{name: "EmptyNumber", write: number(""), local: notANum, ours: notANum},
	{name: "NaN", write: number("NaN"), local: notANum, ours: notANum},
	{name: "Infinity", write: number("Infinity"), local: notANum, ours: notANum},
	{name: "NoExponentDigits", write: number("1e+"), local: notANum, ours: notANum},
	{name: "ExponentPast32Bits", write: number("1E2147483648"), local: notANum, ours: notANum},
	{name: "ScalePast32Bits", write: number("1E-2147483648"), local: notANum, ours: notANum},
	// Numbers DynamoDB cannot store.
	{name: "ThirtyNineDigits", write: number(digits38 + "9"), local: prec, ours: prec},
	{name: "ThirtyNineDigitsAfterZeros", write: number("-0.000" + digits38 + "1"), local: prec, ours: prec},
	{name: "Overflow", write: number("1E+126"), local: over, ours: over},
	{name: "NegativeOverflow", write: number("-1000E+123"), local: over, ours: over},
	{name: "HugeExponent", write: number("1E2147483647"), local: over, ours: over},
	{name: "Underflow", write: number("1E-131"), local: under, ours: under},
	{name: "UnderflowWritten", write: number("0.99E-130"), local: under, ours: under},
	{name: "BadNumberInSet", write: put(vals{"a": ns("1", "0x10")}), local: notANum, ours: notANum},
	{name: "BadNumberInList", write: put(vals{"a": &types.AttributeValueMemberL{Value: []types.AttributeValue{n("1/3")}}}), local: notANum, ours: notANum},
	{name: "BadNumberInMap", write: put(vals{"a": &types.AttributeValueMemberM{Value: vals{"x": n(digits38 + "9")}}}), local: prec, ours: prec},
	{name: "BadNumberInKey", write: keyed("Delete", "N", vals{"pk": n("0x10")}), local: notANum, ours: notANum},
	// Sets.
	{name: "EmptyStringSet", write: put(vals{"a": ss()}), local: "set  may not be empty", ours: "set may not be empty"},
	{name: "EmptyNumberSet", write: put(vals{"a": ns()}), local: "set  may not be empty", ours: "set may not be empty"},
	{name: "EmptyBinarySet", write: put(vals{"a": bs()}), local: "sets should not be empty", ours: "set may not be empty"},
	{name: "EmptySetInMap", write: put(vals{"a": &types.AttributeValueMemberM{Value: vals{"x": ss()}}}), local: "may not be empty", ours: "may not be empty"},
	{name: "EmptySetInList", write: put(vals{"a": &types.AttributeValueMemberL{Value: []types.AttributeValue{ns()}}}), local: "may not be empty", ours: "may not be empty"},
	{name: "DuplicateStrings", write: put(vals{"a": ss("x", "x")}), local: dups, ours: dups},
	{name: "DuplicateNumbers", write: put(vals{"a": ns("1", "1.0")}), local: dups, ours: dups},
	{name: "DuplicateZeros", write: put(vals{"a": ns("0", "-0")}), local: dups, ours: dups},
	{name: "DuplicateBinaries", write: put(vals{"a": bs([]byte{1}, []byte{1})}), local: dups, ours: dups},
	{name: "UpdateSetsEmptySet", write: set(ss(), nil, "SET a = :v", ""), local: "may not be empty", ours: "may not be empty"},
	{name: "UpdateSetsDuplicates", write: set(ns("2", "02"), nil, "SET a = :v", ""), local: dups, ours: dups},
	{name: "ConditionOnEmptySet", write: func(tbl validationTables, id string) types.TransactWriteItem {
		return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(tbl["S"]), Key: vals{"pk": s(id)},
			ConditionExpression: aws.String("a <> :v"), ExpressionAttributeValues: vals{":v": ss()}}}
	}, local: "may not be empty", ours: "may not be empty"},
	// Names.
	{name: "EmptyAttributeName", write: put(vals{"": s("x")}), local: noName, ours: noName},
	{name: "EmptyNameInMap", write: put(vals{"a": &types.AttributeValueMemberM{Value: vals{"": s("x")}}}), local: noName, ours: noName},
	{name: "EmptyNameInKey", write: keyed("Delete", "S", vals{"": s("x")}), local: noName, ours: noName},
	{name: "EmptyExpressionAttributeName", write: set(n("1"), map[string]string{"#a": ""}, "SET #a = :v", ""), local: noName, ours: noName},
	{name: "EmptyExpressionAttributeNames", write: set(n("1"), map[string]string{}, "SET a = :v", ""), local: "ExpressionAttributeNames must not be empty", ours: "ExpressionAttributeNames must not be empty"},
	// Keys.
	{name: "EmptyStringKeyUpdate", write: keyed("Update", "S", vals{"pk": s("")}), local: emptyKey, ours: emptyKey},
	{name: "EmptyStringKeyDelete", write: keyed("Delete", "S", vals{"pk": s("")}), local: emptyKey, ours: emptyKey},
	{name: "EmptyStringKeyConditionCheck", write: keyed("ConditionCheck", "S", vals{"pk": s("")}), local: emptyKey, ours: emptyKey},
	{name: "EmptyBinaryKey", write: keyed("Delete", "B", vals{"pk": b([]byte{})}), local: "empty binary value", ours: "empty binary value"},
	{name: "EmptyStringKeyPut", write: keyed("Put", "S", vals{"pk": s("")}), local: emptyKey, ours: emptyKey, schemaOnly: true},
	{name: "EmptyBinaryKeyPut", write: keyed("Put", "B", vals{"pk": b([]byte{})}), local: "empty binary value", ours: "empty binary value", schemaOnly: true},
	// Other values.
	{name: "NullFalse", write: put(vals{"a": &types.AttributeValueMemberNULL{Value: false}}), local: "must have the value of true", ours: "must have the value of true"},
	{name: "NilBinary", write: put(vals{"a": b(nil)}), local: "supplied AttributeValue is empty", ours: "supplied AttributeValue is empty"},
}

// TestAttachValidationAsOnDynamoDB sends each write to DynamoDB Local on its own, which
// refuses it with a ValidationException or takes it, and checks that both stores take the
// writes DynamoDB takes and refuse at Attach (CheckAttached) those it refuses, before the
// handler's work is done: an in-memory test then fails where production would. Writes
// DynamoDB takes commit on both, to the same item.
func TestAttachValidationAsOnDynamoDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := dynamotest.Client(t)
	mem := dynamomem.New()
	onLocal, inMem := validationTables{}, validationTables{}
	for _, typ := range []types.ScalarAttributeType{"S", "N", "B"} {
		onLocal[typ] = dynamotest.CreateTable(t, client, keyTable(typ))
		_, err := mem.CreateTable(ctx, keyTable(typ))
		require.NoError(t, err)
		inMem[typ] = *keyTable(typ).TableName
	}
	backends := []struct {
		name   string
		store  idemstore.Store
		tables validationTables
		get    func(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	}{
		{"DynamoDBLocal", dynamotest.NewStore(t), onLocal, client.GetItem},
		{"MemStore", mem, inMem, mem.GetItem},
	}
	for _, tc := range validationCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			refused := tc.local != ""
			_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
				TransactItems: []types.TransactWriteItem{tc.write(onLocal, "direct-"+tc.name)}})
			if refused {
				var apiErr smithy.APIError
				require.ErrorAs(t, err, &apiErr, "DynamoDB Local refuses it")
				assert.Equal(t, "ValidationException", apiErr.ErrorCode())
				assert.Contains(t, strings.ToLower(apiErr.ErrorMessage()), strings.ToLower(tc.local))
			} else {
				require.NoError(t, err, "DynamoDB Local takes it")
			}

			items := map[string]string{}
			for _, be := range backends {
				w := tc.write(be.tables, "attached-"+tc.name)
				checked := be.store.(idemstore.AttachChecker).CheckAttached([]any{w})
				storeRefuses := refused && !(tc.schemaOnly && be.name == "DynamoDBLocal")
				if storeRefuses {
					require.Error(t, checked, "%s: CheckAttached refuses it", be.name)
					assert.Contains(t, strings.ToLower(checked.Error()), strings.ToLower(tc.ours), be.name)
				} else {
					require.NoError(t, checked, "%s: CheckAttached takes it", be.name)
				}

				g, err := idem.New(be.store, "validation")
				require.NoError(t, err)
				var attachErr error
				_, _, err = idem.Do(ctx, g, idem.Request{Key: tc.name}, func(ctx context.Context) (int, error) {
					attachErr = dynamo.Attach(ctx, w)
					return 1, attachErr
				})
				switch {
				case storeRefuses:
					require.ErrorIs(t, attachErr, idemstore.ErrInvalidAttach, "%s: refused at Attach", be.name)
				case refused:
					require.NoError(t, attachErr, be.name)
					require.ErrorIs(t, err, idemstore.ErrNotCommitted, "%s: DynamoDB refuses the completion", be.name)
				default:
					require.NoError(t, err, "%s: committed", be.name)
					if w.Put != nil {
						out, err := be.get(ctx, &dynamodb.GetItemInput{TableName: w.Put.TableName,
							Key: vals{"pk": w.Put.Item["pk"]}, ConsistentRead: aws.Bool(true)})
						require.NoError(t, err)
						items[be.name] = canonical(&types.AttributeValueMemberM{Value: out.Item})
					}
				}
			}
			assert.Equal(t, items["DynamoDBLocal"], items["MemStore"], "the same item on both")
		})
	}
}

// canonical writes v so that equal values read the same: numbers as exact fractions, sets
// and maps in order.
func canonical(v types.AttributeValue) string {
	num := func(x string) string {
		r, ok := new(big.Rat).SetString(x)
		if !ok {
			return "N?" + x
		}
		return r.RatString()
	}
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return fmt.Sprintf("S:%q", v.Value)
	case *types.AttributeValueMemberN:
		return "N:" + num(v.Value)
	case *types.AttributeValueMemberB:
		return "B:" + hex.EncodeToString(v.Value)
	case *types.AttributeValueMemberSS:
		return fmt.Sprintf("SS:%q", slices.Sorted(slices.Values(v.Value)))
	case *types.AttributeValueMemberNS:
		out := make([]string, len(v.Value))
		for i, x := range v.Value {
			out[i] = num(x)
		}
		return fmt.Sprintf("NS:%v", slices.Sorted(slices.Values(out)))
	case *types.AttributeValueMemberBS:
		out := make([]string, len(v.Value))
		for i, x := range v.Value {
			out[i] = hex.EncodeToString(x)
		}
		return fmt.Sprintf("BS:%v", slices.Sorted(slices.Values(out)))
	case *types.AttributeValueMemberL:
		out := make([]string, len(v.Value))
		for i, x := range v.Value {
			out[i] = canonical(x)
		}
		return "L:[" + strings.Join(out, " ") + "]"
	case *types.AttributeValueMemberM:
		var out []string
		for _, k := range slices.Sorted(maps.Keys(v.Value)) {
			out = append(out, k+"="+canonical(v.Value[k]))
		}
		return "M:{" + strings.Join(out, " ") + "}"
	}
	return fmt.Sprintf("%T", v)
}
