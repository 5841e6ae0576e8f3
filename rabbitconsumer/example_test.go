package rabbitconsumer_test

import (
	"context"
	"fmt"
	"log"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/rabbitconsumer"
)

// A payment published twice (its publisher resent it after a lost confirm) is charged
// once; both deliveries are acknowledged once the outcome is recorded. In a service the
// store is DynamoDB, PostgreSQL or Redis, and Run runs until the service stops.
func Example() {
	url := broker.URL() // amqp://guest:guest@127.0.0.1:<port>/, the test's broker
	declareAndPublish(url, "payments", "pay-1", "pay-1")

	acked := make(chan int, 10)
	hooks := idem.Hooks{OnBatch: func(_ context.Context, ev idem.BatchEvent) { acked <- len(ev.Items) - ev.Failed }}

	guard, err := idem.New(memstore.New(), "charge-payment",
		idem.WithHeartbeat(10*time.Second), // long charges keep their claim
		idem.WithHooks(hooks))
	if err != nil {
		log.Fatal(err)
	}
	c, err := rabbitconsumer.New(guard, "payments", func(ctx context.Context, d amqp.Delivery) error {
		fmt.Printf("charge %s\n", d.Body) // the business effect, at most once per message ID
		return nil
	}, rabbitconsumer.WithFailurePolicy(rabbitconsumer.DeadLetter))
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx, url) }() // dials, consumes, reconnects until ctx ends

	for n := 0; n < 2; n += <-acked {
	}
	stop()
	fmt.Println("acknowledged 2, run:", <-done)
	// Output:
	// charge pay-1 amount=100
	// acknowledged 2, run: <nil>
}

// declareAndPublish declares queue and publishes a persistent payment for each ID.
func declareAndPublish(url, queue string, ids ...string) {
	conn, err := amqp.Dial(url)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		log.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		log.Fatal(err)
	}
	for _, id := range ids {
		dc, err := ch.PublishWithDeferredConfirm("", queue, false, false, amqp.Publishing{
			MessageId: id, DeliveryMode: amqp.Persistent, Body: []byte(id + " amount=100"),
		})
		if err != nil {
			log.Fatal(err)
		}
		if !dc.Wait() {
			log.Fatal("publish not confirmed")
		}
	}
}
