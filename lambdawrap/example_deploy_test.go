package lambdawrap_test

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/lambdawrap"
)

// The package documentation's usage: a guard over DynamoDB, an HTTP API function guarded
// by its Idempotency-Key header, and any other event keyed by a field. It starts Lambda,
// so it claims no output.
func Example_deploy() {
	type Payment struct {
		PaymentID string `json:"payment_id"`
	}
	createOrder := func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
	}
	processPayment := func(context.Context, Payment) (string, error) { return "paid", nil }
	deploy := func(ddb dynamo.API) error {
		store, err := dynamo.New(ddb, "idempotency")
		if err != nil {
			return err
		}
		guard, err := idem.New(store, "create-order")
		if err != nil {
			return err
		}
		handler, err := lambdawrap.HTTPAPI(guard, createOrder)
		if err != nil {
			return err
		}
		lambda.Start(handler)
		return nil
	}
	wrap := func(guard *idem.Guard) error {
		key, err := lambdawrap.KeyFromJMESPath[Payment]("payment_id")
		if err != nil {
			return err
		}
		handler, err := lambdawrap.Wrap(guard, processPayment, key)
		if err != nil {
			return err
		}
		lambda.Start(handler)
		return nil
	}
	_, _ = deploy, wrap
}
