package outbox_test

import (
	"context"
	"fmt"
	"log"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/outbox"
)

// ExampleRecord records an event in a guarded handler: it commits with the completion,
// once, however often the request comes. memstore lists what committed; pgstore and
// dynamo commit it in the completion's transaction, and a relay publishes it.
func ExampleRecord() {
	ctx := context.Background()
	store := memstore.New()
	guard, err := idem.New(store, "place-order")
	if err != nil {
		log.Fatal(err)
	}
	for range 2 { // the client retries
		_, _, err := idem.Do(ctx, guard, idem.Request{Key: "order-7f3a"}, func(ctx context.Context) (string, error) {
			_, err := outbox.Record(ctx, outbox.Event{
				Destination: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders",
				OrderingKey: "customer-42", // this customer's events arrive in order
				Type:        "OrderPlaced",
				Payload:     []byte(`{"order":"ord-1","cents":1250}`),
			})
			return "ord-1", err
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	for _, m := range store.Outbox() {
		fmt.Println(m.Type, m.OrderingKey, string(m.Payload))
	}
	// Output:
	// OrderPlaced customer-42 {"order":"ord-1","cents":1250}
}
