package rabbitconsumer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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

// Review 17: a producer forges the put-back headers. The consumer takes any message that
// carries x-rabbitconsumer-exchange for a put-back copy and "restores" its user-id,
// exchange and routing key from the producer's headers. The user-id property is the one
// the broker validates against the publishing connection's user (and the routing key the
// one topic permissions check): a handler that trusts them is spoofed.
//
// Schedule:
//  1. A producer connected as guest publishes to the queue through the default exchange,
//     no user-id property, with headers x-rabbitconsumer-exchange "", x-rabbitconsumer-
//     routing-key "admin.only" and x-rabbitconsumer-user-id "admin".
//  2. The consumer receives it (first delivery, never put back) and restored() rewrites it:
//     the handler sees UserId "admin" (a user-id the broker would have refused from guest),
//     routing key "admin.only", and the producer's headers gone.
//
// Severity: high for a handler that authorises on the broker-validated user-id; also the
// handler sees other data than was published (headers dropped), and a key function on the
// routing key or user-id keys it as the forger chose.
func TestReview17_ForgedPutBackHeadersSpoofUserID(t *testing.T) {
	queue, _ := declare(t)
	var (
		mu  sync.Mutex
		got []amqp.Delivery
	)
	c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(_ context.Context, d amqp.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, d)
		return nil
	})
	require.NoError(t, err)
	forged := amqp.Table{
		"x-rabbitconsumer-exchange":    "",
		"x-rabbitconsumer-routing-key": "admin.only",
		"x-rabbitconsumer-user-id":     "admin",
	}
	publish(t, queue, amqp.Publishing{MessageId: "forged-1", Body: []byte("body"), Headers: forged})
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 }, "the message ran")
	stop()
	d := got[0]
	assert.Empty(t, d.UserId, "the handler sees a user-id the broker never validated")
	assert.Equal(t, queue, d.RoutingKey, "the handler sees a routing key the message was not routed with")
	assert.Equal(t, forged, d.Headers, "the handler does not see the headers that were published")
}

// Review 17: a handler that always outlives the batch deadline (a poison message: it hangs
// on this input) is put back forever. A cut-off is put back with a fresh copy "whatever
// the policy", and the copy carries no delivery count, so neither the DeadLetter policy nor
// a quorum queue's x-delivery-limit (the operator's backstop against poison messages)
// ever stops it.
//
// Schedule:
//  1. Quorum queue, x-delivery-limit 2, dead-letter queue; consumer with the DeadLetter
//     policy and a batch deadline of 100 ms; the handler blocks until its context ends
//     and returns ctx.Err().
//  2. Delivery 1: the deadline cuts the handler off (cause errBatchDeadline), settlement
//     says putBack; a copy is published and confirmed, the original acknowledged: the
//     delivery count restarts at 0.
//  3. Step 2 repeats for every copy: the message is never dead-lettered, the handler runs
//     again and again (3 * (limit+1) runs are observed here, and it never stops).
//
// Severity: high: a poison message loops for ever, burns a handler slot and a store round
// trip per turn, and is never surfaced in the dead-letter queue; before fix14 the delivery
// limit bounded it.
func TestReview17_CutOffPoisonIsPutBackForever(t *testing.T) {
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
	var runs atomic.Int64
	c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(ctx context.Context, _ amqp.Delivery) error {
		runs.Add(1)
		<-ctx.Done()
		return ctx.Err()
	}, rabbitconsumer.WithFailurePolicy(rabbitconsumer.DeadLetter),
		rabbitconsumer.WithBatchDeadline(100*time.Millisecond),
		rabbitconsumer.WithRequeueDelay(10*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, message("hang-1"))
	_, stop := consume(t, c)
	const enough = 3 * (limit + 1)
	eventually(t, 2*time.Minute, func() bool { return ready(t, dlq) == 1 || runs.Load() >= enough },
		"neither dead-lettered nor run %d times", enough)
	stop()
	assert.Equal(t, 1, ready(t, dlq), "a message whose handler always hangs is never dead-lettered (ran %d times, delivery limit %d)", runs.Load(), limit)
}

