package kafkaconsumer_test

import (
	"context"
	"os"
	"os/signal"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/kafkaconsumer"
)

// The package documentation's usage: a service consuming topic credits in group
// credits-applier until it is interrupted. It needs brokers, so it claims no output.
func Example_service() {
	apply := func(context.Context, []byte) error { return nil }
	serve := func(store idemstore.Store) error {
		brokers := strings.Split(os.Getenv("KAFKA_BROKERS"), ",")
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		guard, err := idem.New(store, "apply-credit")
		if err != nil {
			return err
		}
		c, err := kafkaconsumer.New(guard, func(ctx context.Context, r *kgo.Record) error {
			return apply(ctx, r.Value) // attach its business write with idem.Attach
		}, []kgo.Opt{
			kgo.SeedBrokers(brokers...),
			kgo.ConsumerGroup("credits-applier"),
			kgo.ConsumeTopics("credits"),
		})
		if err != nil {
			return err
		}
		defer c.Close()
		return c.Run(ctx)
	}
	_ = serve
}
