package rabbitconsumer_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/pgstoretest"
	"github.com/idemkit/idem/rabbitconsumer"
)

// Review 20: a message whose key meets a record the guard cannot read
// (idem.ErrIncompatibleRecord: an unknown schema version, status or encoding, as a newer
// release writes and a rolled-back one meets) is held in hand forever. idem files that
// error under "give up, since a retry gets the same answer" and "the handler is not run
// again"; the batch engine classifies it as ReasonStore, and the consumer holds every
// ReasonStore outcome (settlement's default case), retrying the claim every 30 s for ever.
// The delivery never settles: it pins a prefetch slot (twenty such messages stop the
// consumer), spends no delivery count (so a quorum queue's limit never bounds it), and after
// consumer_timeout the broker closes the channel, requeueing everything else in hand too,
// after which it comes back and is held again. The package documentation says a held
// message is "tried again ... until it runs, replays or fails otherwise"; for this cause
// none of those ever happens.
//
// Schedule: a completed record of the key with schema version 2 is put in the store (what a
// newer release wrote); the message is published; the consumer (requeue delay 10 ms) claims,
// meets the record, and holds it. Expected: dead-lettered with a WARN line (as a key met
// with another body, or a remembered failure, which redelivery meets again), the handler
// never run. Observed: held, claimed again and again, never dead-lettered, never acked.
func TestReview20_IncompatibleRecordIsHeldForever(t *testing.T) {
	queue, dlq := declare(t)
	store := memstore.New()
	var seen batches
	guard := newGuard(t, store, idem.WithHooks(seen.hooks()))
	const id = "incompatible-1"
	stored, err := guard.StoredKey(idem.Request{Key: id})
	require.NoError(t, err)
	now := time.Now()
	store.Put(idemstore.Record{
		Key: stored, Status: idemstore.StatusCompleted, Expires: now.Add(time.Hour),
		Data: []byte(`{}`), Encoding: "json", Version: idemstore.SchemaVersion + 1,
	})
	var ran, holds atomic.Int64
	defer rabbitconsumer.SetOnHold(func() { holds.Add(1) })()
	c, err := rabbitconsumer.New(guard, queue, func(context.Context, amqp.Delivery) error {
		ran.Add(1)
		return nil
	}, rabbitconsumer.WithRequeueDelay(10*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, message(id))
	_, stop := consume(t, c)
	deadline := time.Now().Add(20 * time.Second)
	for ready(t, dlq) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	held := seen.failed("store")
	require.NotEmpty(t, held, "no outcome with reason store")
	assert.ErrorIs(t, held[0].Err, idem.ErrIncompatibleRecord, "held for this cause")
	assert.Zero(t, ran.Load(), "the handler ran over a record it cannot read")
	assert.Equal(t, 1, ready(t, dlq),
		"a record no retry can read is not dead-lettered: held %d times in 20 s and still in hand",
		holds.Load())
}

// Review 20: a completion that the store refuses as a whole, every time (an attached write
// over the store's item size limit, which idemstore documents as ErrNotCommitted; on
// pgstore a write that returns nil after one of its statements failed, or one that ends the
// completion's transaction), is a poison message the consumer re-runs for ever. The guard
// releases the key and returns an error wrapping idem.ErrStore; the batch engine calls it
// ReasonStore; the consumer holds it and claims again after the back-off, which succeeds
// (the key was released), so the handler runs again, fails to commit again, and so on,
// every 30 s at most, indefinitely. Because a held message is never nacked, a quorum
// queue's delivery limit, which the documentation names as what bounds a poison message,
// never counts it: each run repeats every effect the handler has outside its attached
// writes (an e-mail, an HTTP call) without end.
//
// Schedule: quorum queue, x-delivery-limit 2, dead-letter queue; the handler attaches a
// write that fails with idemstore.ErrNotCommitted and returns nil; requeue delay 10 ms.
// Expected: the handler's non-committing runs count toward the limit like a failure (or are
// otherwise bounded), so within 20 s the message is dead-lettered after at most limit+1
// runs. Observed: the handler runs again at every back-off and the message never leaves
// the consumer's hand.
//
// Since review 24 the bound is notCommittedBound(limit), not limit+1: the same error comes
// from a store failure that passes (TestReview24_StoreBlipAtCompletionIsDeadLettered), so
// each delivery is first run again in hand up to WithNotCommittedRetries times. No consumer
// can hold both reviews to limit+1: for three runs this poison and the outage of
// TestReview24_CompletionOutageSpendsTheDeliveryLimit look the same (three completions
// refused with ErrNotCommitted, the same limit), yet the outage must run a fourth time.
func TestReview20_NotCommittedPoisonRunsForever(t *testing.T) {
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
	var seen batches
	c, err := rabbitconsumer.New(newGuard(t, memstore.New(), idem.WithHooks(seen.hooks())), queue, func(ctx context.Context, d amqp.Delivery) error {
		fx.start(d.MessageId) // an effect outside the attached writes: a mail sent
		return idem.Attach(ctx, func() error {
			return fmt.Errorf("%w: attached item over the store's size limit", idemstore.ErrNotCommitted)
		})
	}, rabbitconsumer.WithRequeueDelay(10*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, message("too-large-1"))
	_, stop := consume(t, c)
	deadline := time.Now().Add(20 * time.Second)
	for ready(t, dlq) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	held := seen.failed("store")
	require.NotEmpty(t, held, "no outcome with reason store")
	assert.ErrorIs(t, held[0].Err, idemstore.ErrNotCommitted, "held for this cause")
	runs := fx.started("too-large-1")
	assert.LessOrEqual(t, runs, notCommittedBound(limit), "the handler of a message that never commits ran %d times", runs)
	assert.Equal(t, 1, ready(t, dlq), "a completion refused every time is never bounded by the delivery limit")
}

// Review 20: WithPrefetch accepts any n >= 1, but basic.qos carries the prefetch count in 16
// bits and amqp091-go's Channel.Qos converts with uint16(n) without a check. WithPrefetch(65536)
// sets a prefetch of 0, which RabbitMQ reads as unlimited: the broker sends the whole queue,
// and the consumer takes it all in hand (one batch per arrival, a goroutine and a held
// delivery each), the opposite of "It bounds the work in hand" — unbounded memory on a
// backlog. Any n above 65535 is silently cut to n mod 65536. Expected: New refuses a
// prefetch the protocol cannot carry (idem.ErrInvalidOption), or the consumer bounds what it
// takes in hand itself.
//
// Shown cheaply with n = 65538, cut to a prefetch of 2: three messages whose handlers block
// should all be in hand at once (3 < 65538), but the broker sends two. (With 65536 the
// bound is gone altogether; showing that needs more than 65536 messages.)
func TestReview20_PrefetchAbove65535Wraps(t *testing.T) {
	queue, _ := declare(t)
	_, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue,
		func(context.Context, amqp.Delivery) error { return nil }, rabbitconsumer.WithPrefetch(1<<16))
	if err != nil {
		require.ErrorIs(t, err, idem.ErrInvalidOption) // refused: the expected behaviour
		return
	}
	fx := newEffects()
	release := make(chan struct{})
	c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(_ context.Context, d amqp.Delivery) error {
		fx.start(d.MessageId)
		<-release
		return nil
	}, rabbitconsumer.WithPrefetch(1<<16+2))
	require.NoError(t, err)
	publish(t, queue, message("wrap-1"), message("wrap-2"), message("wrap-3"))
	_, stop := consume(t, c)
	inHand := func() int {
		return fx.started("wrap-1") + fx.started("wrap-2") + fx.started("wrap-3")
	}
	deadline := time.Now().Add(5 * time.Second)
	for inHand() < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	got := inHand()
	close(release)
	stop()
	assert.Equal(t, 3, got, "WithPrefetch(65538) took %d messages in hand: the prefetch was cut to 2", got)
}

