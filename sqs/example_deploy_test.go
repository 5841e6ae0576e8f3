package sqs_test

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/sqs"
)

// The package documentation's usage: an SQS consumer over DynamoDB. It starts Lambda, so
// it claims no output.
func Example_deploy() {
	credit := func(context.Context, string) error { return nil }
	deploy := func(ddb dynamo.API) error {
		store, err := dynamo.New(ddb, os.Getenv("IDEMPOTENCY_TABLE"))
		if err != nil {
			return err
		}
		guard, err := idem.New(store, "credit-account")
		if err != nil {
			return err
		}
		h, err := sqs.New(guard, func(ctx context.Context, m events.SQSMessage) error {
			return credit(ctx, m.Body) // attach its DynamoDB write with dynamo.Attach
		})
		if err != nil {
			return err
		}
		lambda.Start(h.Handle)
		return nil
	}
	_ = deploy
}
