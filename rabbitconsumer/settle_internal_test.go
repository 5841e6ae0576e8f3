package rabbitconsumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// acks records how deliveries were settled, by delivery tag.
type acks struct {
	mu    sync.Mutex
	calls map[uint64][]string
}

func (a *acks) add(tag uint64, call string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls[tag] = append(a.calls[tag], call)
	return nil
}

func (a *acks) Ack(tag uint64, _ bool) error { return a.add(tag, "ack") }

func (a *acks) Nack(tag uint64, _, requeue bool) error {
	return a.add(tag, fmt.Sprintf("nack requeue=%v", requeue))
}

func (a *acks) Reject(tag uint64, requeue bool) error {
	return a.add(tag, fmt.Sprintf("reject requeue=%v", requeue))
}

// A failed handler is returned to the queue with basic.reject, which RabbitMQ 4.3 and later
// count toward a quorum queue's delivery limit (they no longer count basic.nack), so the
// limit still bounds a message that always fails; one that did not fail (a per-message TTL
// that would have been held) is returned with basic.nack; a dead-letter is a nack without
// requeue.
func TestFailureIsRejectedNotNacked(t *testing.T) {
	for name, policy := range map[string]Policy{"Requeue": Requeue, "DeadLetter": DeadLetter} {
		t.Run(name, func(t *testing.T) {
			store := storetest.NewFaulty(memstore.New())
			guard, err := idem.New(store, "apply", idem.WithScope("test"))
			require.NoError(t, err)
			down := errors.New("store down")
			c, err := New(guard, "q", func(_ context.Context, d amqp.Delivery) error {
				if d.MessageId == "fail" {
					return errors.New("declined")
				}
				return nil
			}, WithFailurePolicy(policy), WithRequeueDelay(0))
			require.NoError(t, err)
			a := &acks{calls: map[uint64][]string{}}
			ds := []amqp.Delivery{
				{Acknowledger: a, DeliveryTag: 1, MessageId: "fail", Body: []byte("1")},
				{Acknowledger: a, DeliveryTag: 2, MessageId: "ok", Body: []byte("2")},
			}
			l := &link{closed: make(chan *amqp.Error), lost: make(chan struct{})}
			var requeues sync.WaitGroup
			held := c.settleBatch(context.Background(), l, inHand(ds), make(chan struct{}), &requeues)
			requeues.Wait()
			assert.Empty(t, held)
			want := "reject requeue=true"
			if policy == DeadLetter {
				want = "nack requeue=false"
			}
			assert.Equal(t, []string{want}, a.calls[1], "the failed message")
			assert.Equal(t, []string{"ack"}, a.calls[2], "the one that ran")

			// A message with a per-message TTL whose claim meets the store down: not held,
			// and not failed either.
			store.FailTimes("claim", down, false, 1)
			ttl := []amqp.Delivery{{Acknowledger: a, DeliveryTag: 3, MessageId: "ttl", Body: []byte("3"), Expiration: "60000"}}
			held = c.settleBatch(context.Background(), l, inHand(ttl), make(chan struct{}), &requeues)
			requeues.Wait()
			assert.Empty(t, held)
			assert.Equal(t, []string{"nack requeue=true"}, a.calls[3], "the message with a TTL")
		})
	}
}

// A completion that committed nothing (idemstore.ErrNotCommitted) under DeadLetter: held
// with its count while the count is within WithNotCommittedRetries, dead-lettered past it;
// one with a per-message TTL, which cannot be held, is rejected with requeue (counted
// toward a quorum queue's delivery limit on every RabbitMQ version), not dead-lettered.
func TestNotCommittedIsHeldThenFollowsPolicy(t *testing.T) {
	guard, err := idem.New(memstore.New(), "apply", idem.WithScope("test"))
	require.NoError(t, err)
	c, err := New(guard, "q", func(ctx context.Context, _ amqp.Delivery) error {
		return idem.Attach(ctx, func() error { return fmt.Errorf("%w: throttled", idemstore.ErrNotCommitted) })
	}, WithFailurePolicy(DeadLetter), WithRequeueDelay(0), WithNotCommittedRetries(2))
	require.NoError(t, err)
	a := &acks{calls: map[uint64][]string{}}
	l := &link{closed: make(chan *amqp.Error), lost: make(chan struct{})}
	var requeues sync.WaitGroup
	settle := func(in []held) []held {
		h := c.settleBatch(context.Background(), l, in, make(chan struct{}), &requeues)
		requeues.Wait()
		return h
	}
	in := inHand([]amqp.Delivery{{Acknowledger: a, DeliveryTag: 1, MessageId: "nc", Body: []byte("1")}})
	for want := 1; want <= 2; want++ {
		in = settle(in)
		require.Len(t, in, 1, "held, run %d", want)
		assert.Equal(t, want, in[0].uncommitted)
	}
	assert.Empty(t, settle(in), "the third run")
	assert.Equal(t, []string{"nack requeue=false"}, a.calls[1], "dead-lettered past the retries")

	ttl := inHand([]amqp.Delivery{{Acknowledger: a, DeliveryTag: 2, MessageId: "nc-ttl", Body: []byte("2"), Expiration: "60000"}})
	assert.Empty(t, settle(ttl))
	assert.Equal(t, []string{"reject requeue=true"}, a.calls[2], "the message with a TTL")
}