// Review 20: with amqp091-go's automatic recovery (amqp.Config.Recovery, which
// WithAMQPConfig passes through unchecked), a lost connection does not close the consumer's
// delivery channel: the client redials, reopens the same *amqp.Channel, restores its qos and
// re-subscribes the consumer on the same Go channel ("the application's delivery channel
// stays valid"). Consume never sees the close, so the deliveries it had in hand (handlers
// running, held ones, delayed requeues) keep their delivery tags of the dead channel and are
// settled later on the new one, where tags start again at 1 and name other messages. A
// stale ack acknowledges another message whose handler has not finished: lost if that
// handler then fails (its nack or dead-letter meets an unknown tag, and the broker closes
// the channel), or if it was held or not yet run. A stale nack (requeue false) dead-letters
// another message that never ran.
//
// Schedule (DeadLetter policy, prefetch 1, memstore, Run with Recovery on and a Dial the
// test controls):
//  1. A is delivered on channel incarnation 1 (tag 1); its handler blocks.
//  2. The test closes the consumer's TCP connection. The broker requeues A; a plain consumer
//     R of the test (prefetch 1, never acking) takes it. Redial is let through only then.
//  3. amqp091 recovers: same *amqp.Channel, qos, consumer. B is published and delivered to
//     the consumer on incarnation 2, as tag 1; its handler blocks.
//  4. A's handler returns nil: its outcome is recorded and Ack(1) is sent on incarnation 2,
//     acknowledging B.
//  5. B's handler fails. Under DeadLetter B should end in the dead-letter queue; its
//     Nack(1, requeue=false) meets an unknown tag instead, and B is gone: not in the queue,
//     not dead-lettered, its handler's outcome a failure.
//
// Expected: the consumer refuses a Config with Recovery (idem.ErrInvalidOption), or never
// settles a delivery of an earlier channel incarnation (it drops those, as the broker has
// requeued them), so B is dead-lettered.
func TestReview20_ClientRecoveryAcksAnotherMessage(t *testing.T) {
	queue, dlq := declare(t)
	u, err := url.Parse(brokerURL(t))
	require.NoError(t, err)
	addr := u.Host
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	redial := make(chan struct{})
	dialer := func(network, _ string) (net.Conn, error) {
		mu.Lock()
		first := len(conns) == 0
		mu.Unlock()
		if !first {
			<-redial
		}
		c, err := net.DialTimeout(network, addr, 10*time.Second)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}
	cfg := amqp.Config{Dial: dialer, Recovery: &amqp.Recovery{
		ReconnectionConfig: &amqp.ReconnectionConfig{MaxRetryCount: 1000, RetryInterval: 50 * time.Millisecond},
	}}
	startedA, startedB := make(chan struct{}, 1), make(chan struct{}, 1)
	releaseA, releaseB := make(chan struct{}), make(chan struct{})
	var bOutcomes batches
	c, err := rabbitconsumer.New(newGuard(t, memstore.New(), idem.WithHooks(bOutcomes.hooks())), queue,
		func(_ context.Context, d amqp.Delivery) error {
			switch d.MessageId {
			case "A":
				startedA <- struct{}{}
				<-releaseA
				return nil
			default:
				startedB <- struct{}{}
				<-releaseB
				return errors.New("declined")
			}
		},
		rabbitconsumer.WithAMQPConfig(cfg), rabbitconsumer.WithPrefetch(1),
		rabbitconsumer.WithFailurePolicy(rabbitconsumer.DeadLetter))
	if err != nil {
		require.ErrorIs(t, err, idem.ErrInvalidOption) // refused: the expected behaviour
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx, brokerURL(t))
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			for _, ch := range []chan struct{}{releaseA, releaseB, redial} {
				select { // unblock whatever still waits, then let Run return
				case <-ch:
				default:
					close(ch)
				}
			}
			<-done
		})
	}
	defer stop()
	publish(t, queue, message("A"))
	<-startedA

	// R: a plain consumer that takes A once the broker requeues it, and never acks.
	_, rch := channel(t)
	require.NoError(t, rch.Qos(1, 0, false))
	rdeliveries, err := rch.Consume(queue, "", false, false, false, false, nil)
	require.NoError(t, err)
	mu.Lock()
	_ = conns[0].Close() // the network fails under the consumer
	mu.Unlock()
	select {
	case d := <-rdeliveries:
		require.Equal(t, "A", d.MessageId)
	case <-time.After(30 * time.Second):
		t.Fatal("A was not requeued to R")
	}
	close(redial)
	eventually(t, 30*time.Second, func() bool { return subscribed(t, queue) == 2 },
		"the consumer was not re-subscribed by amqp091's recovery")

	publish(t, queue, message("B"))
	select {
	case <-startedB:
	case <-time.After(30 * time.Second):
		t.Fatal("B was not delivered to the recovered consumer")
	}
	close(releaseA) // A's run records and acks its tag of the dead channel
	eventually(t, 30*time.Second, func() bool { return bOutcomes.last() != "" }, "A's batch did not finish")
	time.Sleep(time.Second) // let A's settlement reach the broker before B fails
	close(releaseB)
	eventually(t, 30*time.Second, func() bool { return len(bOutcomes.failed("handler")) > 0 },
		"B's handler failure was not reported")
	deadline := time.Now().Add(10 * time.Second)
	for ready(t, dlq) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	// Stop the consumer and close its connection: whatever it still had unacknowledged goes
	// back to the queue. R keeps A. B must be in the queue or the dead-letter queue.
	stop()
	inQueue, inDLQ := ready(t, queue), ready(t, dlq)
	assert.Equal(t, 1, inDLQ,
		"B failed under DeadLetter but is not dead-lettered (%d in the queue): A's stale ack took it", inQueue)
	assert.Equal(t, 1, inQueue+inDLQ, "B is lost: acknowledged by A's stale ack, neither queued nor dead-lettered")
}

