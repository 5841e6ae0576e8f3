package idem_test

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
)

// Order is what createOrder makes.
type Order struct {
	ID string `json:"id"`
}

func createOrder(context.Context, []byte) (Order, error) { return Order{ID: "ord_1"}, nil }

// A guard over DynamoDB, as the package documentation sketches it. It needs AWS
// credentials and a table, so it claims no output.
func Example_dynamo() {
	ctx := context.Background()
	key, body := "order-1", []byte(`{"sku":"A1"}`)
	run := func() error {
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return err
		}
		store, err := dynamo.New(dynamodb.NewFromConfig(cfg), "idempotency")
		if err != nil {
			return err
		}
		guard, err := idem.New(store, "create-order", idem.WithExpiry(24*time.Hour))
		if err != nil {
			return err
		}
		order, replayed, err := idem.Do(ctx, guard, idem.Request{Key: key, Fingerprint: body},
			func(ctx context.Context) (Order, error) { return createOrder(ctx, body) })
		_, _ = order, replayed
		return err
	}
	_ = run
}
