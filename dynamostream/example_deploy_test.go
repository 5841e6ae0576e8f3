package dynamostream_test

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/dynamostream"
)

// The package documentation's usage: a consumer of the orders table's stream over
// DynamoDB. It starts Lambda, so it claims no output.
func Example_deploy() {
	write := func(context.Context, string, map[string]events.DynamoDBAttributeValue) error { return nil }
	deploy := func(ddb dynamo.API) error {
		store, err := dynamo.New(ddb, os.Getenv("IDEMPOTENCY_TABLE"))
		if err != nil {
			return err
		}
		guard, err := idem.New(store, "project-order")
		if err != nil {
			return err
		}
		project := func(ctx context.Context, r events.DynamoDBEventRecord) error {
			return write(ctx, r.EventName, r.Change.NewImage) // attach it with dynamo.Attach
		}
		h, err := dynamostream.New(guard, project)
		if err != nil {
			return err
		}
		lambda.Start(h.Handle)
		return nil
	}
	_ = deploy
}
