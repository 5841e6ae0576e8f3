package rabbitconsumer_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/rabbitconsumer"
)

// A message that may pass while it is in hand (here a store outage) is held,
// unacknowledged, and its claim tried again in the consumer until the store is back: it is
// never requeued, so the handler gets the first delivery (not redelivered, no delivery
// count on a quorum queue) and the delivery limit is not spent.
func TestHeldDeliveryRunsWithoutARequeue(t *testing.T) {
	_, ch := channel(t)
	queue := queueName(t)
	_, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{
		"x-queue-type": "quorum", "x-delivery-limit": 1,
	})
	require.NoError(t, err)
	store := storetest.NewFaulty(memstore.New())
	store.FailTimes("claim", errors.New("connection refused"), false, 3)
	var seen batches
	var (
		mu  sync.Mutex
		got []amqp.Delivery
	)
	c, err := rabbitconsumer.New(newGuard(t, store, idem.WithHooks(seen.hooks())), queue, func(_ context.Context, d amqp.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, d)
		return nil
	}, rabbitconsumer.WithRequeueDelay(20*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, message("held-1"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return seen.settled() == 1 }, "the message ran")
	stop()
	drained(t, queue)
	assert.Len(t, seen.failed("store"), 3, "the claim was not tried again in the consumer")
	require.Len(t, got, 1)
	assert.False(t, got[0].Redelivered, "the message was requeued")
	assert.NotContains(t, got[0].Headers, "x-delivery-count", "the message was requeued")
}

// A held delivery goes back to the queue, nacked with requeue, when the consumer stops.
func TestHeldDeliveryIsRequeuedWhenTheConsumerStops(t *testing.T) {
	queue, dlq := declare(t)
	store := storetest.NewFaulty(memstore.New())
	store.Fail("claim", errors.New("connection refused"), false)
	var seen batches
	c, err := rabbitconsumer.New(newGuard(t, store, idem.WithHooks(seen.hooks())), queue, func(context.Context, amqp.Delivery) error {
		return nil
	}, rabbitconsumer.WithRequeueDelay(time.Hour))
	require.NoError(t, err)
	publish(t, queue, message("held-2"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return len(seen.failed("store")) > 0 }, "the claim failed")
	stop()
	eventually(t, time.Minute, func() bool { return ready(t, queue) == 1 }, "the held message is back in the queue")
	assert.Zero(t, ready(t, dlq))
}

// Under the Requeue policy a failed handler's message is nacked with requeue, which a
// quorum queue counts: a message that always fails is dead-lettered at its delivery limit.
func TestRequeuePolicySpendsTheDeliveryLimit(t *testing.T) {
	const limit = 2
	_, ch := channel(t)
	queue := queueName(t)
	dlq := queue + ".dlq"
	_, err := ch.QueueDeclare(dlq, true, false, false, false, nil)
	require.NoError(t, err)
	_, err = ch.QueueDeclare(queue, true, false, false, false, amqp.Table{
		"x-queue-type": "quorum", "x-delivery-limit": limit,
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq,
	})
	require.NoError(t, err)
	fx := newEffects()
	c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(_ context.Context, d amqp.Delivery) error {
		fx.start(d.MessageId)
		return errors.New("declined")
	}, rabbitconsumer.WithRequeueDelay(10*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, message("poison-1"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return ready(t, dlq) == 1 }, "dead-lettered at the delivery limit")
	stop()
	drained(t, queue)
	assert.Equal(t, limit+1, fx.started("poison-1"), "delivered once and redelivered up to the limit")
}

// A documented limit: a nack with requeue (here the Requeue policy; cut-offs and held
// messages of a stopping consumer alike) returns a message to a bounded queue as a ready
// message, and a full queue with the default overflow (drop-head) drops its oldest ready
// message to make room: one of the two is dead-lettered without running.
func TestRequeueOnABoundedQueueDropsTheHead(t *testing.T) {
	_, ch := channel(t)
	queue := queueName(t)
	dlq := queue + ".dlq"
	_, err := ch.QueueDeclare(dlq, true, false, false, false, nil)
	require.NoError(t, err)
	_, err = ch.QueueDeclare(queue, true, false, false, false, amqp.Table{
		"x-max-length":           1,
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq,
	})
	require.NoError(t, err)
	var seen batches
	fx := newEffects()
	c, err := rabbitconsumer.New(newGuard(t, memstore.New(), idem.WithHooks(seen.hooks())), queue, func(_ context.Context, d amqp.Delivery) error {
		fx.start(d.MessageId)
		if d.MessageId == "a" && fx.started("a") == 1 {
			return errors.New("declined once")
		}
		fx.add(d.MessageId)
		return nil
	}, rabbitconsumer.WithPrefetch(1), rabbitconsumer.WithRequeueDelay(2*time.Second))
	require.NoError(t, err)
	publish(t, queue, message("a"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return len(seen.failed("handler")) > 0 }, "a failed")
	publish(t, queue, message("b")) // ready while a waits to be requeued: the queue is full
	eventually(t, time.Minute, func() bool { return ready(t, dlq) == 1 && fx.get("a")+fx.get("b") == 1 },
		"one message dropped, the other run")
	stop()
	drained(t, queue)
	assert.Equal(t, 1, ready(t, dlq))
	assert.Equal(t, 1, fx.get("a")+fx.get("b"))
}

// A delivery with a per-message TTL (expiration) whose claim meets a store failure is not
// held: the consumer cannot tell how much of its TTL is left, so it is nacked with requeue
// after the requeue delay, and the broker expires it then if its TTL has passed. One whose
// TTL has not passed comes back and runs once, redelivered.
func TestExpiringDeliveryIsRequeuedNotHeld(t *testing.T) {
	queue, dlq := declare(t)
	store := storetest.NewFaulty(memstore.New())
	store.FailTimes("claim", errors.New("connection refused"), false, 1)
	var held atomic.Int64
	defer rabbitconsumer.SetOnHold(func() { held.Add(1) })()
	var (
		mu  sync.Mutex
		got []amqp.Delivery
	)
	c, err := rabbitconsumer.New(newGuard(t, store), queue, func(_ context.Context, d amqp.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, d)
		return nil
	}, rabbitconsumer.WithRequeueDelay(20*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, amqp.Publishing{MessageId: "ttl-live-1", Body: []byte("body"), Expiration: "600000"})
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0
	}, "the message did not run")
	stop()
	drained(t, queue)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 1)
	assert.True(t, got[0].Redelivered, "the message was not requeued")
	assert.Zero(t, held.Load(), "the message was held")
	assert.Zero(t, ready(t, dlq))
}
