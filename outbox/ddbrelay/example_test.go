package ddbrelay_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/ddbrelay"
	"github.com/idemkit/idem/outbox/sqspub"
)

// Example: the relay on a batch of the outbox table's stream. A run's two events of one
// ordering key are published in the order they were recorded; the TTL deletion is
// skipped.
func Example() {
	guard, err := idem.New(memstore.New(), "outbox-relay") // dynamo.New(client, table) in production
	if err != nil {
		log.Fatal(err)
	}
	pub := outbox.PublisherFunc(func(_ context.Context, msgs []outbox.Message) []error {
		for _, m := range msgs {
			fmt.Println("publish", m.OrderingKey, m.Type)
		}
		return nil
	})
	relay, err := ddbrelay.New(guard, pub)
	if err != nil {
		log.Fatal(err)
	}
	resp, err := relay.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		insert("101", "customer-42", "e-2", "order-7f3a", 1), // the stream's order need not be the run's
		insert("102", "customer-42", "e-1", "order-7f3a", 0),
		removed("103", "customer-7", "e-0"),
	}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("failures:", len(resp.BatchItemFailures))
	// Output:
	// publish customer-42 Te-1
	// publish customer-42 Te-2
	// failures: 0
}

// Example_dynamoDB is the DynamoDB outbox end to end: the producer records an event in a
// guarded handler (it commits in the completion's transaction), the relay is the Lambda
// handler on the outbox table's stream publishing to SQS, and the consumer is sqs.New with
// default options (see package outbox/sqspub's consumer example).
func Example_dynamoDB() {
	ctx := context.Background()
	ddb := dynamodb.New(dynamodb.Options{Region: "eu-west-1"})

	// Producer: the order and its event commit together, once per request.
	store, err := dynamo.New(ddb, "idempotency", dynamo.WithOutboxTable("outbox"))
	if err != nil {
		log.Fatal(err)
	}
	orders, err := idem.New(store, "place-order")
	if err != nil {
		log.Fatal(err)
	}
	place := func(ctx context.Context) (string, error) {
		_, err := outbox.Record(ctx, outbox.Event{
			Destination: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo",
			OrderingKey: "customer-42", // group id on a FIFO queue
			Type:        "OrderPlaced",
			Payload:     []byte(`{"order":"ord-1"}`),
		})
		return "ord-1", err
	}
	_, _, _ = idem.Do(ctx, orders, idem.Request{Key: "order-7f3a"}, place)

	// Relay: the function on the outbox table's stream (see cmd/outbox-relay).
	relayGuard, err := idem.New(store, "outbox-relay")
	if err != nil {
		log.Fatal(err)
	}
	relay, err := ddbrelay.New(relayGuard, sqspub.New(awssqs.New(awssqs.Options{Region: "eu-west-1"})))
	if err != nil {
		log.Fatal(err)
	}
	_ = relay.Handle // lambda.Start(relay.Handle)
}
