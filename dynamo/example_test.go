package dynamo_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
)

type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount_cents"`
}

// A guarded handler creates an order at most once per idempotency key, and writes the order
// row in the same transaction as the completed idempotency record.
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg)
	store, err := dynamo.New(client, os.Getenv("IDEMPOTENCY_TABLE"))
	if err != nil {
		log.Fatal(err)
	}
	guard, err := idem.New(store, "create-order")
	if err != nil {
		log.Fatal(err)
	}

	req := idem.Request{Key: "order-7f3a", Fingerprint: []byte(`{"amount_cents":1299}`)}
	o, replayed, err := idem.Do(ctx, guard, req, func(ctx context.Context) (order, error) {
		o := order{ID: "o-42", Amount: 1299}
		return o, dynamo.Attach(ctx, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(os.Getenv("ORDERS_TABLE")),
			Item: map[string]types.AttributeValue{
				"id":           &types.AttributeValueMemberS{Value: o.ID},
				"amount_cents": &types.AttributeValueMemberN{Value: fmt.Sprint(o.Amount)},
			},
			ConditionExpression: aws.String("attribute_not_exists(id)"),
		}})
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(o.ID, replayed)
}

func ExampleNew() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store, err := dynamo.New(dynamodb.NewFromConfig(cfg), "idempotency")
	if err != nil {
		log.Fatal(err)
	}
	guard, err := idem.New(store, "create-order")
	if err != nil {
		log.Fatal(err)
	}
	_ = guard
}

// A ledger entry is credited with a non-idempotent ADD; attached to the completion, it is
// applied exactly once however often the message is delivered.
func ExampleAttach() {
	credit := func(ctx context.Context, account string, cents int) (int, error) {
		return cents, dynamo.Attach(ctx, types.TransactWriteItem{Update: &types.Update{
			TableName:                 aws.String("ledger"),
			Key:                       map[string]types.AttributeValue{"account_id": &types.AttributeValueMemberS{Value: account}},
			UpdateExpression:          aws.String("ADD balance_cents :n"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: fmt.Sprint(cents)}},
		}})
	}
	var guard *idem.Guard // from idem.New over a dynamo.Store
	_, _, err := idem.Do(context.Background(), guard, idem.Request{Key: "msg-1"}, func(ctx context.Context) (int, error) {
		return credit(ctx, "acct-1", 500)
	})
	if err != nil {
		log.Print(err)
	}
}

// Records with the Powertools attribute names except the partition key, which an existing
// table calls "pk".
func ExampleWithAttributes() {
	var client *dynamodb.Client // from dynamodb.NewFromConfig
	store, err := dynamo.New(client, "idempotency", dynamo.WithAttributes(dynamo.Attributes{ID: "pk"}))
	if err != nil {
		log.Fatal(err)
	}
	_ = store
}

// Records in a single-table design: partition key "PK" holds "IDEMPOTENCY" for all of them,
// and the sort key "SK" holds each record's key.
func ExampleWithSortKey() {
	var client *dynamodb.Client // from dynamodb.NewFromConfig
	store, err := dynamo.New(client, "app",
		dynamo.WithAttributes(dynamo.Attributes{ID: "PK"}),
		dynamo.WithSortKey("SK", "IDEMPOTENCY"),
	)
	if err != nil {
		log.Fatal(err)
	}
	_ = store
}

// An HTTP API whose responses are a few KB and rarely retried: keeping results up to 8 KB
// inline saves the round trip a result kept apart costs when it is stored and replayed,
// and makes each replay of such a result cost up to 8 write units instead of 1 plus its
// read.
func ExampleWithInlineLimit() {
	var client *dynamodb.Client // from dynamodb.NewFromConfig
	store, err := dynamo.New(client, "idempotency", dynamo.WithInlineLimit(8<<10))
	if err != nil {
		log.Fatal(err)
	}
	_ = store
}

// A table for local runs, against DynamoDB Local on port 8000.
func ExampleCreateTable() {
	ctx := context.Background()
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://127.0.0.1:8000"),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local"}, nil
		}),
	})
	if err := dynamo.CreateTable(ctx, client, "idempotency"); err != nil {
		log.Fatal(err)
	}
}
