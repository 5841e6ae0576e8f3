package rabbitconsumer_test

import (
	"context"
	"fmt"
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

// Review 28: the bound of WithNotCommittedRetries is the delivery's own count, and a
// message with a per-message TTL (the expiration property) is never held: each run whose
// completion committed nothing is rejected with requeue, and the redelivery counts from 0
// again. So under DeadLetter a completion the store refuses every time (an attached write
// over the size limit, one that swallows a failed statement, an attached write on
// redisstore) never reaches n+1 and is never dead-lettered: on a classic queue, which has
// no delivery limit, it runs again after every requeue delay for as long as its TTL lasts
// (an hour's TTL at the default 1 s delay: about 3600 runs, each repeating the handler's
// effects outside its attached writes). WithNotCommittedRetries promises "under
// [DeadLetter], n+1 times", RELIABILITY.md "under DeadLetter with n retries, dead-lettered
// after n+1 runs"; the package documentation's "counted, and bounded by the delivery limit
// and its TTL" holds only on a quorum queue, and the README's "counted" not at all on a
// classic queue.
//
// Schedule: classic queue with a dead-letter queue, DeadLetter policy,
// WithNotCommittedRetries(1), requeue delay 10 ms; one message with a TTL of an hour whose
// attached write is refused (idemstore.ErrNotCommitted) every time. Expected: the handler
// runs at most n+1 = 2 times for the message, which is then dead-lettered, as without a
// TTL (the count kept across the redeliveries of its key, say). Observed: rejected with
// requeue after every run, run 30 times within seconds, never dead-lettered.
//
// Severity: medium (an unbounded poison re-run under DeadLetter on the default queue type).
func TestReview28_NotCommittedPoisonWithTTLRunsUntilItsTTLUnderDeadLetter(t *testing.T) {
	const n = 1
	queue, dlq := declare(t)
	fx := newEffects()
	c, err := rabbitconsumer.New(newGuard(t, memstore.New()), queue, func(ctx context.Context, d amqp.Delivery) error {
		fx.start(d.MessageId)
		return idem.Attach(ctx, func() error {
			return fmt.Errorf("%w: attached item over the store's size limit", idemstore.ErrNotCommitted)
		})
	}, rabbitconsumer.WithRequeueDelay(10*time.Millisecond), rabbitconsumer.WithNotCommittedRetries(n),
		rabbitconsumer.WithFailurePolicy(rabbitconsumer.DeadLetter))
	require.NoError(t, err)
	const id = "ttl-poison-1"
	publish(t, queue, amqp.Publishing{MessageId: id, Body: []byte("body"), Expiration: "3600000"})
	_, stop := consume(t, c)
	deadline := time.Now().Add(30 * time.Second)
	for ready(t, dlq) == 0 && fx.started(id) < 30 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	assert.LessOrEqual(t, fx.started(id), n+1,
		"a completion refused every time ran past WithNotCommittedRetries under DeadLetter")
	assert.Equal(t, 1, ready(t, dlq), "never dead-lettered: its TTL (an hour) is the only bound")
}