// Review 17: a put-back copy restarts the message's per-message TTL. The copy carries the
// original's expiration property unchanged, so each put-back gives the message a fresh
// TTL, and a handler runs a message long after the producer said it expires. A nack with
// requeue (what fix14 replaced) keeps the broker's expiry: the message, expired while in
// hand, is dead-lettered with reason "expired" on requeue (checked by hand on RabbitMQ
// 3.10). The package documentation states the restart ("a per-message TTL (expiration)
// starts again"); this test holds that the restart is a hole, not a feature: a copy could
// carry the remaining TTL, or a message with an expiration could be requeued instead.
//
// Schedule:
//  1. Classic queue with a dead-letter queue; a message with expiration 1500 ms. The store
//     refuses claims, so each delivery is put back after the 50 ms requeue delay.
//  2. Copies keep the message alive: each copy's TTL starts at its publish.
//  3. Once 3 s (twice the TTL) have passed since the publish, the store comes back; the
//     next copy runs the handler with a message expired 1.5 s ago.
//
// Severity: medium: the producer's expiry is defeated by the consumer's own re-publishing
// (a stale command, price or session acted on); with a long store outage a message with a
// short TTL lives for the whole outage.
func TestReview17_PutBackRestartsTheExpiration(t *testing.T) {
	queue, dlq := declare(t)
	const ttl = 1500 * time.Millisecond
	store := storetest.NewFaulty(memstore.New())
	store.Fail("claim", errors.New("connection refused"), false)
	var ran atomic.Int64
	c, err := rabbitconsumer.New(newGuard(t, store), queue, func(context.Context, amqp.Delivery) error {
		ran.Add(1)
		return nil
	}, rabbitconsumer.WithRequeueDelay(50*time.Millisecond))
	require.NoError(t, err)
	published := time.Now()
	var back sync.Once
	defer rabbitconsumer.SetOnHold(func() {
		if time.Since(published) > 2*ttl {
			back.Do(func() { store.Fail("claim", nil, false) })
		}
	})()
	publish(t, queue, amqp.Publishing{MessageId: "ttl-1", Body: []byte("body"), Expiration: "1500"})
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return ready(t, dlq) == 1 || ran.Load() > 0 },
		"neither expired nor run")
	stop()
	assert.Zero(t, ran.Load(), "the handler ran a message past its expiration")
	assert.Equal(t, 1, ready(t, dlq), "the expired message is not dead-lettered")
}

// Review 17: a put-back copy is a new publish, so a queue with x-max-length (overflow
// drop-head, the default) drops its head to admit it: another message, already accepted by
// the broker and never run, is dead-lettered (or dropped without a dead-letter exchange).
// Not new with fix14: a nack with requeue (the put-back's fallback, the Requeue policy, and
// what transient causes got before fix14) makes the returned message ready again and
// overflows the same way (checked by hand on RabbitMQ 3.10: one message of the two is
// dead-lettered). Nothing in the package documentation warns of it; a fix is to say so, or
// to hold a delivery whose cause is transient instead of returning it to a bounded queue.
//
// Schedule:
//  1. Classic queue, x-max-length 1, dead-letter queue. Prefetch 1. "a" is published and
//     delivered; the store refuses its claim (ReasonStore): it is held for the requeue
//     delay (2 s), to be put back.
//  2. Meanwhile "b" is published and waits, ready: the queue is at its length (1 ready;
//     "a" is unacknowledged and not counted).
//  3. The put-back publishes a copy of "a": 2 ready, over the limit, and the broker drops
//     the head, "b", to the dead-letter queue. The original "a" is acknowledged.
//  4. The store comes back; the copy of "a" runs. "b" never runs.
//
// Severity: medium: a message the broker had accepted is lost to a transient store outage
// of another message, on any bounded queue (max-length or max-length-bytes).
func TestReview17_PutBackDropsTheHeadOfABoundedQueue(t *testing.T) {
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
	store := storetest.NewFaulty(memstore.New())
	store.Fail("claim", errors.New("connection refused"), false)
	var seen batches
	fx := newEffects()
	c, err := rabbitconsumer.New(newGuard(t, store, idem.WithHooks(seen.hooks())), queue, func(_ context.Context, d amqp.Delivery) error {
		fx.add(d.MessageId)
		return nil
	}, rabbitconsumer.WithPrefetch(1), rabbitconsumer.WithRequeueDelay(2*time.Second))
	require.NoError(t, err)
	var back sync.Once
	defer rabbitconsumer.SetOnHold(func() {
		back.Do(func() { store.Fail("claim", nil, false) })
	})()
	publish(t, queue, message("a"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return len(seen.failed("store")) > 0 }, "a's claim failed")
	publish(t, queue, message("b"))
	eventually(t, time.Minute, func() bool { return fx.get("a") == 1 }, "a ran")
	eventually(t, time.Minute, func() bool { return fx.get("b") == 1 || ready(t, dlq) > 0 }, "b neither ran nor was dropped")
	stop()
	assert.Equal(t, 1, fx.get("b"), "b, accepted by the broker, never ran")
	assert.Zero(t, ready(t, dlq), "a message was dropped to the dead-letter queue")
}

