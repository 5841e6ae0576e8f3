package rabbitconsumer_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/rabbitconsumer"
)

// A completion the store refuses every time (idemstore.ErrNotCommitted) is held and run
// again in hand WithNotCommittedRetries times, without a requeue, then settled under the
// failure policy: under DeadLetter it runs n+1 times and is dead-lettered; with n = 0 it is
// dead-lettered after its first run.
func TestNotCommittedRetriesThenPolicy(t *testing.T) {
	for _, n := range []int{0, 2} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			queue, dlq := declare(t)
			fx := newEffects()
			var holds atomic.Int64
			defer rabbitconsumer.SetOnHold(func() { holds.Add(1) })()
			c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(ctx context.Context, d amqp.Delivery) error {
				fx.start(d.MessageId)
				return idem.Attach(ctx, func() error {
					return fmt.Errorf("%w: attached item over the store's size limit", idemstore.ErrNotCommitted)
				})
			}, rabbitconsumer.WithRequeueDelay(10*time.Millisecond), rabbitconsumer.WithNotCommittedRetries(n),
				rabbitconsumer.WithFailurePolicy(rabbitconsumer.DeadLetter))
			require.NoError(t, err)
			publish(t, queue, message("refused-1"))
			_, stop := consume(t, c)
			eventually(t, time.Minute, func() bool { return ready(t, dlq) == 1 }, "dead-lettered")
			stop()
			drained(t, queue)
			assert.Equal(t, n+1, fx.started("refused-1"), "runs")
			assert.Equal(t, int64(n), holds.Load(), "held between its runs")
		})
	}
}

// WithNotCommittedRetries refuses a negative count.
func TestWithNotCommittedRetriesRefusesNegative(t *testing.T) {
	_, err := rabbitconsumer.New(newGuard(t, memstore.New()), "q",
		func(context.Context, amqp.Delivery) error { return nil }, rabbitconsumer.WithNotCommittedRetries(-1))
	require.ErrorIs(t, err, idem.ErrInvalidOption)
	assert.Contains(t, err.Error(), "WithNotCommittedRetries")
}
