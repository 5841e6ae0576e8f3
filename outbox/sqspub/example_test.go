package sqspub_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/sqspub"
	"github.com/idemkit/idem/sqs"
)

// Example_consumer closes the loop: the consumer is sqs.New with default options, which
// takes the Idempotency-Key attribute the publisher sets (the event id) as the key. The
// relay publishes at least once; here the same event arrives twice, as two SQS messages,
// and takes effect once.
func Example_consumer() {
	guard, err := idem.New(memstore.New(), "ship-order")
	if err != nil {
		log.Fatal(err)
	}
	consumer, err := sqs.New(guard, func(ctx context.Context, m events.SQSMessage) error {
		fmt.Println("shipping", m.Body)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	// What the relay sends for one event, delivered twice (a publish retried after its
	// answer was lost).
	m := outbox.Message{ID: "0193b6f0-7c1e-7d2a-9a51-3f0c2b7e4d10", OutboxEvent: outbox.Event{
		Destination: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders",
		OrderingKey: "customer-42", Type: "OrderPlaced", Payload: []byte(`{"order":"ord-1"}`),
	}}
	entry := sqspub.Entry("m0", m.Destination, m)
	var batch events.SQSEvent
	for i := range 2 {
		attrs := map[string]events.SQSMessageAttribute{}
		for k, v := range entry.MessageAttributes {
			attrs[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue}
		}
		batch.Records = append(batch.Records, events.SQSMessage{
			MessageId: fmt.Sprintf("sqs-message-%d", i), Body: aws.ToString(entry.MessageBody),
			MessageAttributes: attrs, EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:orders",
		})
	}
	resp, err := consumer.Handle(context.Background(), batch)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("failures:", len(resp.BatchItemFailures))
	// Output:
	// shipping {"order":"ord-1"}
	// failures: 0
}
