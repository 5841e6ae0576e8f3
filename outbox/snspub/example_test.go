package snspub_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/snspub"
	"github.com/idemkit/idem/sqs"
)

// ExampleNew publishes an event to an SNS FIFO topic; a relay (pgstore/pgoutbox, or the
// DynamoDB Streams relay) calls Publish with the outbox's committed events.
func ExampleNew() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	pub := snspub.New(sns.NewFromConfig(cfg))
	errs := pub.Publish(ctx, []outbox.Message{{ID: "0193b6f0-7c1e-7d2a-9a51-3f0c2b7e4d10", OutboxEvent: outbox.Event{
		Destination: "arn:aws:sns:eu-west-1:123456789012:orders.fifo",
		OrderingKey: "customer-42", Type: "OrderPlaced", Payload: []byte(`{"order":"ord-1"}`),
	}}})
	fmt.Println(errs)
}

// Example_consumer closes the loop through an SQS queue subscribed to the topic with raw
// message delivery: SNS hands the message attributes on as SQS message attributes, so
// sqs.New with default options takes the Idempotency-Key attribute (the event id) as the
// key. The relay publishes at least once; here the same event arrives twice and takes
// effect once.
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

	// What the relay publishes for one event, delivered twice (a publish retried after
	// its answer was lost).
	const topic = "arn:aws:sns:eu-west-1:123456789012:orders"
	m := outbox.Message{ID: "0193b6f0-7c1e-7d2a-9a51-3f0c2b7e4d10", OutboxEvent: outbox.Event{
		Destination: topic, OrderingKey: "customer-42", Type: "OrderPlaced", Payload: []byte(`{"order":"ord-1"}`),
	}}
	entry := snspub.Entry("m0", topic, m)
	var batch events.SQSEvent
	for i := range 2 {
		attrs := map[string]events.SQSMessageAttribute{}
		for k, v := range entry.MessageAttributes {
			attrs[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue}
		}
		batch.Records = append(batch.Records, events.SQSMessage{
			MessageId: fmt.Sprintf("sqs-message-%d", i), Body: aws.ToString(entry.Message),
			MessageAttributes: attrs, EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:shipping",
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
