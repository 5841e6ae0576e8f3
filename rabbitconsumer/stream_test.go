package rabbitconsumer_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/rabbitconsumer"
)

// A stream queue (x-queue-type stream) is no queue for the consumer: the broker refuses
// basic.reject and basic.nack on it with a channel error (NOT_IMPLEMENTED, on the 3.10
// broker the tests run), so the first failure closes the channel, and Consume returns
// ErrChannelClosed with the broker's error, as the package documentation says.
func TestStreamQueueClosesTheChannelAtTheFirstFailure(t *testing.T) {
	_, ch := channel(t)
	queue := queueName(t)
	_, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-queue-type": "stream"})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, ch := channel(t)
		_, _ = ch.QueueDelete(queue, false, false, false)
	})
	fx := newEffects()
	c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(_ context.Context, d amqp.Delivery) error {
		fx.start(d.MessageId)
		if d.MessageId == "fails" {
			return errors.New("declined")
		}
		return nil
	}, rabbitconsumer.WithRequeueDelay(10*time.Millisecond))
	require.NoError(t, err)
	_, cch := channel(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Consume(ctx, cch) }()
	// A stream consumer reads from the next offset written after it subscribes: publish
	// probes until one arrives.
	probed := func() bool {
		for i := range 6 {
			if fx.started(fmt.Sprintf("probe-%d", i)) > 0 {
				return true
			}
		}
		return false
	}
	for i := 0; !probed(); i++ {
		require.Less(t, i, 6, "no probe reached the consumer")
		publish(t, queue, message(fmt.Sprintf("probe-%d", i)))
		time.Sleep(time.Second)
	}
	publish(t, queue, message("fails"))
	var cerr error
	select {
	case cerr = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Consume did not return after the failure")
	}
	require.ErrorIs(t, cerr, rabbitconsumer.ErrChannelClosed)
	var aerr *amqp.Error
	require.ErrorAs(t, cerr, &aerr)
	assert.Equal(t, amqp.NotImplemented, aerr.Code, "the broker's refusal: %v", aerr)
	assert.Equal(t, 1, fx.started("fails"))
}