// Review 17 (coverage, passes on main): many put-backs at once share the channel's confirm
// sequence with each other; every copy is confirmed against its own publish, so every
// original is acknowledged once its copy is in the queue, and no message is lost or runs
// twice.
//
// Schedule: 60 messages, prefetch 20; the store refuses the first 45 claims, so batches of
// deliveries are put back concurrently on one channel (their publishes and confirms
// interleave); then every message runs once and the queue ends empty.
func TestReview17_ConcurrentPutBacksLoseNothing(t *testing.T) {
	queue, dlq := declare(t)
	const n = 60
	var msgs []amqp.Publishing
	for i := range n {
		msgs = append(msgs, message(fmt.Sprint("p", i)))
	}
	publish(t, queue, msgs...)
	store := storetest.NewFaulty(memstore.New())
	store.FailTimes("claim", errors.New("connection refused"), false, 45)
	var seen batches
	fx := newEffects()
	c, err := rabbitconsumer.New(newGuard(t, store, idem.WithHooks(seen.hooks())), queue, func(_ context.Context, d amqp.Delivery) error {
		fx.add(d.MessageId)
		return nil
	}, rabbitconsumer.WithPrefetch(20), rabbitconsumer.WithRequeueDelay(time.Millisecond), rabbitconsumer.WithBatchClaims(false))
	require.NoError(t, err)
	_, stop := consume(t, c)
	eventually(t, 2*time.Minute, func() bool { return seen.settled() == n }, "all ran")
	stop()
	drained(t, queue)
	drained(t, dlq)
	for i := range n {
		assert.Equal(t, 1, fx.get(fmt.Sprint("p", i)), "p%d", i)
	}
	assert.Positive(t, len(seen.failed("store")), "nothing was put back")
	t.Logf("store failures: %d", len(seen.failed("store")))
}

