package idem_test

import (
	"context"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/lambdawrap"
	"github.com/idemkit/idem/sqs"
)

// Receipt is what charge returns.
type Receipt struct {
	PaymentID string `json:"payment_id"`
}

func charge(context.Context, []byte) (Receipt, error) { return Receipt{PaymentID: "pay_1"}, nil }

func createOrderHTTP(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
}

func credit(context.Context, events.SQSMessage) error { return nil }

// The README's 30-second tour: one guard over DynamoDB, used by a plain function, an API
// Gateway handler and an SQS consumer. It needs AWS, so it claims no output.
func Example_tour() {
	tour := func(ctx context.Context, cfg aws.Config, paymentID string, body []byte) error {
		store, err := dynamo.New(dynamodb.NewFromConfig(cfg), "idempotency")
		if err != nil {
			return err
		}
		guard, err := idem.New(store, "charge", idem.WithExpiry(24*time.Hour))
		if err != nil {
			return err
		}

		// Any function: run at most once per key, replay the stored result afterwards.
		receipt, replayed, err := idem.Do(ctx, guard, idem.Request{Key: paymentID, Fingerprint: body},
			func(ctx context.Context) (Receipt, error) { return charge(ctx, body) })
		if err != nil {
			return err
		}

		// An API Gateway HTTP API function, guarded by its Idempotency-Key header.
		handler, err := lambdawrap.HTTPAPI(guard, createOrderHTTP)
		if err != nil {
			return err
		}
		lambda.Start(handler)

		// An SQS function: partial batch failures, one run per message key.
		batch, err := sqs.New(guard, credit)
		if err != nil {
			return err
		}
		lambda.Start(batch.Handle)

		// Inside a guarded function: the business write commits with the record, or neither does.
		err = dynamo.Attach(ctx, types.TransactWriteItem{Update: &types.Update{
			TableName:        aws.String("ledger"),
			Key:              map[string]types.AttributeValue{"account_id": &types.AttributeValueMemberS{Value: "acct-1"}},
			UpdateExpression: aws.String("ADD balance_cents :n"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":n": &types.AttributeValueMemberN{Value: "1250"},
			},
		}})
		_, _ = receipt, replayed
		return err
	}
	_ = tour
}
