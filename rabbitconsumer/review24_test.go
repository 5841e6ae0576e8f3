package rabbitconsumer_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/pgstoretest"
	"github.com/idemkit/idem/rabbitconsumer"
)

// Review 24: fix20 settles every completion that committed nothing
// (idemstore.ErrNotCommitted) as a handler failure, under the failure policy. But idem's
// stores return ErrNotCommitted for passing store failures too, and say so: the guard's own
// read-back (owner.go, readBackCompletion) answers ErrNotCommitted when every attempt of a
// completion with attached writes failed and the record is still in progress; pgstore
// returns it for a connection broken while writes run, a serialization failure or a
// deadlock ("which say nothing of the business condition and may not recur ... a retryable
// failure, which the HTTP wrappers answer 503 with Retry-After"); dynamo for a transaction
// cancelled by a conflicting transaction or throttling. Under the DeadLetter policy each of
// these dead-letters the message at once: a store blip of a few hundred milliseconds at the
// moment a handler completes loses its message (its attached writes, the business effect,
// never committed, and the message sits in the dead-letter queue), where before fix20 it
// was held like any store failure, as the package documentation still promises for "the
// store down".
//
// Schedule (memstore behind storetest.Faulty, DeadLetter policy): the store fails the
// first three "complete" calls (the guard's three attempts without a deadline) with a
// connection error, then is healthy; the guard reads the record back, finds it in progress
// and answers ErrNotCommitted; the key is released. Expected: the message is held (or
// requeued) like any store failure, runs again once the store is back, and its attached
// write commits once; nothing is dead-lettered. Observed: dead-lettered after one store
// blip, the write never committed.
func TestReview24_StoreBlipAtCompletionIsDeadLettered(t *testing.T) {
	queue, dlq := declare(t)
	store := storetest.NewFaulty(memstore.New())
	store.FailTimes("complete", errors.New("read tcp 10.0.0.7:5432: connection reset by peer"), false, 3)
	var committed, runs atomic.Int64
	var seen batches
	c, err := rabbitconsumer.New(newGuard(t, store, idem.WithHooks(seen.hooks())), queue, func(ctx context.Context, _ amqp.Delivery) error {
		runs.Add(1)
		return idem.Attach(ctx, func() error {
			committed.Add(1) // the business effect, committed with the outcome
			return nil
		})
	}, rabbitconsumer.WithRequeueDelay(10*time.Millisecond),
		rabbitconsumer.WithFailurePolicy(rabbitconsumer.DeadLetter))
	require.NoError(t, err)
	publish(t, queue, message("blip-1"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return committed.Load() > 0 || ready(t, dlq) > 0 },
		"the message neither committed nor was dead-lettered")
	stop()
	failed := seen.failed("store")
	require.NotEmpty(t, failed, "no completion failed with reason store")
	require.ErrorIs(t, failed[0].Err, idemstore.ErrNotCommitted, "the blip's answer")
	assert.Equal(t, int64(1), committed.Load(),
		"a store blip at completion lost the message: its write never committed (%d runs)", runs.Load())
	assert.Zero(t, ready(t, dlq), "dead-lettered for a store failure that passed")
	assert.Zero(t, ready(t, queue))
}

