package dynamomem_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/dynamo/dynamomem"
	"github.com/idemkit/idem/dynamo/dynamotest"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/internal/ledgertest"
)

// itemAPI is what the tests read and seed business tables with: a *dynamodb.Client and a
// *dynamomem.Store both have it.
type itemAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// backend is an idempotency store and a business table beside it: in memory, or on
// DynamoDB Local.
type backend struct {
	name   string
	memory bool
	store  idemstore.Store
	api    itemAPI
	table  string
}

// ledgerTable is the business table of these tests: a string partition key "pk".
func ledgerTable() *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:            aws.String("ledger"),
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		BillingMode:          types.BillingModePayPerRequest,
	}
}

// eachBackend runs test on a MemStore and on DynamoDB Local (skipped under -short), each
// with its own ledger table.
func eachBackend(t *testing.T, test func(t *testing.T, b backend)) {
	t.Run("MemStore", func(t *testing.T) {
		t.Parallel()
		m := dynamomem.New()
		_, err := m.CreateTable(context.Background(), ledgerTable())
		require.NoError(t, err)
		test(t, backend{name: "MemStore", memory: true, store: m, api: m, table: "ledger"})
	})
	t.Run("DynamoDBLocal", func(t *testing.T) {
		t.Parallel()
		client := dynamotest.Client(t)
		table := dynamotest.CreateTable(t, client, ledgerTable())
		test(t, backend{name: "DynamoDBLocal", store: dynamotest.NewStore(t), api: client, table: table})
	})
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

// render writes an item as "attr=TYPE:value" pairs in order, comparable across backends.
func render(item map[string]types.AttributeValue) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(item)) {
		switch v := item[k].(type) {
		case *types.AttributeValueMemberS:
			parts = append(parts, k+"=S:"+v.Value)
		case *types.AttributeValueMemberN:
			parts = append(parts, k+"=N:"+v.Value)
		default:
			parts = append(parts, fmt.Sprintf("%s=%T", k, v))
		}
	}
	return strings.Join(parts, " ")
}

func (b backend) item(t *testing.T, pk string) string {
	t.Helper()
	out, err := b.api.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(b.table), Key: map[string]types.AttributeValue{"pk": s(pk)}, ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	return render(out.Item)
}

// TestSameHandlerOnEveryStore runs one payment handler, which attaches a Put conditional
// on the payment row being new, on the in-memory stand-in and on DynamoDB: a duplicate is
// replayed and the row written once; a second request for the same payment fails its
// condition with ErrConditionFailed, naming the write, and its key is released.
func TestSameHandlerOnEveryStore(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		g, err := idem.New(b.store, "pay")
		require.NoError(t, err)
		var runs atomic.Int32
		pay := func(order string) func(context.Context) (string, error) {
			return func(ctx context.Context) (string, error) {
				runs.Add(1)
				id := "payment-" + order
				return id, dynamo.Attach(ctx, types.TransactWriteItem{Put: &types.Put{
					TableName:           aws.String(b.table),
					Item:                map[string]types.AttributeValue{"pk": s(id), "amount": n("1250")},
					ConditionExpression: aws.String("attribute_not_exists(pk)"),
				}})
			}
		}

		for i := range 2 {
			id, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k-1"}, pay("o-1"))
			require.NoError(t, err)
			assert.Equal(t, "payment-o-1", id)
			assert.Equal(t, i == 1, replayed)
		}
		assert.EqualValues(t, 1, runs.Load(), "the duplicate is replayed")
		assert.Equal(t, "amount=N:1250 pk=S:payment-o-1", b.item(t, "payment-o-1"))

		_, _, err = idem.Do(ctx, g, idem.Request{Key: "k-2"}, pay("o-1"))
		require.ErrorIs(t, err, idem.ErrConditionFailed)
		var awe *dynamo.AttachedWriteError
		require.ErrorAs(t, err, &awe)
		assert.Equal(t, 0, awe.Index)
		assert.Equal(t, b.table, awe.Table)
		var tce *types.TransactionCanceledException
		assert.ErrorAs(t, err, &tce, "as DynamoDB answers")

		id, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k-2"}, pay("o-2"))
		require.NoError(t, err, "the key was released")
		assert.False(t, replayed)
		assert.Equal(t, "payment-o-2", id)
		assert.EqualValues(t, 3, runs.Load())
		assert.Equal(t, "amount=N:1250 pk=S:payment-o-1", b.item(t, "payment-o-1"), "the failed write changed nothing")
	})
}

