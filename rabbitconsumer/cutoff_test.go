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

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/rabbitconsumer"
)

// Whether a handler was cut off is read from the cause of its context, not from its error.
// Under DeadLetter: a handler whose context is live but which returns an error wrapping
// idem.ErrLeaseLost (of a guarded step of its own) failed, and is dead-lettered; one whose
// context the batch deadline ended but which returns an error of its own was cut off, and
// is put back and runs again.
func TestCutOffIsTheCauseNotTheError(t *testing.T) {
	t.Run("live context, lease-lost error", func(t *testing.T) {
		queue, dlq := declare(t)
		fx := newEffects()
		c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(_ context.Context, d amqp.Delivery) error {
			fx.start(d.MessageId)
			return fmt.Errorf("reserve stock: %w", idem.ErrLeaseLost)
		}, rabbitconsumer.WithFailurePolicy(rabbitconsumer.DeadLetter), rabbitconsumer.WithRequeueDelay(50*time.Millisecond))
		require.NoError(t, err)
		publish(t, queue, message("said-1"))
		_, stop := consume(t, c)
		eventually(t, time.Minute, func() bool { return ready(t, dlq) == 1 || fx.started("said-1") > 1 },
			"dead-lettered or run again")
		stop()
		assert.Equal(t, 1, ready(t, dlq), "a handler's own error was taken for a cut-off")
		assert.Equal(t, 1, fx.started("said-1"))
		drained(t, queue)
	})
	t.Run("ended context, own error", func(t *testing.T) {
		queue, dlq := declare(t)
		fx := newEffects()
		c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(ctx context.Context, d amqp.Delivery) error {
			fx.start(d.MessageId)
			if fx.started(d.MessageId) == 1 {
				<-ctx.Done() // the batch deadline
				return errors.New("write aborted")
			}
			fx.add(d.MessageId)
			return nil
		}, rabbitconsumer.WithBatchDeadline(time.Second), rabbitconsumer.WithFailurePolicy(rabbitconsumer.DeadLetter),
			rabbitconsumer.WithRequeueDelay(50*time.Millisecond))
		require.NoError(t, err)
		publish(t, queue, message("cut-1"))
		_, stop := consume(t, c)
		eventually(t, time.Minute, func() bool { return fx.get("cut-1") == 1 || ready(t, dlq) == 1 },
			"run again or dead-lettered")
		stop()
		assert.Zero(t, ready(t, dlq), "a cut-off handler dead-lettered")
		assert.Equal(t, 1, fx.get("cut-1"))
		drained(t, queue)
	})
}