// Review 17 (coverage, passes on main): a copy the broker refuses (a full queue with
// x-overflow reject-publish nacks it) falls back to a nack with requeue of the original:
// the message is neither lost nor dead-lettered, and runs once the store is back.
//
// Schedule:
//  1. Queue with x-max-length 1 and x-overflow reject-publish; prefetch 1. "a" is
//     delivered, its claim fails (store), it is held for the requeue delay.
//  2. "b" is published meanwhile: the queue is full (1 ready).
//  3. The put-back copy of "a" is nacked by the broker (errPutBackNacked); "a" is nacked
//     with requeue.
//  4. The store comes back: "a" and "b" each run once; nothing is dead-lettered.
func TestReview17_RefusedCopyFallsBackToRequeue(t *testing.T) {
	_, ch := channel(t)
	queue := queueName(t)
	dlq := queue + ".dlq"
	_, err := ch.QueueDeclare(dlq, true, false, false, false, nil)
	require.NoError(t, err)
	_, err = ch.QueueDeclare(queue, true, false, false, false, amqp.Table{
		"x-max-length": 1, "x-overflow": "reject-publish",
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
	}, rabbitconsumer.WithPrefetch(1), rabbitconsumer.WithRequeueDelay(500*time.Millisecond))
	require.NoError(t, err)
	var confirmed atomic.Int64
	defer rabbitconsumer.SetOnHold(func() { confirmed.Add(1) })()
	defer func() {
		t.Logf("copies confirmed: %d, store failures: %d", confirmed.Load(), len(seen.failed("store")))
	}()
	publish(t, queue, message("a"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return len(seen.failed("store")) > 0 }, "a's claim failed")
	publish(t, queue, message("b"))
	// Each further store failure is another delivery, put back or requeued.
	eventually(t, time.Minute, func() bool { return len(seen.failed("store")) >= 4 }, "redelivered")
	store.Fail("claim", nil, false)
	eventually(t, time.Minute, func() bool { return fx.get("a") == 1 && fx.get("b") == 1 }, "a and b ran")
	stop()
	drained(t, queue)
	drained(t, dlq)
	assert.Equal(t, 1, fx.get("a"))
	assert.Equal(t, 1, fx.get("b"))
}

// Review 17: a cut-off is put back "whatever the policy", yet the consumer hands the cut-off
// handler's error to the guard as a handler failure, so a guard with
// idem.WithRememberFailures stores it (StatusFailed) when its predicate accepts the error
// (the predicate this package's own test uses, func(error) bool { return true }, or any
// that does not single out context errors). The put-back copy then meets idem.ErrFailed
// and is dead-lettered without running: the cut-off that "did not fail" became a final
// failure.
//
// Schedule (stopping):
//  1. Guard with WithRememberFailures(always). Consumer 1 receives "stop-1"; its handler
//     waits for its context.
//  2. Consumer 1 stops (a deploy): the handler's context ends with errStopping, it returns
//     ctx.Err(). run() returns that error to the engine; the guard, its lease intact,
//     records the key as failed. The consumer sees cut == true and puts the message back.
//  3. Consumer 2 receives the copy: the claim meets the failed record (idem.ErrFailed),
//     settlement says deadLetter. The handler never runs again; the message is in the DLQ.
//
// Schedule (batch deadline): the same with WithBatchDeadline, the handler waiting for its
// context on its first run only.
//
// Severity: high: with remembered failures on, every graceful stop (each deploy) and every
// batch-deadline cut-off dead-letters the messages in flight instead of putting them back.
func TestReview17_CutOffIsRememberedAsAFailure(t *testing.T) {
	always := idem.WithRememberFailures(func(error) bool { return true })
	t.Run("stopping", func(t *testing.T) {
		queue, dlq := declare(t)
		guard := newGuard(t, memstore.New(), always)
		started := make(chan struct{})
		var once sync.Once
		c1, err := rabbitconsumer.New(guard, queue, func(ctx context.Context, _ amqp.Delivery) error {
			once.Do(func() { close(started) })
			<-ctx.Done()
			return ctx.Err()
		})
		require.NoError(t, err)
		fx := newEffects()
		c2, err := rabbitconsumer.New(guard, queue, func(_ context.Context, d amqp.Delivery) error {
			fx.add(d.MessageId)
			return nil
		})
		require.NoError(t, err)
		publish(t, queue, message("stop-1"))
		_, stop1 := consume(t, c1)
		select {
		case <-started:
		case <-time.After(time.Minute):
			t.Fatal("the handler did not start")
		}
		stop1()
		_, stop2 := consume(t, c2)
		eventually(t, time.Minute, func() bool { return fx.get("stop-1") == 1 || ready(t, dlq) == 1 },
			"the copy neither ran nor was dead-lettered")
		stop2()
		assert.Zero(t, ready(t, dlq), "a message cut off by the consumer stopping was dead-lettered")
		assert.Equal(t, 1, fx.get("stop-1"))
	})
	t.Run("batch deadline", func(t *testing.T) {
		queue, dlq := declare(t)
		fx := newEffects()
		c, err := rabbitconsumer.New(newGuard(t, memstore.New(), always), queue, func(ctx context.Context, d amqp.Delivery) error {
			fx.start(d.MessageId)
			if fx.started(d.MessageId) == 1 {
				<-ctx.Done()
				return ctx.Err()
			}
			fx.add(d.MessageId)
			return nil
		}, rabbitconsumer.WithBatchDeadline(200*time.Millisecond), rabbitconsumer.WithRequeueDelay(10*time.Millisecond))
		require.NoError(t, err)
		publish(t, queue, message("deadline-1"))
		_, stop := consume(t, c)
		eventually(t, time.Minute, func() bool { return fx.get("deadline-1") == 1 || ready(t, dlq) == 1 },
			"the copy neither ran nor was dead-lettered")
		stop()
		assert.Zero(t, ready(t, dlq), "a message cut off by the batch deadline was dead-lettered")
		assert.Equal(t, 1, fx.get("deadline-1"))
	})
}