// outcome is what a completion with attached writes comes to.
type outcome int

const (
	committed    outcome = iota
	condFailed           // ErrConditionFailed: nothing committed, key released
	notCommitted         // ErrNotCommitted: DynamoDB refused the writes when it ran them
	// refused: DynamoDB refuses the request (ErrNotCommitted at completion), MemStore
	// refuses the write at Attach (ErrInvalidAttach); nothing commits either way.
	refused
	// inMemoryOnlyRefused: DynamoDB commits it, MemStore does not evaluate it and says so
	// at Attach.
	inMemoryOnlyRefused
)

// TestAttachedWritesAsOnDynamoDB runs attached writes through a guard on both backends and
// checks each comes to the same outcome and the same items: the in-memory evaluation of
// conditions and updates against DynamoDB's own.
func TestAttachedWritesAsOnDynamoDB(t *testing.T) {
	t.Parallel()
	type vals = map[string]types.AttributeValue
	// Every case starts with the item "a" = {v: 5, s: "x"}; keys are the case's own.
	upd := func(pk, expr string, v vals) types.TransactWriteItem {
		return types.TransactWriteItem{Update: &types.Update{Key: vals{"pk": s(pk)}, UpdateExpression: aws.String(expr), ExpressionAttributeValues: v}}
	}
	check := func(pk, cond string, v vals) types.TransactWriteItem {
		return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{Key: vals{"pk": s(pk)}, ConditionExpression: aws.String(cond), ExpressionAttributeValues: v}}
	}
	condUpd := func(cond string, v vals) types.TransactWriteItem {
		w := upd("a", "SET flag = :flag", v)
		w.Update.ConditionExpression = aws.String(cond)
		w.Update.ExpressionAttributeValues[":flag"] = n("1")
		return w
	}
	cases := []struct {
		name   string
		writes []types.TransactWriteItem
		want   outcome
		items  map[string]string // pk -> rendered item after ("" for absent)
	}{
		{"PutIfAbsentNew", []types.TransactWriteItem{{Put: &types.Put{Item: vals{"pk": s("n"), "v": n("1")}, ConditionExpression: aws.String("attribute_not_exists(pk)")}}},
			committed, map[string]string{"n": "pk=S:n v=N:1"}},
		{"PutIfAbsentExists", []types.TransactWriteItem{{Put: &types.Put{Item: vals{"pk": s("a"), "v": n("9")}, ConditionExpression: aws.String("attribute_not_exists(pk)")}}},
			condFailed, map[string]string{"a": "pk=S:a s=S:x v=N:5"}},
		{"PutReplaces", []types.TransactWriteItem{{Put: &types.Put{Item: vals{"pk": s("a"), "w": n("2")}}}},
			committed, map[string]string{"a": "pk=S:a w=N:2"}},
		{"AddCreatesTheItem", []types.TransactWriteItem{upd("b", "ADD bal :n", vals{":n": n("5")})},
			committed, map[string]string{"b": "bal=N:5 pk=S:b"}},
		{"AddToExisting", []types.TransactWriteItem{upd("a", "ADD v :n", vals{":n": n("2")})},
			committed, map[string]string{"a": "pk=S:a s=S:x v=N:7"}},
		{"SetMinus", []types.TransactWriteItem{upd("a", "SET v = v - :n", vals{":n": n("1")})},
			committed, map[string]string{"a": "pk=S:a s=S:x v=N:4"}},
		{"SetPlusMissingAttribute", []types.TransactWriteItem{upd("a", "SET w = w + :n", vals{":n": n("1")})},
			notCommitted, map[string]string{"a": "pk=S:a s=S:x v=N:5"}},
		{"AddToAString", []types.TransactWriteItem{upd("a", "ADD s :n", vals{":n": n("1")})},
			notCommitted, map[string]string{"a": "pk=S:a s=S:x v=N:5"}},
		{"AddPastPrecision", []types.TransactWriteItem{upd("a", "ADD v :n", vals{":n": n("1E+38")})},
			notCommitted, map[string]string{"a": "pk=S:a s=S:x v=N:5"}},
		{"SumOverflows", []types.TransactWriteItem{upd("a", "SET w = :x + :x", vals{":x": n("5E+125")})},
			notCommitted, map[string]string{"a": "pk=S:a s=S:x v=N:5"}},
		{"DifferenceUnderflows", []types.TransactWriteItem{upd("a", "SET w = :x - :y", vals{":x": n("2E-130"), ":y": n("1.5E-130")})},
			notCommitted, map[string]string{"a": "pk=S:a s=S:x v=N:5"}},
		{"SumOfThirtyEightDigits", []types.TransactWriteItem{upd("a", "ADD v :n", vals{":n": n("1E+37")})},
			committed, map[string]string{"a": "pk=S:a s=S:x v=N:10000000000000000000000000000000000005"}},
		{"SetIfNotExists", []types.TransactWriteItem{upd("a", "SET z = if_not_exists(z, :n), v = if_not_exists(v, :n)", vals{":n": n("7")})},
			committed, map[string]string{"a": "pk=S:a s=S:x v=N:5 z=N:7"}},
		{"RemoveAndSet", []types.TransactWriteItem{upd("a", "REMOVE s SET q = :n", vals{":n": n("7")})},
			committed, map[string]string{"a": "pk=S:a q=N:7 v=N:5"}},
		{"LowerCaseKeywords", []types.TransactWriteItem{func() types.TransactWriteItem {
			w := upd("a", "set q = :n", vals{":n": n("7"), ":x": n("5"), ":y": s("x")})
			w.Update.ConditionExpression = aws.String("v = :x and s = :y")
			return w
		}()}, committed, map[string]string{"a": "pk=S:a q=N:7 s=S:x v=N:5"}},
		{"GreaterThan", []types.TransactWriteItem{condUpd("v > :x", vals{":x": n("3")})},
			committed, map[string]string{"a": "flag=N:1 pk=S:a s=S:x v=N:5"}},
		{"LessThanFails", []types.TransactWriteItem{condUpd("v < :x", vals{":x": n("3")})},
			condFailed, map[string]string{"a": "pk=S:a s=S:x v=N:5"}},
		{"MissingNotEqual", []types.TransactWriteItem{condUpd("nope <> :x", vals{":x": n("3")})},
			committed, map[string]string{"a": "flag=N:1 pk=S:a s=S:x v=N:5"}},
		{"MissingEqualFails", []types.TransactWriteItem{condUpd("nope = :x", vals{":x": n("3")})},
			condFailed, nil},
		{"NotMissingEqual", []types.TransactWriteItem{condUpd("NOT (nope = :x)", vals{":x": n("3")})},
			committed, nil},
		{"NumberEqualsStringFails", []types.TransactWriteItem{condUpd("v = :x", vals{":x": s("5")})},
			condFailed, nil},
		{"NumberNotEqualString", []types.TransactWriteItem{condUpd("v <> :x", vals{":x": s("5")})},
			committed, nil},
		{"NumbersEqualAsNumbers", []types.TransactWriteItem{condUpd("v = :x", vals{":x": n("5.0")})},
			committed, nil},
		{"OrderingAcrossTypesFails", []types.TransactWriteItem{condUpd("v < s", vals{})},
			condFailed, nil},
		{"Between", []types.TransactWriteItem{condUpd("v BETWEEN :lo AND :hi", vals{":lo": n("1"), ":hi": n("9")})},
			committed, nil},
		{"BetweenFails", []types.TransactWriteItem{condUpd("v BETWEEN :lo AND :hi", vals{":lo": n("6"), ":hi": n("9")})},
			condFailed, nil},
		{"In", []types.TransactWriteItem{condUpd("v IN (:x, :y)", vals{":x": n("4"), ":y": n("5")})},
			committed, nil},
		{"BeginsWith", []types.TransactWriteItem{condUpd("begins_with(s, :p)", vals{":p": s("x")})},
			committed, nil},
		{"BeginsWithANumberFails", []types.TransactWriteItem{condUpd("begins_with(v, :p)", vals{":p": s("5")})},
			condFailed, nil},
		{"AndOrParentheses", []types.TransactWriteItem{condUpd("attribute_exists(v) AND (s = :x OR v = :y)", vals{":x": s("no"), ":y": n("5")})},
			committed, nil},
		{"Delete", []types.TransactWriteItem{{Delete: &types.Delete{Key: vals{"pk": s("a")}, ConditionExpression: aws.String("attribute_exists(pk)")}}},
			committed, map[string]string{"a": ""}},
		{"DeleteAbsentFails", []types.TransactWriteItem{{Delete: &types.Delete{Key: vals{"pk": s("c")}, ConditionExpression: aws.String("attribute_exists(pk)")}}},
			condFailed, nil},
		{"AllOrNothing", []types.TransactWriteItem{upd("b", "ADD bal :n", vals{":n": n("5")}), check("a", "v = :x", vals{":x": n("6")})},
			condFailed, map[string]string{"b": ""}},
		{"AllOrNothingRuntime", []types.TransactWriteItem{upd("b", "ADD bal :n", vals{":n": n("5")}), upd("a", "SET w = w + :n", vals{":n": n("1")})},
			notCommitted, map[string]string{"b": ""}},
		{"TwoWritesOneItem", []types.TransactWriteItem{check("a", "attribute_exists(v)", nil), upd("a", "SET q = :n", vals{":n": n("1")})},
			refused, map[string]string{"a": "pk=S:a s=S:x v=N:5"}},
		{"ReservedWordBare", []types.TransactWriteItem{condUpd("status = :x", vals{":x": n("5")})},
			refused, nil},
		{"UnusedValue", []types.TransactWriteItem{condUpd("v = :x", vals{":x": n("5"), ":y": n("1")})},
			refused, nil},
		{"UpdateTheKey", []types.TransactWriteItem{upd("a", "SET pk = :z", vals{":z": s("z")})},
			refused, nil},
		{"BetweenBoundsReversed", []types.TransactWriteItem{condUpd("v BETWEEN :lo AND :hi", vals{":lo": n("9"), ":hi": n("1")})},
			refused, nil},
		{"ContainsNotInMemory", []types.TransactWriteItem{condUpd("contains(s, :x)", vals{":x": s("x")})},
			inMemoryOnlyRefused, nil},
	}
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		g, err := idem.New(b.store, "ledger")
		require.NoError(t, err)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				prefix := tc.name + "/"
				_, err := b.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(b.table),
					Item: vals{"pk": s(prefix + "a"), "v": n("5"), "s": s("x")}})
				require.NoError(t, err)
				writes := make([]types.TransactWriteItem, len(tc.writes))
				for i, w := range tc.writes {
					writes[i] = onTable(w, b.table, prefix)
				}
				var attachErr error
				_, _, err = idem.Do(ctx, g, idem.Request{Key: tc.name}, func(ctx context.Context) (int, error) {
					attachErr = dynamo.Attach(ctx, writes...)
					return 1, attachErr
				})
				want := tc.want
				switch {
				case want == refused && b.memory:
					require.ErrorIs(t, attachErr, idemstore.ErrInvalidAttach)
				case want == refused:
					want = notCommitted
				case want == inMemoryOnlyRefused && b.memory:
					require.ErrorIs(t, attachErr, idemstore.ErrInvalidAttach)
					assert.ErrorContains(t, attachErr, "not supported in memory")
				case want == inMemoryOnlyRefused:
					want = committed
				}
				if attachErr == nil {
					switch want {
					case committed:
						require.NoError(t, err)
					case condFailed:
						require.ErrorIs(t, err, idem.ErrConditionFailed)
						assert.NotErrorIs(t, err, idemstore.ErrNotCommitted)
					case notCommitted:
						require.ErrorIs(t, err, idemstore.ErrNotCommitted)
						assert.NotErrorIs(t, err, idem.ErrConditionFailed)
					}
				}
				for pk, want := range tc.items {
					assert.Equal(t, strings.ReplaceAll(want, "pk=S:", "pk=S:"+prefix), b.item(t, prefix+pk), "item %s", pk)
				}
				if want != committed {
					_, replayed, err := idem.Do(ctx, g, idem.Request{Key: tc.name}, func(context.Context) (int, error) { return 2, nil })
					require.NoError(t, err, "the key was released")
					assert.False(t, replayed)
				}
			})
		}
	})
}

