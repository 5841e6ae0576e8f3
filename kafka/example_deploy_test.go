package kafka_test

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/kafka"
)

// The package documentation's usage: an MSK consumer over DynamoDB, keyed by the
// idempotency-key header its producer sets. It starts Lambda, so it claims no output.
func Example_deploy() {
	apply := func(context.Context, []byte) error { return nil }
	deploy := func(ddb dynamo.API) error {
		store, err := dynamo.New(ddb, os.Getenv("IDEMPOTENCY_TABLE"))
		if err != nil {
			return err
		}
		guard, err := idem.New(store, "apply-order-event")
		if err != nil {
			return err
		}
		h, err := kafka.New(guard, func(ctx context.Context, r events.KafkaRecord) error {
			value, err := kafka.Value(r)
			if err != nil {
				return err
			}
			return apply(ctx, value) // attach its DynamoDB write with dynamo.Attach
		})
		if err != nil {
			return err
		}
		lambda.Start(h.Handle)
		return nil
	}
	_ = deploy
}
