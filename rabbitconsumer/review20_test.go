package rabbitconsumer_test

import (
	"context"
	"sync/atomic"
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
	guard := newGuard(t, store)
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
	assert.Zero(t, ran.Load(), "the handler ran over a record it cannot read")
	assert.Equal(t, 1, ready(t, dlq),
		"a record no retry can read is not dead-lettered: held %d times in 20 s and still in hand",
		holds.Load())
}