// onTable returns w with its table set and its keys prefixed.
func onTable(w types.TransactWriteItem, table, prefix string) types.TransactWriteItem {
	key := func(k map[string]types.AttributeValue) map[string]types.AttributeValue {
		out := maps.Clone(k)
		if pk, ok := out["pk"].(*types.AttributeValueMemberS); ok {
			out["pk"] = s(prefix + pk.Value)
		}
		return out
	}
	switch {
	case w.Put != nil:
		p := *w.Put
		p.TableName, p.Item = aws.String(table), key(p.Item)
		w.Put = &p
	case w.Update != nil:
		u := *w.Update
		u.TableName, u.Key = aws.String(table), key(u.Key)
		w.Update = &u
	case w.Delete != nil:
		d := *w.Delete
		d.TableName, d.Key = aws.String(table), key(d.Key)
		w.Delete = &d
	case w.ConditionCheck != nil:
		c := *w.ConditionCheck
		c.TableName, c.Key = aws.String(table), key(c.Key)
		w.ConditionCheck = &c
	}
	return w
}

// TestStoreTables: the in-memory tables answer as DynamoDB's API does for what the
// tests use (CreateTable, GetItem, PutItem), and refuse a write to a table never created.
func TestStoreTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := dynamomem.New()
	_, err := m.CreateTable(ctx, ledgerTable())
	require.NoError(t, err)
	_, err = m.CreateTable(ctx, ledgerTable())
	var inUse *types.ResourceInUseException
	require.ErrorAs(t, err, &inUse, "created twice")
	_, err = m.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String("x")})
	require.Error(t, err, "an invalid name")

	out, err := m.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("ledger"), Key: map[string]types.AttributeValue{"pk": s("a")}})
	require.NoError(t, err)
	assert.Nil(t, out.Item)
	put := &dynamodb.PutItemInput{TableName: aws.String("ledger"), Item: map[string]types.AttributeValue{"pk": s("a"), "v": n("1.50")},
		ConditionExpression: aws.String("attribute_not_exists(pk)")}
	_, err = m.PutItem(ctx, put)
	require.NoError(t, err)
	_, err = m.PutItem(ctx, put)
	var ccf *types.ConditionalCheckFailedException
	require.ErrorAs(t, err, &ccf)
	out, err = m.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("ledger"), Key: map[string]types.AttributeValue{"pk": s("a")}})
	require.NoError(t, err)
	assert.Equal(t, "pk=S:a v=N:1.5", render(out.Item), "numbers as DynamoDB stores them")

	g, err := idem.New(m, "test")
	require.NoError(t, err)
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (int, error) {
		return 0, dynamo.Attach(ctx, types.TransactWriteItem{Put: &types.Put{TableName: aws.String("orders"), Item: map[string]types.AttributeValue{"pk": s("a")}}})
	})
	require.ErrorIs(t, err, idemstore.ErrInvalidAttach)
	assert.ErrorContains(t, err, `"orders"`)
	require.False(t, errors.Is(err, idem.ErrStore))
}

