package kafkaconsumer_test

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/kafkaconsumer"
	"github.com/idemkit/idem/memstore"
)

// A consumer of topic credits. Its producer wrote event e1 twice (a retry at a new offset):
// both carry the Idempotency-Key header e1, so the credit is applied once. The offsets are
// committed past the three records, whose outcomes are recorded.
func Example() {
	cluster, _ := kfake.NewCluster(kfake.SeedTopics(1, "credits")) // brokers of your own in production
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	producer, _ := kgo.NewClient(kgo.SeedBrokers(brokers...))
	defer producer.Close()
	credit := func(event, amount string) *kgo.Record {
		return &kgo.Record{Topic: "credits", Key: []byte("acct-1"), Value: []byte(amount),
			Headers: []kgo.RecordHeader{{Key: "Idempotency-Key", Value: []byte(event)}}}
	}
	_ = producer.ProduceSync(context.Background(), credit("e1", "100"), credit("e2", "250"), credit("e1", "100")).FirstErr()

	apply := func(_ context.Context, value []byte) error {
		fmt.Println("credit", string(value))
		return nil
	}
	guard, err := idem.New(memstore.New(), "apply-credit") // dynamo.New or pgstore.New in production
	if err != nil {
		panic(err)
	}
	c, err := kafkaconsumer.New(guard, func(ctx context.Context, r *kgo.Record) error {
		return apply(ctx, r.Value) // attach its business write with idem.Attach
	}, []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumerGroup("credits-applier"),
		kgo.ConsumeTopics("credits"),
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := c.Poll(ctx) // c.Run(ctx) polls until ctx ends
	fmt.Println(rep.Ran, "ran,", rep.Duplicates, "duplicate,", "committed", rep.Committed, err)
	// Output:
	// credit 100
	// credit 250
	// 2 ran, 1 duplicate, committed [{credits 0 3}] <nil>
}
