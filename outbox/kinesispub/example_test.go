package kinesispub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	sdkkinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/kinesis"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/kinesispub"
)

// ExampleNew publishes an event to a stream; a relay (pgstore/pgoutbox, or the DynamoDB
// Streams relay) calls Publish with the outbox's committed events. The SDK's package is
// named kinesis like idem's consumer, so one of the two takes an alias.
func ExampleNew() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	pub := kinesispub.New(sdkkinesis.NewFromConfig(cfg))
	errs := pub.Publish(ctx, []outbox.Message{{ID: "0193b6f0-7c1e-7d2a-9a51-3f0c2b7e4d10", OutboxEvent: outbox.Event{
		Destination: "orders", OrderingKey: "customer-42", Type: "OrderPlaced", Payload: []byte(`{"order":"ord-1"}`),
	}}})
	fmt.Println(errs)
}

// Example_consumer closes the loop: the kinesis adapter keys each record on the event id
// in its data (kinesis.WithKeyJMESPath(outbox.EnvelopeKey)). The relay publishes at least
// once; here the same event arrives twice, under two sequence numbers, and takes effect
// once.
func Example_consumer() {
	guard, err := idem.New(memstore.New(), "ship-order")
	if err != nil {
		log.Fatal(err)
	}
	consumer, err := kinesis.New(guard, func(ctx context.Context, r events.KinesisEventRecord) error {
		var e outbox.Envelope
		if err := json.Unmarshal(r.Kinesis.Data, &e); err != nil {
			return err
		}
		fmt.Println("shipping", string(e.Data()))
		return nil
	}, kinesis.WithKeyJMESPath(outbox.EnvelopeKey))
	if err != nil {
		log.Fatal(err)
	}

	// What the relay publishes for one event, written twice (a publish retried after its
	// answer was lost).
	rec := kinesispub.Entry(outbox.Message{ID: "0193b6f0-7c1e-7d2a-9a51-3f0c2b7e4d10", OutboxEvent: outbox.Event{
		Destination: "orders", OrderingKey: "customer-42", Type: "OrderPlaced", Payload: []byte(`{"order":"ord-1"}`),
	}})
	var batch events.KinesisEvent
	for _, seq := range []string{"101", "102"} {
		batch.Records = append(batch.Records, events.KinesisEventRecord{
			EventID: "shardId-000000000000:" + seq, EventSource: "aws:kinesis",
			Kinesis: events.KinesisRecord{SequenceNumber: seq, PartitionKey: aws.ToString(rec.PartitionKey), Data: rec.Data},
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
