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

// completions counts a memstore's single and batch completions.
type completions struct {
	*memstore.Store
	single, many atomic.Int64
}

func (c *completions) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	c.single.Add(1)
	return c.Store.Complete(ctx, rec, attached)
}

func (c *completions) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	c.many.Add(1)
	return c.Store.CompleteMany(ctx, recs)
}

// With a batch deadline, the handlers' contexts end by it and the outcomes of a batch are
// recorded together; without one, each outcome is recorded on its own. Either way each
// message runs once and is acknowledged.
func TestBatchDeadline(t *testing.T) {
	for _, d := range []time.Duration{0, time.Minute} {
		t.Run(fmt.Sprint(d), func(t *testing.T) {
			queue, _ := declare(t)
			const n = 30
			var msgs []amqp.Publishing
			for i := range n {
				msgs = append(msgs, message(fmt.Sprint("d", i)))
			}
			publish(t, queue, msgs...)
			store := &completions{Store: memstore.New()}
			var seen batches
			fx := newEffects()
			var withDeadline atomic.Int64
			start := time.Now()
			c, err := rabbitconsumer.New(newGuard(t, store, idem.WithHooks(seen.hooks())), queue, func(ctx context.Context, d amqp.Delivery) error {
				if end, ok := ctx.Deadline(); ok && end.Before(start.Add(time.Minute+time.Second)) {
					withDeadline.Add(1)
				}
				fx.add(d.MessageId)
				return nil
			}, rabbitconsumer.WithBatchDeadline(d), rabbitconsumer.WithPrefetch(n))
			require.NoError(t, err)
			_, stop := consume(t, c)
			eventually(t, time.Minute, func() bool { return seen.settled() == n }, "all acknowledged")
			stop()
			drained(t, queue)
			assert.Equal(t, n, fx.total())
			if d == 0 {
				assert.Zero(t, withDeadline.Load(), "a handler's context had a deadline")
				assert.Equal(t, int64(n), store.single.Load(), "each outcome recorded on its own")
				assert.Zero(t, store.many.Load())
				return
			}
			assert.Equal(t, int64(n), withDeadline.Load(), "every handler's context ends by the batch deadline")
			assert.Positive(t, store.many.Load(), "no batch recorded its outcomes together")
			assert.Less(t, store.single.Load(), int64(n))
		})
	}
}
