package rabbitconsumer_test

import (
	"context"
	"errors"
	"sync"
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

// A message that may pass later is put back by a confirmed copy, and the original is
// acknowledged only after the confirm. A consumer that dies in between leaves both the copy
// and the original (redelivered): the key runs once, and both are acknowledged.
//
// Schedule:
//  1. The store refuses every claim; the consumer receives "crash-1", the claim fails
//     (ReasonStore), and after the requeue delay it publishes a copy, confirmed.
//  2. Before the original is acknowledged, the store comes back and the consumer's
//     connection is closed: the broker requeues the original beside the copy.
//  3. A new consumer receives both; the handler runs once, the other replays.
func TestPutBackCrashLeavesADuplicateThatRunsOnce(t *testing.T) {
	queue, dlq := declare(t)
	store := storetest.NewFaulty(memstore.New())
	store.Fail("claim", errors.New("connection refused"), false)
	var seen batches
	fx := newEffects()
	guard := newGuard(t, store, idem.WithHooks(seen.hooks()))
	handler := func(_ context.Context, d amqp.Delivery) error {
		fx.start(d.MessageId)
		fx.add(d.MessageId)
		return nil
	}
	c, err := rabbitconsumer.New(guard, queue, handler, rabbitconsumer.WithRequeueDelay(50*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, message("crash-1"))

	conn, stop := consume(t, c)
	crashed := make(chan struct{})
	var once sync.Once
	defer rabbitconsumer.SetAfterPutBack(func() {
		once.Do(func() {
			store.Fail("claim", nil, false)
			_ = conn.Close() // the consumer dies before acknowledging the original
			close(crashed)
		})
	})()
	select {
	case <-crashed:
	case <-time.After(time.Minute):
		t.Fatal("no copy was put back")
	}
	stop()
	eventually(t, time.Minute, func() bool { return ready(t, queue) == 2 }, "the copy and the original are both in the queue")

	_, stop = consume(t, c)
	eventually(t, time.Minute, func() bool { return seen.settled() == 2 }, "both acknowledged")
	stop()
	drained(t, queue)
	drained(t, dlq)
	assert.Equal(t, 1, fx.started("crash-1"), "the handler ran for each copy")
	assert.Equal(t, 1, fx.get("crash-1"))
}

// A put-back copy reaches the handler as the original did: its exchange, routing key,
// message ID, headers and properties, and without the headers that carried them.
func TestPutBackCopyKeepsTheDelivery(t *testing.T) {
	queue, _ := declare(t)
	_, ch := channel(t)
	const exchange = "putback-topic"
	require.NoError(t, ch.ExchangeDeclare(exchange, "topic", false, true, false, false, nil))
	require.NoError(t, ch.QueueBind(queue, "orders.#", exchange, false, nil))
	require.NoError(t, ch.Confirm(false))
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, "orders.created", false, false, amqp.Publishing{
		MessageId: "kept-1", Body: []byte("body"), ContentType: "application/json", CorrelationId: "corr",
		Type: "created", AppId: "shop", Headers: amqp.Table{"tenant": "t1"}, DeliveryMode: amqp.Persistent,
	})
	require.NoError(t, err)
	ok, err := dc.WaitContext(context.Background())
	require.NoError(t, err)
	require.True(t, ok)

	store := storetest.NewFaulty(memstore.New())
	store.Fail("claim", errors.New("connection refused"), false)
	var (
		mu  sync.Mutex
		got []amqp.Delivery
	)
	c, err := rabbitconsumer.New(newGuard(t, store), queue, func(_ context.Context, d amqp.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, d)
		return nil
	}, rabbitconsumer.WithRequeueDelay(50*time.Millisecond))
	require.NoError(t, err)
	var puts int
	var putMu sync.Mutex
	defer rabbitconsumer.SetAfterPutBack(func() {
		putMu.Lock()
		defer putMu.Unlock()
		if puts++; puts == 2 { // put back twice: a copy of a copy
			store.Fail("claim", nil, false)
		}
	})()
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 }, "the copy ran")
	stop()
	drained(t, queue)
	d := got[0]
	assert.Equal(t, exchange, d.Exchange)
	assert.Equal(t, "orders.created", d.RoutingKey)
	assert.Equal(t, "kept-1", d.MessageId)
	assert.Equal(t, []byte("body"), d.Body)
	assert.Equal(t, "application/json", d.ContentType)
	assert.Equal(t, "corr", d.CorrelationId)
	assert.Equal(t, "created", d.Type)
	assert.Equal(t, "shop", d.AppId)
	assert.Equal(t, uint8(amqp.Persistent), d.DeliveryMode)
	assert.Equal(t, amqp.Table{"tenant": "t1"}, d.Headers)
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
