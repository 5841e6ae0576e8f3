package rabbitconsumer_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/internal/capture"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/rabbitconsumer"
)

// newGuard returns a guard on store for the operation "apply", with opts.
func newGuard(tb testing.TB, store idemstore.Store, opts ...idem.Option) *idem.Guard {
	tb.Helper()
	g, err := idem.New(store, "apply", append([]idem.Option{idem.WithScope("test")}, opts...)...)
	require.NoError(tb, err)
	return g
}

// Every message runs once per key, a publisher's resend (same ID, same body) included, and
// every delivery is acknowledged: the queue ends empty.
func TestEachKeyRunsOnceAndIsAcknowledged(t *testing.T) {
	queue, dlq := declare(t)
	var msgs []amqp.Publishing
	for i := range 40 {
		msgs = append(msgs, message(fmt.Sprint("m", i)))
		if i%4 == 0 { // resent by its publisher
			msgs = append(msgs, message(fmt.Sprint("m", i)))
		}
	}
	publish(t, queue, msgs...)
	fx := newEffects()
	var seen batches
	c, err := rabbitconsumer.New(newGuard(t, memstore.New(), idem.WithHooks(seen.hooks())), queue, func(_ context.Context, d amqp.Delivery) error {
		fx.add(d.MessageId)
		return nil
	}, rabbitconsumer.WithPrefetch(8), rabbitconsumer.WithRequeueDelay(50*time.Millisecond))
	require.NoError(t, err)
	_, stop := consume(t, c)
	// The resends are acknowledged too (replayed, or duplicates of their original in one
	// batch): nothing is left once the consumer stops.
	eventually(t, time.Minute, func() bool { return seen.settled() == len(msgs) }, "every delivery acknowledged")
	stop()
	drained(t, queue)
	drained(t, dlq)
	for i := range 40 {
		assert.Equal(t, 1, fx.get(fmt.Sprint("m", i)), "m%d", i)
	}
}

// A consumer killed mid-batch (its connection closed while its handler runs, nothing
// acknowledged) leaves its message to another consumer, which finds the key in flight and
// requeues it with a delay rather than run it; once the first run has recorded its
// outcome, the redelivery replays. The effect happens once and the message is not lost.
func TestKilledMidBatchKeyInFlightIsRequeued(t *testing.T) {
	queue, dlq := declare(t)
	store := memstore.New()
	fx := newEffects()
	entered, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	handler := func(_ context.Context, d amqp.Delivery) error {
		fx.start(d.MessageId)
		if first.CompareAndSwap(false, true) {
			close(entered)
			<-release // the consumer's connection is closed meanwhile
		}
		fx.add(d.MessageId)
		return nil
	}
	a, err := rabbitconsumer.New(newGuard(t, store), queue, handler)
	require.NoError(t, err)
	var seenB batches
	b, err := rabbitconsumer.New(newGuard(t, store, idem.WithHooks(seenB.hooks())), queue, handler,
		rabbitconsumer.WithRequeueDelay(200*time.Millisecond))
	require.NoError(t, err)

	publish(t, queue, message("order-1"))
	connA, _ := consume(t, a)
	<-entered
	_ = connA.Close() // killed: the delivery was not acknowledged, so the broker requeues it
	_, stopB := consume(t, b)
	eventually(t, time.Minute, func() bool { return len(seenB.failed("in_progress")) >= 2 },
		"B finds the key in flight, requeues it and meets it again")
	assert.Equal(t, 1, fx.started("order-1"), "B ran the handler of a key in flight")
	close(release) // A's run ends and records its outcome
	eventually(t, time.Minute, func() bool { return ready(t, queue) == 0 && seenB.last() == "replayed" }, "B replays the message")
	stopB()
	drained(t, queue)
	drained(t, dlq)
	assert.Equal(t, 1, fx.get("order-1"))
	assert.Equal(t, 1, fx.started("order-1"))
}

// A failed handler's message is requeued and runs again under the default policy, and is
// dead-lettered without running again under DeadLetter.
func TestFailurePolicy(t *testing.T) {
	for _, tc := range []struct {
		policy   rabbitconsumer.Policy
		runs     int
		deadLast bool
	}{
		{rabbitconsumer.Requeue, 2, false},
		{rabbitconsumer.DeadLetter, 1, true},
	} {
		t.Run(fmt.Sprint(tc.policy), func(t *testing.T) {
			queue, dlq := declare(t)
			publish(t, queue, message("pay-1"))
			fx := newEffects()
			c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(_ context.Context, d amqp.Delivery) error {
				fx.start(d.MessageId)
				if fx.started(d.MessageId) == 1 {
					return errors.New("card declined") // no effect
				}
				fx.add(d.MessageId)
				return nil
			}, rabbitconsumer.WithFailurePolicy(tc.policy), rabbitconsumer.WithRequeueDelay(50*time.Millisecond))
			require.NoError(t, err)
			_, stop := consume(t, c)
			eventually(t, time.Minute, func() bool { return fx.started("pay-1") == tc.runs }, "%d runs", tc.runs)
			if tc.deadLast {
				eventually(t, time.Minute, func() bool { return ready(t, dlq) == 1 }, "dead-lettered")
			} else {
				eventually(t, time.Minute, func() bool { return fx.get("pay-1") == 1 }, "the second run succeeds")
			}
			stop()
			drained(t, queue)
			assert.Equal(t, tc.runs, fx.started("pay-1"))
		})
	}
}

