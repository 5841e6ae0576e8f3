package kinesis_test

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/kinesis"
)

// The package documentation's usage: a Kinesis consumer over DynamoDB, keyed by the event
// ID in each record's data. It starts Lambda, so it claims no output.
func Example_deploy() {
	apply := func(context.Context, []byte) error { return nil }
	deploy := func(ddb dynamo.API) error {
		store, err := dynamo.New(ddb, os.Getenv("IDEMPOTENCY_TABLE"))
		if err != nil {
			return err
		}
		guard, err := idem.New(store, "apply-event")
		if err != nil {
			return err
		}
		h, err := kinesis.New(guard, func(ctx context.Context, r events.KinesisEventRecord) error {
			return apply(ctx, r.Kinesis.Data) // attach its DynamoDB write with dynamo.Attach
		}, kinesis.WithKeyJMESPath("event_id"))
		if err != nil {
			return err
		}
		lambda.Start(h.Handle)
		return nil
	}
	_ = deploy
}