// Review 20: the poison of TestReview20_NotCommittedPoisonRunsForever on PostgreSQL, from a
// handler bug the store documents: an attached write that returns nil after one of its
// statements failed (here it swallows a division by zero, as a helper that logs and goes
// on does). The completion's transaction can then only roll back, pgstore returns an error
// wrapping idemstore.ErrNotCommitted and idem.ErrStore, the key is released, and the
// consumer holds the message as a store outage and runs it again at every back-off, for
// ever; its effects outside the transaction (counted here) repeat each time, and a quorum
// queue's delivery limit never counts a run. Expected: at most limit+1 runs (since review
// 24, notCommittedBound(limit): see TestReview20_NotCommittedPoisonRunsForever), then
// dead-lettered.
func TestReview20_NotCommittedPoisonRunsForeverPostgres(t *testing.T) {
	brokerURL(t)
	store := pgstoretest.NewStore(t, pgstoretest.Pool(t))
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
	c, err := rabbitconsumer.New(newGuard(t, store), queue, func(ctx context.Context, d amqp.Delivery) error {
		fx.start(d.MessageId) // an effect outside the transaction: a mail sent
		return pgstore.Attach(ctx, func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT 1/0`); err != nil {
				_ = err // logged and ignored by a helper: the transaction is aborted
			}
			return nil
		})
	}, rabbitconsumer.WithRequeueDelay(10*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, message("swallowed-1"))
	_, stop := consume(t, c)
	deadline := time.Now().Add(20 * time.Second)
	for ready(t, dlq) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	runs := fx.started("swallowed-1")
	assert.LessOrEqual(t, runs, notCommittedBound(limit), "the handler of a message that never commits ran %d times", runs)
	assert.Equal(t, 1, ready(t, dlq), "a completion refused every time is never bounded by the delivery limit")
}

// notCommittedBound returns how many times at most a handler whose completion the store
// refuses every time runs, under the Requeue policy on a quorum queue with delivery limit
// limit and the default WithNotCommittedRetries: each of the limit+1 deliveries runs once
// and is run again in hand DefaultNotCommittedRetries times before it is rejected.
func notCommittedBound(limit int) int {
	return (limit + 1) * (rabbitconsumer.DefaultNotCommittedRetries + 1)
}
