package rabbitconsumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// Review 19: a held message's expiry is counted from its receipt, not from its enqueue,
// so a message that waited in the queue before it was delivered is held (and run) past the
// time the broker expires it. The package documentation promises the opposite: the held
// message is requeued "and the broker ... dead-letters (or drops) it as expired instead of
// the consumer running it late". holdUntil's own comment admits the TTL only "bounds what
// was left of it when it was delivered"; the consumer then treats the bound as the
// deadline, and RabbitMQ does not tell a consumer when a message was enqueued (the
// delivery carries the original expiration property, not what is left of it).
//
// Schedule:
//  1. A message with expiration 6000 ms is published at t0 to a queue with no consumer;
//     it waits there 4 s (2 s of its TTL left). The store refuses claims.
//  2. At t0+4 s the consumer receives it; holdUntil sets until = receipt + 6 s = t0+10 s.
//     The claim fails (store): the delivery is held, retried at receipt+10 ms, 30, 70,
//     150, 310, 630, 1270, 2550 ms (the back-off doubling from 10 ms).
//  3. The broker would have expired it at t0+6 s. At the hold after t0+6.5 s (receipt +
//     2.55 s) the store comes back.
//  4. The next retry (receipt + 5.11 s = t0+9.1 s, before until) claims and runs the
//     handler with a message the broker expired 3 s before. Had it stayed in the queue it
//     would have been dead-lettered as expired; it is acknowledged instead.
//
// Severity: medium (the same class as review 17's PutBackRestartsTheExpiration, which
// fix17 closed only for a message delivered at once): a producer's per-message TTL (a
// quote, a session, a command valid for a few seconds) is defeated by up to twice its
// length whenever the queue had a backlog and the store or another run of the key kept
// the message in hand. A held message should be requeued at once when it arrives with
// an expiration that may already have passed, or the documentation should say the hold
// may run it up to one TTL late.
func TestReview19_HeldMessageRunsPastItsBrokerExpiry(t *testing.T) {
	queue, dlq := declare(t)
	const ttl = 6 * time.Second
	store := storetest.NewFaulty(memstore.New())
	store.Fail("claim", errors.New("connection refused"), false)
	var ran atomic.Int64
	c, err := rabbitconsumer.New(newGuard(t, store), queue, func(context.Context, amqp.Delivery) error {
		ran.Add(1)
		return nil
	}, rabbitconsumer.WithRequeueDelay(10*time.Millisecond))
	require.NoError(t, err)
	published := time.Now()
	var back sync.Once
	defer rabbitconsumer.SetOnHold(func() {
		if time.Since(published) > ttl+500*time.Millisecond {
			back.Do(func() { store.Fail("claim", nil, false) })
		}
	})()
	publish(t, queue, amqp.Publishing{MessageId: "ttl-backlog-1", Body: []byte("body"), Expiration: "6000"})
	time.Sleep(4 * time.Second) // a backlog: the message waits in the queue before delivery
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return ready(t, dlq) == 1 || ran.Load() > 0 },
		"neither expired nor run")
	stop()
	assert.Zero(t, ran.Load(), "the handler ran a message past its broker expiry")
	assert.Equal(t, 1, ready(t, dlq), "the expired message is not dead-lettered")
}

// Review 19: once the channel closes, Consume does not return until every delayed requeue
// of a failed (Requeue policy) or cut-off handler has waited out the requeue delay: the
// goroutines of settleBatch wait on the delay or ctx, never on the channel going, and
// Consume's deferred requeues.Wait waits for them. Their nack then fails anyway (the
// channel is gone and the broker has requeued the message already). Held deliveries were
// given the gone channel for exactly this reason; the delayed requeues were not.
//
// Schedule:
//  1. WithRequeueDelay(1 h) (a back-off for a failing downstream), Requeue policy. A
//     message's handler fails: settleBatch starts a goroutine that nacks it in an hour.
//  2. The channel closes (here closed by the caller; a broker restart, a
//     consumer_timeout, a network failure alike).
//  3. The delivery channel closes, Consume leaves its loop, closes gone, waits for the
//     batches (done), then requeues.Wait blocks for the hour.
//
// Severity: medium (liveness): Consume is documented to return ErrChannelClosed so the
// caller opens another channel, and Run dials again only when it returns: every channel
// loss stops the consumer for the whole requeue delay (1 s by default, but the option
// exists to make it long), while the broker has already requeued the message for
// other consumers. With Run the whole service consumes nothing meanwhile.
func TestReview19_ConsumeWaitsOutTheRequeueDelayAfterTheChannelCloses(t *testing.T) {
	queue, _ := declare(t)
	var failedOnce atomic.Int64
	c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(context.Context, amqp.Delivery) error {
		failedOnce.Add(1)
		return errors.New("downstream unavailable")
	}, rabbitconsumer.WithRequeueDelay(time.Hour), rabbitconsumer.WithFailurePolicy(rabbitconsumer.Requeue))
	require.NoError(t, err)
	publish(t, queue, message("slow-requeue-1"))
	_, ch := channel(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Consume(ctx, ch) }()
	eventually(t, time.Minute, func() bool { return failedOnce.Load() > 0 }, "the handler ran")
	require.NoError(t, ch.Close())
	var got error
	returned := false
	eventually(t, 30*time.Second, func() bool {
		select {
		case got = <-done:
			returned = true
		default:
		}
		return returned
	}, "Consume did not return after its channel closed: it waits out the 1 h requeue delay")
	assert.ErrorIs(t, got, rabbitconsumer.ErrChannelClosed)
	eventually(t, time.Minute, func() bool { return ready(t, queue) == 1 }, "the broker requeued the message")
}