// TestStoreBehaviour runs the behaviour suite every store passes on the stand-in, with
// its attached-write tests on a ledger balance updated by DynamoDB writes (ADD, with a
// condition that fails on demand), through Do and through one-request batches.
func TestStoreBehaviour(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%t", batch), func(t *testing.T) {
			storetest.Run(t, storetest.Harness{
				Batch:    batch,
				NewStore: func(*testing.T) idemstore.Store { return dynamomem.New() },
				NewCounter: func(t *testing.T, store idemstore.Store) (func(context.Context, int, bool) error, func() int) {
					m := store.(*dynamomem.Store)
					_, err := m.CreateTable(context.Background(), ledgerTable())
					require.NoError(t, err)
					add := func(ctx context.Context, amount int, failCond bool) error {
						cond := "attribute_not_exists(blocked)"
						if failCond {
							cond = "attribute_exists(blocked)"
						}
						return dynamo.Attach(ctx, types.TransactWriteItem{Update: &types.Update{
							TableName:                 aws.String("ledger"),
							Key:                       map[string]types.AttributeValue{"pk": s("acct")},
							UpdateExpression:          aws.String("ADD balance :n"),
							ConditionExpression:       aws.String(cond),
							ExpressionAttributeValues: map[string]types.AttributeValue{":n": n(fmt.Sprint(amount))},
						}})
					}
					read := func() int {
						return ledgertest.Ledger{DB: m, Table: "ledger", Key: "pk", Attr: "balance"}.Balance(t, "acct")
					}
					return add, read
				},
			})
		})
	}
}
