package ebpub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/ebpub"
)

// ExampleNew publishes an event to an event bus under the source "com.example.orders";
// a relay (pgstore/pgoutbox, or the DynamoDB Streams relay) calls Publish with the
// outbox's committed events.
func ExampleNew() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	pub, err := ebpub.New(eventbridge.NewFromConfig(cfg), ebpub.WithSource("com.example.orders"))
	if err != nil {
		log.Fatal(err)
	}
	errs := pub.Publish(ctx, []outbox.Message{{ID: "0193b6f0-7c1e-7d2a-9a51-3f0c2b7e4d10", OutboxEvent: outbox.Event{
		Destination: "orders", OrderingKey: "customer-42", Type: "OrderPlaced", Payload: []byte(`{"order":"ord-1"}`),
	}}})
	fmt.Println(errs)
}

// Example_consumer closes the loop in a Lambda function that a rule targets: EventBridge
// gives each PutEvents entry a new event id, so the function keys on the outbox event id
// in the detail (detail.idempotencyKey). The relay publishes at least once; here the same
// event arrives twice, as two EventBridge events, and takes effect once.
func Example_consumer() {
	guard, err := idem.New(memstore.New(), "ship-order")
	if err != nil {
		log.Fatal(err)
	}
	handle := func(ctx context.Context, ev events.EventBridgeEvent) error {
		var detail outbox.Envelope
		if err := json.Unmarshal(ev.Detail, &detail); err != nil {
			return err
		}
		_, _, err := idem.Do(ctx, guard, idem.Request{Key: detail.IdempotencyKey}, func(ctx context.Context) (struct{}, error) {
			fmt.Println("shipping", string(detail.Data()))
			return struct{}{}, nil
		})
		return err
	}

	// What the relay publishes for one event, delivered twice (a publish retried after
	// its answer was lost).
	pub, err := ebpub.New(nil, ebpub.WithSource("com.example.orders"))
	if err != nil {
		log.Fatal(err)
	}
	entry := pub.Entry(outbox.Message{ID: "0193b6f0-7c1e-7d2a-9a51-3f0c2b7e4d10", OutboxEvent: outbox.Event{
		Destination: "orders", OrderingKey: "customer-42", Type: "OrderPlaced", Payload: []byte(`{"order":"ord-1"}`),
	}})
	for i := range 2 {
		ev := events.EventBridgeEvent{
			ID: fmt.Sprintf("eventbridge-id-%d", i), Source: aws.ToString(entry.Source),
			DetailType: aws.ToString(entry.DetailType), Detail: json.RawMessage(aws.ToString(entry.Detail)),
		}
		if err := handle(context.Background(), ev); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// shipping {"order":"ord-1"}
}

// ExampleWithSource sets the events' source; a message's eventbridge-source header
// overrides it for that event.
func ExampleWithSource() {
	pub, err := ebpub.New(nil, ebpub.WithSource("com.example.orders"))
	if err != nil {
		log.Fatal(err)
	}
	m := outbox.Message{ID: "0193b6f0-7c1e-7d2a-9a51-3f0c2b7e4d10", OutboxEvent: outbox.Event{
		Destination: "orders", OrderingKey: "customer-42", Type: "OrderPlaced",
	}}
	fmt.Println(aws.ToString(pub.Entry(m).Source))
	m.Headers = map[string]string{ebpub.SourceHeader: "com.example.billing"}
	fmt.Println(aws.ToString(pub.Entry(m).Source))
	// Output:
	// com.example.orders
	// com.example.billing
}