// Review 19 (coverage, passes): the consumer stopping after a batch was taken in hand but
// before its handler started (the stop placed in the key function, deterministically) loses
// nothing and runs nothing twice: the handler's context is ended by an AfterFunc, which
// runs in a goroutine of its own, so a short handler may finish first; either it ran and
// its message was acknowledged, or it was cut off and its message is back in the queue.
// Tried as a hole (a handler started with a context already ended): not one, the handler
// here saw a live context on entry and its message was acknowledged.
func TestReview19_StopAsABatchStartsLosesNothing(t *testing.T) {
	queue, dlq := declare(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fx := newEffects()
	c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(hctx context.Context, d amqp.Delivery) error {
		if err := hctx.Err(); err != nil {
			return err
		}
		fx.add(d.MessageId)
		return nil
	}, rabbitconsumer.WithKey(func(d amqp.Delivery) (string, error) {
		cancel() // the consumer stops after the batch was taken in hand
		return d.MessageId, nil
	}))
	require.NoError(t, err)
	publish(t, queue, message("stopping-1"))
	_, ch := channel(t)
	require.NoError(t, c.Consume(ctx, ch))
	require.NoError(t, ch.Close()) // requeues whatever was left unacknowledged
	eventually(t, time.Minute, func() bool { return fx.get("stopping-1")+ready(t, queue) == 1 },
		"the message neither ran nor is back in the queue")
	assert.LessOrEqual(t, fx.get("stopping-1"), 1)
	assert.Zero(t, ready(t, dlq))
}

// Review 19 (coverage, passes): a key in flight in another guard is held, not run and not
// requeued, while the other run lasts, and replays the other run's result once it ends:
// the handler runs once across both. (The other run returns the consumer's result type,
// struct{}: a result the consumer cannot decode is a record it cannot read,
// idem.ErrIncompatibleRecord, and is dead-lettered. This test once returned a string and
// stopped before the held message's next claim, which met that record, so it never saw the
// replay it names.)
func TestReview19_HeldKeyInFlightElsewhereReplays(t *testing.T) {
	queue, dlq := declare(t)
	store := memstore.New()
	other := newGuard(t, store)
	release := make(chan struct{})
	started := make(chan struct{})
	var ran atomic.Int64
	otherDone := make(chan error, 1)
	go func() {
		_, _, err := idem.Do(context.Background(), other, idem.Request{Key: "inflight-1", Fingerprint: []byte("{}")},
			func(context.Context) (struct{}, error) {
				ran.Add(1)
				close(started)
				<-release
				return struct{}{}, nil
			})
		otherDone <- err
	}()
	<-started
	var held atomic.Int64
	defer rabbitconsumer.SetOnHold(func() { held.Add(1) })()
	var seen batches
	c, err := rabbitconsumer.New(newGuard(t, store, idem.WithHooks(seen.hooks())), queue, func(context.Context, amqp.Delivery) error {
		ran.Add(1)
		return nil
	}, rabbitconsumer.WithRequeueDelay(10*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, amqp.Publishing{MessageId: "inflight-1", Body: []byte("{}")})
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return held.Load() > 0 }, "the message was not held")
	close(release)
	require.NoError(t, <-otherDone)
	eventually(t, time.Minute, func() bool { return seen.last() == "replayed" }, "the held message did not replay")
	drained(t, queue)
	stop()
	assert.Equal(t, int64(1), ran.Load(), "the key ran more than once")
	assert.Zero(t, ready(t, dlq))
}