// Review 24: the same hole with a real PostgreSQL deadlock, the textbook case of two
// transfers between the same two accounts in opposite orders. Each message's handler
// attaches a pgstore write that moves one unit from one account to the other; the two
// completions run at once, PostgreSQL's deadlock detector aborts one of them (SQLSTATE
// 40P01), pgstore answers ErrNotCommitted (a retryable failure, per its own documentation)
// and the guard releases the key. Under the DeadLetter policy the consumer dead-letters
// the victim: its transfer is never applied, though nothing about it failed and a retry a
// moment later would commit. Expected: both transfers applied once, the dead-letter queue
// empty. Observed: one of the two (whichever PostgreSQL picks) dead-lettered.
func TestReview24_DeadlockAtCompletionIsDeadLetteredPostgres(t *testing.T) {
	brokerURL(t)
	pool := pgstoretest.Pool(t)
	store := pgstoretest.NewStore(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := pool.Exec(ctx, `CREATE TABLE review24_accounts (id int PRIMARY KEY, balance int NOT NULL);
		INSERT INTO review24_accounts VALUES (1, 100), (2, 100)`, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	queue, dlq := declare(t)
	// Both handlers have returned before either completes, so the two transactions overlap.
	var arrived atomic.Int64
	both := make(chan struct{})
	var deadlocks atomic.Int64
	c, err := rabbitconsumer.New(newGuard(t, store), queue, func(ctx context.Context, d amqp.Delivery) error {
		var from, to int
		if _, err := fmt.Sscanf(string(d.Body), "%d->%d", &from, &to); err != nil {
			return err
		}
		if arrived.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
		case <-time.After(5 * time.Second):
		}
		return pgstore.Attach(ctx, func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `UPDATE review24_accounts SET balance = balance - 1 WHERE id = $1`, from); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `SELECT pg_sleep(0.5)`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE review24_accounts SET balance = balance + 1 WHERE id = $1`, to)
			var pe interface{ SQLState() string }
			if errors.As(err, &pe) && pe.SQLState() == "40P01" {
				deadlocks.Add(1)
			}
			return err
		})
	}, rabbitconsumer.WithRequeueDelay(10*time.Millisecond), rabbitconsumer.WithPrefetch(2),
		rabbitconsumer.WithFailurePolicy(rabbitconsumer.DeadLetter))
	require.NoError(t, err)
	publish(t, queue,
		amqp.Publishing{MessageId: "transfer-a", Body: []byte("1->2")},
		amqp.Publishing{MessageId: "transfer-b", Body: []byte("2->1")})
	_, stop := consume(t, c)
	moved := func() (a1, a2 int) {
		rows, err := pool.Query(ctx, `SELECT balance FROM review24_accounts ORDER BY id`)
		require.NoError(t, err)
		bal, err := pgx.CollectRows(rows, pgx.RowTo[int])
		require.NoError(t, err)
		return bal[0], bal[1]
	}
	// Each transfer that commits also completes its key.
	eventually(t, time.Minute, func() bool { return ready(t, dlq) > 0 || settledBoth(ctx, t, store) },
		"the transfers neither committed nor were dead-lettered")
	stop()
	require.Positive(t, deadlocks.Load(), "no deadlock happened: the schedule did not overlap the transactions")
	a1, a2 := moved()
	assert.Zero(t, ready(t, dlq), "a transfer aborted by a deadlock was dead-lettered (balances %d, %d)", a1, a2)
	assert.Equal(t, []int{100, 100}, []int{a1, a2},
		"both transfers applied once leave both balances at 100; one lost leaves 99/101")
}

// settledBoth reports whether both transfer keys are completed in store.
func settledBoth(ctx context.Context, t *testing.T, store idemstore.Store) bool {
	t.Helper()
	g := newGuard(t, store)
	for _, id := range []string{"transfer-a", "transfer-b"} {
		key, err := g.StoredKey(idem.Request{Key: id})
		require.NoError(t, err)
		rec, err := store.Get(ctx, key)
		if err != nil || rec == nil || rec.Status != idemstore.StatusCompleted {
			return false
		}
	}
	return true
}

// Review 24: the same cause under the default Requeue policy, on a quorum queue: each
// completion refused by a passing store failure is rejected with requeue and spends one
// delivery count, so a partial store outage that outlasts the delivery limit dead-letters
// the messages completing meanwhile. The package documentation holds store failures in
// hand precisely because "a store outage longer than the limit times the requeue delay
// would lose every message in hand"; a completion refused while reads still work (DynamoDB
// write throttling on a provisioned table, whose cancelled transaction dynamo answers with
// ErrNotCommitted; here the guard's read-back after three failed attempts) is not held.
//
// Schedule: quorum queue, x-delivery-limit 2; the store fails the first nine "complete"
// calls (three runs' worth, the fewest that exceed the limit; with the default limit of 20,
// 21 runs), reads keep working. Expected: the message waits out the outage like any store
// failure, then commits once; nothing dead-lettered. Observed: dead-lettered after three
// runs, its write never committed.
//
// idem itself files ErrNotCommitted as the retryable kind: "A retryable refusal (a
// conflict with another transaction, throttling, a broken connection) ... wraps
// idemstore.ErrNotCommitted" (idem.IsRefused). Review 20's poison (a completion refused
// every time) must stay bounded; a refusal that passes must not spend the limit, nor (test
// above) be final under DeadLetter.
func TestReview24_CompletionOutageSpendsTheDeliveryLimit(t *testing.T) {
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
	store := storetest.NewFaulty(memstore.New())
	store.FailTimes("complete", errors.New("ThrottlingException: rate of requests exceeds the allowed throughput"), false, 9)
	var committed, runs atomic.Int64
	c, err := rabbitconsumer.New(newGuard(t, store), queue, func(ctx context.Context, _ amqp.Delivery) error {
		runs.Add(1)
		return idem.Attach(ctx, func() error {
			committed.Add(1)
			return nil
		})
	}, rabbitconsumer.WithRequeueDelay(10*time.Millisecond))
	require.NoError(t, err)
	publish(t, queue, message("throttled-1"))
	_, stop := consume(t, c)
	eventually(t, time.Minute, func() bool { return committed.Load() > 0 || ready(t, dlq) > 0 },
		"the message neither committed nor was dead-lettered")
	stop()
	assert.Equal(t, int64(1), committed.Load(),
		"the message was lost to a completion outage of %d runs: its write never committed", runs.Load())
	assert.Zero(t, ready(t, dlq), "dead-lettered by the delivery limit for a store failure that passed")
}