// A message without a message ID is keyed by the key header when set; without either it is
// dead-lettered and never runs.
func TestKeyFromIDThenHeaderElseDeadLetter(t *testing.T) {
	queue, dlq := declare(t)
	publish(t, queue,
		amqp.Publishing{Body: []byte("no key")},
		amqp.Publishing{Body: []byte("a"), Headers: amqp.Table{"event-id": "evt-1"}},
		amqp.Publishing{Body: []byte("a"), Headers: amqp.Table{"event-id": "evt-1"}}, // resent
		amqp.Publishing{Body: []byte("b"), MessageId: "msg-2", Headers: amqp.Table{"event-id": "ignored"}},
		amqp.Publishing{Body: []byte("c"), Headers: amqp.Table{"event-id": 7}},
	)
	fx := newEffects()
	var seen batches
	c, err := rabbitconsumer.New(newGuard(t, memstore.New(), idem.WithHooks(seen.hooks())), queue, func(_ context.Context, d amqp.Delivery) error {
		fx.add(string(d.Body))
		return nil
	}, rabbitconsumer.WithKeyHeader("event-id"), rabbitconsumer.WithRequeueDelay(50*time.Millisecond))
	require.NoError(t, err)
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return ready(t, dlq) == 2 }, "two dead-lettered")
	eventually(t, time.Minute, func() bool { return seen.settled() == 3 }, "three acknowledged")
	stop()
	drained(t, queue)
	assert.Equal(t, 1, fx.get("a"))
	assert.Equal(t, 1, fx.get("b"))
	assert.Equal(t, 0, fx.get("no key"))
	assert.Equal(t, 0, fx.get("c"))
}

// While the store is down, no handler runs and nothing is acknowledged: the batches report
// store failures wrapping idem.ErrStore and the messages come back; once it is up again
// each runs once.
func TestStoreDownNoAck(t *testing.T) {
	queue, dlq := declare(t)
	store := storetest.NewFaulty(memstore.New())
	down := errors.New("connection refused")
	store.Fail("claim", down, false)
	var seen batches
	var logs capture.Output
	fx := newEffects()
	guard := newGuard(t, store, idem.WithHooks(seen.hooks()), idem.WithLogger(logs.Logger()))
	c, err := rabbitconsumer.New(guard, queue, func(_ context.Context, d amqp.Delivery) error {
		fx.add(d.MessageId)
		return nil
	}, rabbitconsumer.WithRequeueDelay(50*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, message("a"), message("b"), message("c"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return len(seen.failed("store")) >= 6 }, "store failures reported")
	for _, it := range seen.failed("store") {
		require.ErrorIs(t, it.Err, idem.ErrStore)
		require.ErrorIs(t, it.Err, down)
	}
	// An operator reading at WARN learns which message failed and why.
	assert.Regexp(t, `"level":"WARN".*"msg":"rabbitmq: message failed".*"message_id":"[abc]".*"reason":"store".*connection refused`, logs.String())
	assert.Zero(t, fx.total(), "a handler ran without its claim")
	store.Fail("claim", nil, false)
	eventually(t, time.Minute, func() bool { return fx.total() == 3 }, "each runs once the store is back")
	eventually(t, time.Minute, func() bool { return ready(t, queue) == 0 }, "queue drained")
	stop()
	drained(t, queue)
	drained(t, dlq)
	for _, k := range []string{"a", "b", "c"} {
		assert.Equal(t, 1, fx.get(k), k)
	}
}

// A handler that outlives its lease keeps it with the guard's heartbeat: a second delivery
// of its message (a publisher's resend) meets the key in flight and is requeued until the
// first run completes, then replays; the handler starts once.
func TestLongHandlerKeepsLease(t *testing.T) {
	queue, dlq := declare(t)
	store := memstore.New()
	fx := newEffects()
	handler := func(ctx context.Context, d amqp.Delivery) error {
		fx.start(d.MessageId)
		select {
		case <-time.After(2500 * time.Millisecond): // past the 1 s lease
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		fx.add(d.MessageId)
		return nil
	}
	var seen batches
	opts := []idem.Option{idem.WithLease(time.Second), idem.WithLeaseMargin(200 * time.Millisecond),
		idem.WithHeartbeat(300 * time.Millisecond), idem.WithHooks(seen.hooks())}
	for range 2 { // each takes one delivery of the two
		c, err := rabbitconsumer.New(newGuard(t, store, opts...), queue, handler,
			rabbitconsumer.WithPrefetch(1), rabbitconsumer.WithRequeueDelay(100*time.Millisecond))
		require.NoError(t, err)
		consume(t, c)
	}
	// Both subscribed first, so that each takes one of the deliveries.
	eventually(t, time.Minute, func() bool { return subscribed(t, queue) == 2 }, "two consumers")
	publish(t, queue, message("long-1"), message("long-1"))
	eventually(t, time.Minute, func() bool { return fx.get("long-1") == 1 && ready(t, queue) == 0 }, "done")
	eventually(t, time.Minute, func() bool { return seen.settled() == 2 }, "both deliveries settled")
	assert.Equal(t, 1, fx.started("long-1"), "the lease lapsed and another consumer ran the key")
	assert.NotEmpty(t, seen.failed("in_progress"), "the second delivery met the key in flight")
	drained(t, dlq)
}
