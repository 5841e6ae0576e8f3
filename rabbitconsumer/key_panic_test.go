package rabbitconsumer_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/rabbitconsumer"
)

// A key function that panics on a message dead-letters that message without running it,
// as one that returns an error does, and the consumer goes on with the others: the panic
// does not crash the process at every redelivery.
func TestKeyFunctionPanicDeadLettersTheMessage(t *testing.T) {
	queue, dlq := declare(t)
	var seen batches
	var ran atomic.Int64
	c, err := rabbitconsumer.New(newGuard(t, memstore.New(), idem.WithHooks(seen.hooks())), queue,
		func(context.Context, amqp.Delivery) error {
			ran.Add(1)
			return nil
		},
		rabbitconsumer.WithKey(func(d amqp.Delivery) (string, error) {
			if strings.HasPrefix(d.MessageId, "bad") {
				panic("key function: cannot parse " + d.MessageId)
			}
			return d.MessageId, nil
		}))
	require.NoError(t, err)
	publish(t, queue, message("bad-1"), message("good-1"))
	_, stop := consume(t, c)
	eventually(t, 20*time.Second, func() bool { return ready(t, dlq) == 1 && ran.Load() == 1 },
		"the panicking key's message was not dead-lettered, or the other did not run")
	stop()
	assert.Equal(t, 0, ready(t, queue), "a message was left in the queue")
	failed := seen.failed("key")
	require.Len(t, failed, 1)
	assert.ErrorIs(t, failed[0].Err, rabbitconsumer.ErrKeyPanic)
}