// rabbitmqctl runs the broker's rabbitmqctl with args, in the broker's own environment
// (read from its process), fails tb if it fails, and returns its output.
func rabbitmqctl(tb testing.TB, args ...string) string {
	tb.Helper()
	brokerURL(tb)
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", broker.PID()))
	require.NoError(tb, err)
	cmd := exec.Command("/usr/lib/rabbitmq/bin/rabbitmqctl", args...)
	cmd.Dir = broker.Dir()
	for _, kv := range strings.Split(string(env), "\x00") {
		if kv != "" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	require.NoError(tb, err, "rabbitmqctl %v: %s", args, out)
	return string(out)
}

// Review 17: a consumer whose user may read the queue but not write (least privilege: a
// consumer needs only read permission for basic.consume, ack and nack) had every transient
// requeue work before fix14; now each put-back publishes to the default exchange, which
// needs write permission. The broker answers the publish with a channel error (403
// ACCESS_REFUSED), closing the consumer's channel: Consume returns ErrChannelClosed, every
// other delivery in hand on the channel is requeued by the broker (which a quorum queue
// counts, the very thing put-back is meant to avoid), and under Run the consumer reconnects
// and meets the same on the next transient cause. The package documentation does not say
// the consumer's user needs write permission.
//
// Schedule:
//  1. User "reader" with configure "^$", write "^$", read ".*"; the queue is declared by
//     guest. The consumer consumes as reader; its store refuses the first claim.
//  2. "perm-1" is delivered, its claim fails (ReasonStore): put back after the requeue
//     delay, by a publish to the default exchange.
//  3. The broker refuses the publish and closes the channel: the deferred confirm is nacked
//     on close, the fallback nack fails, Consume returns ErrChannelClosed.
//
// Severity: medium: a consumer set up with read-only permissions breaks its channel on
// every store hiccup or key in flight elsewhere (a reconnect loop under Run, a dead
// Consume otherwise), and on a quorum queue its redeliveries spend the delivery limit.
func TestReview17_PutBackNeedsWritePermission(t *testing.T) {
	queue, dlq := declare(t)
	user := fmt.Sprintf("reader%d", time.Now().UnixNano())
	rabbitmqctl(t, "add_user", user, "secret")
	rabbitmqctl(t, "set_permissions", "-p", "/", user, "^$", "^$", ".*")
	t.Cleanup(func() { rabbitmqctl(t, "delete_user", user) })
	conn, err := amqp.Dial(strings.Replace(brokerURL(t), "guest:guest", user+":secret", 1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)

	store := storetest.NewFaulty(memstore.New())
	store.FailTimes("claim", errors.New("connection refused"), false, 1)
	fx := newEffects()
	c, err := rabbitconsumer.New(newGuard(t, store), queue, func(_ context.Context, d amqp.Delivery) error {
		fx.add(d.MessageId)
		return nil
	}, rabbitconsumer.WithRequeueDelay(10*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, message("perm-1"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Consume(ctx, ch) }()
	var consumeErr error
	var returned atomic.Bool
	go func() {
		consumeErr = <-done
		returned.Store(true)
	}()
	eventually(t, time.Minute, func() bool { return fx.get("perm-1") == 1 || returned.Load() },
		"the message neither ran nor did Consume return")
	cancel()
	eventually(t, time.Minute, returned.Load, "Consume did not return")
	assert.NoError(t, consumeErr, "the put-back closed the consumer's channel")
	assert.Equal(t, 1, fx.get("perm-1"))
	drained(t, queue)
	drained(t, dlq)
}

// Review 17: a put-back publishes on the consumer's own connection, and RabbitMQ blocks a
// connection that publishes while a resource alarm (memory or disk) is on: it stops
// reading from it, acks and nacks included. One put-back during an alarm freezes the
// consumer: the copy's confirm never comes, the fallback nack after 30 s is never read, no
// acknowledgement of any other message gets through, and the queue (whose depth may be
// what raised the memory alarm) is not drained until the alarm clears some other way.
// Before fix14 a transient cause was a nack with requeue, which a consume-only connection
// sends during an alarm. RabbitMQ's documentation warns against publishing and consuming
// on one connection for this reason.
//
// Schedule:
//  1. "a" and "b" are published; then the memory alarm is raised
//     (set_vm_memory_high_watermark 0.0000001): publishing connections block.
//  2. The consumer (prefetch 1) gets "a"; the store refuses its first claim: put back
//     after the requeue delay, publishing the copy on the consumer's connection, which the
//     broker then blocks.
//  3. Nothing more is read from the consumer's connection: the copy, its confirm, the
//     fallback nack of "a" 30 s later. "b" is never delivered (the prefetch slot is "a").
//     With a nack with requeue, "a" would be redelivered, run, and "b" after it.
//
// Severity: medium: a consumer stops making progress for the whole alarm after one
// transient failure, and cannot help clear a memory alarm caused by the backlog.
func TestReview17_PutBackBlocksTheConsumerDuringAnAlarm(t *testing.T) {
	queue, dlq := declare(t)
	publish(t, queue, message("a"), message("b"))
	store := storetest.NewFaulty(memstore.New())
	store.FailTimes("claim", errors.New("connection refused"), false, 1)
	fx := newEffects()
	c, err := rabbitconsumer.New(newGuard(t, store), queue, func(_ context.Context, d amqp.Delivery) error {
		fx.add(d.MessageId)
		return nil
	}, rabbitconsumer.WithPrefetch(1), rabbitconsumer.WithRequeueDelay(10*time.Millisecond))
	require.NoError(t, err)

	rabbitmqctl(t, "set_vm_memory_high_watermark", "0.0000001")
	alarmOn := true
	clear := func() {
		if alarmOn {
			rabbitmqctl(t, "set_vm_memory_high_watermark", "0.4")
			alarmOn = false
		}
	}
	defer clear()
	eventually(t, time.Minute, func() bool {
		return strings.Contains(rabbitmqctl(t, "eval", "rabbit_alarm:get_alarms()."), "memory")
	}, "the memory alarm was not raised")

	_, stop := consume(t, c)
	// Bound past the put-back's 30 s confirm wait, so a fix that falls back to a nack
	// read by the broker passes too.
	ran := func() bool { return fx.get("a") == 1 && fx.get("b") == 1 }
	deadline := time.Now().Add(90 * time.Second)
	for !ran() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	progressed := ran()
	clear() // unblocks the consumer's connection
	eventually(t, time.Minute, ran, "a and b ran once the alarm cleared")
	stop()
	assert.True(t, progressed, "during the alarm the consumer made no progress after a put-back")
	drained(t, queue)
	drained(t, dlq)
}
