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
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/rabbitconsumer"
)

// Review 14. Under the DeadLetter policy, a handler that stops because idem ended its
// context (its lease could not be kept: the store refused the heartbeat's extensions for a
// moment) is not a failed handler: nothing took the key over, the handler did what New asks
// ("fn should honour its context: it ends when the lease is lost") and a redelivery would
// succeed. The package promises that a lost lease requeues ("a lease taken over: held ...
// then nacked with requeue, never run, never acked"), as it requeues a handler whose
// context ended because the consumer stopped.
//
// Schedule:
//  1. The consumer claims "pay-1" and its handler starts; the store refuses every Extend
//     (throttled), so the watchdog ends the handler's context, cause idem.ErrLeaseLost.
//  2. The handler returns context.Cause(ctx); the guard releases the key and reports the
//     handler's own error, so the batch outcome is ReasonHandler.
//  3. settlement maps ReasonHandler under DeadLetter to deadLetter: the message is nacked
//     without requeue. With a dead-letter exchange it is parked; without one (the broker's
//     default) it is dropped: a transient store blip lost the message, which never ran to
//     completion and has no stored result.
func TestReview14_LeaseLostHandlerIsNotDeadLettered(t *testing.T) {
	queue, dlq := declare(t)
	store := storetest.NewFaulty(memstore.New())
	store.Fail("extend", errors.New("throttled"), false)
	fx := newEffects()
	var seen batches
	guard := newGuard(t, store, idem.WithLease(time.Second), idem.WithLeaseMargin(200*time.Millisecond),
		idem.WithHeartbeat(300*time.Millisecond), idem.WithHooks(seen.hooks()))
	c, err := rabbitconsumer.New(guard, queue, func(ctx context.Context, d amqp.Delivery) error {
		fx.start(d.MessageId)
		if fx.started(d.MessageId) == 1 {
			<-ctx.Done() // the lease could not be extended
			store.Fail("extend", nil, false)
			return context.Cause(ctx)
		}
		fx.add(d.MessageId)
		return nil
	}, rabbitconsumer.WithFailurePolicy(rabbitconsumer.DeadLetter), rabbitconsumer.WithRequeueDelay(50*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, message("pay-1"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return fx.get("pay-1") == 1 || ready(t, dlq) == 1 },
		"the message runs again or is dead-lettered")
	stop()
	for _, it := range seen.failed("handler") {
		t.Logf("outcome: reason %s, error %v (lease lost: %v)", it.Reason, it.Err, errors.Is(it.Err, idem.ErrLeaseLost))
	}
	assert.Zero(t, ready(t, dlq), "dead-lettered (dropped without a DLX) after its lease was lost")
	assert.Equal(t, 1, fx.get("pay-1"), "the message never ran to completion")
	drained(t, queue)
}

// Review 14. The same without a heartbeat: the guard's lease watchdog ends the handler's
// context once its lease (WithLease) runs out, cause idem.ErrLeaseLost, so that it never
// runs beside the key's next owner. A handler that honours it is dead-lettered under the
// DeadLetter policy, though nothing failed but time.
//
// Schedule:
//  1. The consumer claims "job-1" with a 1 s lease (no deadline, no heartbeat); the handler
//     runs past the lease end less the margin, and the watchdog ends its context.
//  2. It returns context.Cause(ctx) (wrapping idem.ErrLeaseLost); the key is released and
//     the outcome is ReasonHandler.
//  3. DeadLetter policy: nacked without requeue, dropped without a DLX. The work was never
//     done and nothing records it.
func TestReview14_LeaseRanOutHandlerIsNotDeadLettered(t *testing.T) {
	queue, dlq := declare(t)
	fx := newEffects()
	guard := newGuard(t, memstore.New(), idem.WithLease(time.Second), idem.WithLeaseMargin(200*time.Millisecond))
	c, err := rabbitconsumer.New(guard, queue, func(ctx context.Context, d amqp.Delivery) error {
		fx.start(d.MessageId)
		if fx.started(d.MessageId) == 1 {
			<-ctx.Done() // the lease ran out
			if !errors.Is(context.Cause(ctx), idem.ErrLeaseLost) {
				return errors.New("context ended for another cause")
			}
			return context.Cause(ctx)
		}
		fx.add(d.MessageId)
		return nil
	}, rabbitconsumer.WithFailurePolicy(rabbitconsumer.DeadLetter), rabbitconsumer.WithRequeueDelay(50*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, message("job-1"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return fx.get("job-1") == 1 || ready(t, dlq) == 1 },
		"the message runs again or is dead-lettered")
	stop()
	assert.Zero(t, ready(t, dlq), "dead-lettered (dropped without a DLX) after its lease ran out")
	assert.Equal(t, 1, fx.get("job-1"), "the message never ran to completion")
	drained(t, queue)
}

// Review 14. WithBatchDeadline gives a batch a deadline "as a Lambda invocation has one",
// and ends each handler's context at it. A handler that honours its context and stops at the
// deadline is cut off by the consumer's own setting, as one stopped with the consumer is; in
// Lambda the invocation would time out and the source deliver the message again. Under the
// DeadLetter policy the consumer dead-letters it instead: dropped without a DLX, though it
// never failed on its own.
//
// Schedule:
//  1. WithBatchDeadline(1 s): the batch's context ends 1 s after it starts; the handler of
//     "slow-1" waits for its context, which ends with context.DeadlineExceeded.
//  2. It returns ctx.Err(); the key is released; the outcome is ReasonHandler.
//  3. settlement: ReasonHandler under DeadLetter is deadLetter, and stopped is false (the
//     consumer did not stop), so the message is nacked without requeue.
func TestReview14_BatchDeadlineCutOffIsNotDeadLettered(t *testing.T) {
	queue, dlq := declare(t)
	fx := newEffects()
	c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(ctx context.Context, d amqp.Delivery) error {
		fx.start(d.MessageId)
		if fx.started(d.MessageId) == 1 {
			<-ctx.Done() // the batch deadline
			return ctx.Err()
		}
		fx.add(d.MessageId)
		return nil
	}, rabbitconsumer.WithBatchDeadline(time.Second), rabbitconsumer.WithFailurePolicy(rabbitconsumer.DeadLetter),
		rabbitconsumer.WithRequeueDelay(50*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, message("slow-1"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return fx.get("slow-1") == 1 || ready(t, dlq) == 1 },
		"the message runs again or is dead-lettered")
	stop()
	assert.Zero(t, ready(t, dlq), "dead-lettered (dropped without a DLX) when the batch deadline cut its handler off")
	assert.Equal(t, 1, fx.get("slow-1"), "the message never ran to completion")
	drained(t, queue)
}

// Review 14. The Requeue policy's documentation tells a user to bound a message that always
// fails with a quorum queue's delivery limit (x-delivery-limit). But the consumer requeues
// with the same nack a message that may succeed later (the store down, its key in flight in
// another consumer, its lease taken over), and the broker counts every such nack against the
// limit. A store outage longer than limit × WithRequeueDelay (20 × 1 s by default on
// RabbitMQ 4, whose quorum queues default to a limit of 20) dead-letters every message in
// hand, and drops it when the queue has no dead-letter exchange: messages lost for a
// transient cause, though the package promises they are "never run, never acknowledged, so
// [they come] back once ... the store is back". The same holds for a message whose key runs
// long in another consumer (a redelivery after a lost connection): if that run then fails,
// the message is gone.
//
// Schedule (quorum queue, x-delivery-limit 3, DLX to <queue>.dlq):
//  1. The store refuses every claim (idem.ErrStore). The consumer receives "a", the claim
//     fails, the outcome is ReasonStore, and it nacks "a" with requeue after the delay.
//  2. The broker counts the nack; steps 1 and 2 repeat.
//  3. After the third nack the broker dead-letters "a" instead of delivering it again.
//  4. The store comes back; "a" never runs.
func TestReview14_TransientRequeuesSpendTheDeliveryLimit(t *testing.T) {
	const limit = 3
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

	store := storetest.NewFaulty(memstore.New())
	store.Fail("claim", errors.New("connection refused"), false)
	var seen batches
	fx := newEffects()
	c, err := rabbitconsumer.New(newGuard(t, store, idem.WithHooks(seen.hooks())), queue, func(_ context.Context, d amqp.Delivery) error {
		fx.add(d.MessageId)
		return nil
	}, rabbitconsumer.WithRequeueDelay(50*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, message("a"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return len(seen.failed("store")) > 2*limit || ready(t, dlq) == 1 },
		"the store outage outlasts the delivery limit")
	store.Fail("claim", nil, false) // the store is back
	eventually(t, time.Minute, func() bool { return fx.get("a") == 1 || ready(t, dlq) == 1 },
		"the message runs or is dead-lettered")
	stop()
	assert.Zero(t, ready(t, dlq), "dead-lettered (dropped without a DLX) by a store outage, never run")
	assert.Equal(t, 1, fx.get("a"), "the message never ran")
}

// Review 14, coverage (passes on main). A message published twice with one message ID and
// one body, both in hand: when the handler succeeds it runs once and both are acknowledged;
// when it fails under DeadLetter both deliveries are dead-lettered, and a copy in the same
// batch shares its original's failure without running.
func TestReview14_SameIDTwiceInHand(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(map[bool]string{false: "succeeds", true: "fails"}[fail], func(t *testing.T) {
			queue, dlq := declare(t)
			publish(t, queue, message("twice"), message("twice"))
			fx := newEffects()
			var seen batches
			c, err := rabbitconsumer.New(newGuard(t, memstore.New(), idem.WithHooks(seen.hooks())), queue,
				func(_ context.Context, d amqp.Delivery) error {
					fx.start(d.MessageId)
					if fail {
						return errors.New("declined")
					}
					fx.add(d.MessageId)
					return nil
				}, rabbitconsumer.WithPrefetch(2), rabbitconsumer.WithFailurePolicy(rabbitconsumer.DeadLetter),
				rabbitconsumer.WithRequeueDelay(50*time.Millisecond))
			require.NoError(t, err)
			_, stop := consume(t, c)
			if fail {
				eventually(t, time.Minute, func() bool { return ready(t, dlq) == 2 }, "both dead-lettered")
			} else {
				eventually(t, time.Minute, func() bool { return seen.settled() == 2 }, "both acknowledged")
			}
			stop()
			drained(t, queue)
			if !fail {
				assert.Equal(t, 1, fx.started("twice"), "the handler ran for each copy")
				return
			}
			// In one batch the copy shares its original's failure without running; in two,
			// the first failure released the key and the second copy runs on its own.
			assert.Equal(t, 2-len(seen.failed("duplicate_failed")), fx.started("twice"))
		})
	}
}

// Review 14 (low severity). settlement dead-letters any outcome whose error wraps
// idem.ErrPayloadMismatch, before it looks at the reason or the failure policy. A handler
// that itself uses idem for a step of its own (a nested guard, a guarded downstream call)
// and returns that step's error fails with ReasonHandler, but is dead-lettered under the
// default Requeue policy, which promises a failed handler's message runs again; without a
// DLX it is dropped.
//
// Schedule:
//  1. The handler of "n-1" returns fmt.Errorf("reserve stock: %w", idem.ErrPayloadMismatch)
//     (a downstream guarded call it made met another body under its key).
//  2. The guard releases the key; the outcome is ReasonHandler, its error the handler's.
//  3. settlement: errors.Is(o.Err, idem.ErrPayloadMismatch) comes first: deadLetter.
func TestReview14_HandlerErrorWrappingMismatchFollowsPolicy(t *testing.T) {
	queue, dlq := declare(t)
	fx := newEffects()
	c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(_ context.Context, d amqp.Delivery) error {
		fx.start(d.MessageId)
		if fx.started(d.MessageId) == 1 {
			return fmt.Errorf("reserve stock: %w", idem.ErrPayloadMismatch)
		}
		fx.add(d.MessageId)
		return nil
	}, rabbitconsumer.WithRequeueDelay(50*time.Millisecond)) // the default policy: Requeue
	require.NoError(t, err)
	publish(t, queue, message("n-1"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return fx.get("n-1") == 1 || ready(t, dlq) == 1 },
		"the message runs again or is dead-lettered")
	stop()
	assert.Zero(t, ready(t, dlq), "a handler failure dead-lettered under the Requeue policy")
	assert.Equal(t, 1, fx.get("n-1"))
	drained(t, queue)
}