// Review 19 (coverage, passes): a held delivery whose channel closes while it waits is
// not lost: the broker requeues it, and another consumer (here once the store is back)
// runs it once.
func TestReview19_HeldDeliveryOfAClosedChannelRunsOnceElsewhere(t *testing.T) {
	queue, dlq := declare(t)
	store := storetest.NewFaulty(memstore.New())
	store.Fail("claim", errors.New("connection refused"), false)
	var held atomic.Int64
	defer rabbitconsumer.SetOnHold(func() { held.Add(1) })()
	fx := newEffects()
	handler := func(_ context.Context, d amqp.Delivery) error {
		fx.add(d.MessageId)
		return nil
	}
	a, err := rabbitconsumer.New(newGuard(t, store), queue, handler, rabbitconsumer.WithRequeueDelay(time.Hour))
	require.NoError(t, err)
	publish(t, queue, message("held-closed-1"))
	_, ch := channel(t)
	done := make(chan error, 1)
	go func() { done <- a.Consume(context.Background(), ch) }()
	eventually(t, time.Minute, func() bool { return held.Load() > 0 }, "the message was not held")
	require.NoError(t, ch.Close())
	require.ErrorIs(t, <-done, rabbitconsumer.ErrChannelClosed)
	store.Fail("claim", nil, false)
	b, err := rabbitconsumer.New(newGuard(t, store), queue, handler, rabbitconsumer.WithRequeueDelay(10*time.Millisecond))
	require.NoError(t, err)
	_, stop := consume(t, b)
	eventually(t, time.Minute, func() bool { return fx.get("held-closed-1") == 1 }, "the message did not run")
	stop()
	drained(t, queue)
	assert.Equal(t, 1, fx.get("held-closed-1"))
	assert.Zero(t, ready(t, dlq))
}

// Review 19: the same hole under Run, the way a service uses the consumer: the broker
// closes the consumer's connection (here rabbitmqctl close_connection; a broker restart,
// a consumer_timeout or a network failure alike) while a failed message waits out its
// requeue delay; Run dials again only once Consume returns, which waits out the delay, so
// the service consumes nothing meanwhile: a message published after the close is not
// delivered to it.
//
// Schedule:
//  1. Run with WithRequeueDelay(1 h), Requeue policy. "fails-1"'s handler fails: a
//     goroutine will nack it in an hour.
//  2. The broker closes the connection. The delivery channel closes; consume waits for
//     the batches, then for the hour-long requeue goroutine (requeues.Wait).
//  3. "later-1" is published. Run has not dialled again: it stays in the queue.
//
// Severity: medium (liveness of the whole service after any connection loss; the longer
// the requeue delay the longer the outage).
func TestReview19_RunDoesNotRedialWhileARequeueWaits(t *testing.T) {
	queue, _ := declare(t)
	name := fmt.Sprintf("review19-%d", time.Now().UnixNano())
	fx := newEffects()
	c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(_ context.Context, d amqp.Delivery) error {
		fx.add(d.MessageId)
		if d.MessageId == "fails-1" {
			return errors.New("downstream unavailable")
		}
		return nil
	}, rabbitconsumer.WithRequeueDelay(time.Hour), rabbitconsumer.WithFailurePolicy(rabbitconsumer.Requeue),
		rabbitconsumer.WithReconnectDelay(10*time.Millisecond),
		rabbitconsumer.WithAMQPConfig(amqp.Config{Properties: amqp.Table{"connection_name": name}}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx, brokerURL(t))
	}()
	defer func() { cancel(); <-done }()
	publish(t, queue, message("fails-1"))
	eventually(t, time.Minute, func() bool { return fx.get("fails-1") > 0 }, "the handler ran")
	var pid string
	for _, line := range strings.Split(rabbitmqctl(t, "list_connections", "-q", "pid", "client_properties"), "\n") {
		if strings.Contains(line, name) {
			pid = strings.Fields(line)[0]
		}
	}
	require.NotEmpty(t, pid, "the consumer's connection not found")
	rabbitmqctl(t, "close_connection", pid, "review19")
	publish(t, queue, message("later-1"))
	eventually(t, 30*time.Second, func() bool { return fx.get("later-1") == 1 },
		"a message published after the connection closed did not run: Run has not dialled again")
}
