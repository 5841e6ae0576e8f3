package dynamomem_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/dynamo/dynamomem"
	"github.com/idemkit/idem/idemstore"
)

// paymentsTable is the handler's own table. The same input creates it in memory and in
// DynamoDB.
func paymentsTable() *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:            aws.String("payments"),
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
	}
}

// charge is the guarded work of a payment handler: it records the payment row with the
// completion, on condition that the row is new.
func charge(ctx context.Context, table, order string, cents int) (string, error) {
	id := "payment-" + order
	return id, dynamo.Attach(ctx, types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			"pk":    &types.AttributeValueMemberS{Value: id},
			"cents": &types.AttributeValueMemberN{Value: strconv.Itoa(cents)},
		},
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}})
}

// itemGetter reads a table: a *dynamodb.Client does, and so does a MemStore.
type itemGetter interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// testCharge tests charge on any store: a retry with the same key is replayed, the row is
// written once, and another key for the same order fails the row's condition and is
// released.
func testCharge(t *testing.T, store idemstore.Store, db itemGetter, table string) {
	ctx := context.Background()
	g, err := idem.New(store, "charge")
	if err != nil {
		t.Fatal(err)
	}
	pay := func(ctx context.Context) (string, error) { return charge(ctx, table, "o-1", 1250) }
	for range 2 {
		if id, _, err := idem.Do(ctx, g, idem.Request{Key: "k-1"}, pay); err != nil || id != "payment-o-1" {
			t.Fatalf("charge: %q, %v", id, err)
		}
	}
	if _, _, err := idem.Do(ctx, g, idem.Request{Key: "k-2"}, pay); !errors.Is(err, idem.ErrConditionFailed) {
		t.Fatalf("a second payment for o-1: %v, want ErrConditionFailed", err)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "payment-o-1"},
		},
	})
	if err != nil || out.Item == nil {
		t.Fatalf("the payment row: %v, %v", out, err)
	}
}

// A handler that attaches a DynamoDB write, tested in memory and on DynamoDB Local by one
// test function. In a _test.go file of your own:
//
//	func TestMain(m *testing.M) { os.Exit(dynamotest.Main(m)) }
//
//	func TestChargeInMemory(t *testing.T) {
//		store := dynamomem.New()
//		if _, err := store.CreateTable(context.Background(), paymentsTable()); err != nil {
//			t.Fatal(err)
//		}
//		testCharge(t, store, store, "payments")
//	}
//
//	func TestChargeOnDynamoDBLocal(t *testing.T) {
//		client := dynamotest.Client(t)
//		table := dynamotest.CreateTable(t, client, paymentsTable()) // "payments-<random>"
//		testCharge(t, dynamotest.NewStore(t), client, table)
//	}
//
// What the in-memory run sees, step by step:
func Example() {
	ctx := context.Background()
	store := dynamomem.New()
	if _, err := store.CreateTable(ctx, paymentsTable()); err != nil {
		panic(err)
	}
	g, err := idem.New(store, "charge")
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"k-1", "k-1", "k-2"} {
		id, replayed, err := idem.Do(ctx, g, idem.Request{Key: key}, func(ctx context.Context) (string, error) {
			return charge(ctx, "payments", "o-1", 1250)
		})
		fmt.Printf("%s: %s replayed=%t condition failed=%t\n", key, id, replayed, errors.Is(err, idem.ErrConditionFailed))
	}
	out, err := store.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String("payments"),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "payment-o-1"},
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("cents:", out.Item["cents"].(*types.AttributeValueMemberN).Value)
	// Output:
	// k-1: payment-o-1 replayed=false condition failed=false
	// k-1: payment-o-1 replayed=true condition failed=false
	// k-2: payment-o-1 replayed=false condition failed=true
	// cents: 1250
}
