package ddbrelay_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/ddbrelay"
	"github.com/idemkit/idem/outbox/sqspub"
	"github.com/idemkit/idem/sqs"
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
		// The stream's order need not be the run's (run e-1: its first event's id).
		insertRun("101", "customer-42", "e-2", "order-7f3a", "e-1", 1),
		insertRun("102", "customer-42", "e-1", "order-7f3a", "e-1", 0),
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

// Example_dynamoDB is the DynamoDB outbox end to end, as three Lambda functions: the
// producer records an event in a guarded handler (it commits in the completion's
// transaction, into the outbox table), the relay is the function on the outbox table's
// stream publishing to SQS (cmd/outbox-relay), and the consumer is sqs.New with default
// options, deduplicating on the event id. They start Lambda, so it claims no output.
func Example_dynamoDB() {
	ship := func(context.Context, string) error { return nil }
	produce := func(ctx context.Context, ddb dynamo.API) error {
		store, err := dynamo.New(ddb, os.Getenv("IDEMPOTENCY_TABLE"), dynamo.WithOutboxTable(os.Getenv("OUTBOX_TABLE")))
		if err != nil {
			return err
		}
		guard, err := idem.New(store, "place-order")
		if err != nil {
			return err
		}
		_, _, err = idem.Do(ctx, guard, idem.Request{Key: "order-7f3a"}, func(ctx context.Context) (string, error) {
			_, err := outbox.Record(ctx, outbox.Event{
				Destination: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo",
				OrderingKey: "customer-42", // the message group on a FIFO queue
				Type:        "OrderPlaced",
				Payload:     []byte(`{"order":"ord-1"}`),
			})
			return "ord-1", err
		})
		return err
	}
	relay := func(ddb dynamo.API, sqsClient sqspub.API) error {
		store, err := dynamo.New(ddb, os.Getenv("IDEMPOTENCY_TABLE"))
		if err != nil {
			return err
		}
		// The relay's records outlive every delivery of a stream record (24 hours; the
		// mapping's maximum record age, 6 hours in infra/template.yaml): see the package doc.
		guard, err := idem.New(store, "outbox-relay", idem.WithExpiry(48*time.Hour))
		if err != nil {
			return err
		}
		relay, err := ddbrelay.New(guard, sqspub.New(sqsClient))
		if err != nil {
			return err
		}
		lambda.Start(relay.Handle)
		return nil
	}
	consume := func(ddb dynamo.API) error {
		store, err := dynamo.New(ddb, os.Getenv("IDEMPOTENCY_TABLE"))
		if err != nil {
			return err
		}
		guard, err := idem.New(store, "ship-order")
		if err != nil {
			return err
		}
		consumer, err := sqs.New(guard, func(ctx context.Context, m events.SQSMessage) error {
			return ship(ctx, m.Body) // once per event id (the Idempotency-Key attribute)
		})
		if err != nil {
			return err
		}
		lambda.Start(consumer.Handle)
		return nil
	}
	_, _, _ = produce, relay, consume
}
