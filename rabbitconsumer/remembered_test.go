package rabbitconsumer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/rabbitconsumer"
)

// A failure the guard remembers (idem.WithRememberFailures) is final: every redelivery
// gets idem.ErrFailed without running. Under the Requeue policy the first failure is
// requeued as a handler failure; the redelivery that meets the remembered failure is
// dead-lettered, not requeued forever.
func TestRememberedFailureIsDeadLettered(t *testing.T) {
	queue, dlq := declare(t)
	fx := newEffects()
	var seen batches
	guard := newGuard(t, memstore.New(), idem.WithHooks(seen.hooks()),
		idem.WithRememberFailures(func(error) bool { return true }))
	c, err := rabbitconsumer.New(guard, queue, func(_ context.Context, d amqp.Delivery) error {
		fx.start(d.MessageId)
		return errors.New("card declined")
	}, rabbitconsumer.WithRequeueDelay(50*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, message("declined-1"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return ready(t, dlq) == 1 || len(seen.failed("handler")) > 5 },
		"dead-lettered, or requeued again and again")
	stop()
	assert.Equal(t, 1, ready(t, dlq), "a remembered failure requeued again and again")
	assert.Equal(t, 1, fx.started("declined-1"), "the handler ran once; the failure was remembered")
	drained(t, queue)
}

// A handler's own error wrapping idem.ErrFailed (of a guarded step of its own) is its
// failure: under the Requeue policy it runs again.
func TestHandlerErrorWrappingFailedFollowsPolicy(t *testing.T) {
	queue, dlq := declare(t)
	fx := newEffects()
	c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(_ context.Context, d amqp.Delivery) error {
		fx.start(d.MessageId)
		if fx.started(d.MessageId) == 1 {
			return &idem.FailedError{}
		}
		fx.add(d.MessageId)
		return nil
	}, rabbitconsumer.WithRequeueDelay(50*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, message("own-1"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return fx.get("own-1") == 1 || ready(t, dlq) == 1 },
		"the message runs again or is dead-lettered")
	stop()
	assert.Zero(t, ready(t, dlq))
	assert.Equal(t, 1, fx.get("own-1"))
	drained(t, queue)
}
