package mq_test

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/mq"
)

// The package documentation's usage: a RabbitMQ consumer over DynamoDB, keyed by each
// message's messageId. It starts Lambda, so it claims no output.
func Example_deploy() {
	apply := func(context.Context, []byte) error { return nil }
	deploy := func(ddb dynamo.API) error {
		store, err := dynamo.New(ddb, os.Getenv("IDEMPOTENCY_TABLE"))
		if err != nil {
			return err
		}
		guard, err := idem.New(store, "apply-order")
		if err != nil {
			return err
		}
		h, err := mq.NewRabbitMQ(guard, func(ctx context.Context, m events.RabbitMQMessage) error {
			data, err := mq.Data(m.Data)
			if err != nil {
				return err
			}
			return apply(ctx, data) // attach its DynamoDB write with dynamo.Attach
		})
		if err != nil {
			return err
		}
		lambda.Start(h.Handle)
		return nil
	}
	_ = deploy
}
