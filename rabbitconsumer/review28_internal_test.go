package rabbitconsumer

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// Review 28: an attached write that panics (a handler bug: a nil map, an index out of
// range, in the closure passed to idem.Attach or pgstore.Attach) crashes the consumer's
// process under WithBatchDeadline, which the README recommends to record a batch's
// outcomes together (one transaction on pgstore). With a deadline the lease outlasts, the
// batch engine leaves each outcome pending (idem.DoClaimed) and a store that completes
// attached writes in batches (memstore, pgstore, dynamo: idemstore.BatchAttachStore) runs
// the writes at the batch's end, in Batch.Settle, on a goroutine of its own, where neither
// the batch engine's recover (around the handler and, without a deadline, the completion
// too) nor the consumer's reaches. The process dies with every message in hand; the broker
// redelivers the poison message to the next consumer, which dies the same way: on a
// classic queue for ever, and every consumer of the queue in turn. The package
// documentation settles a handler that "panicked" under the failure policy, and fix20
// recovered WithKey's panics for the same reason ("rather than crash the process at each
// redelivery"); without WithBatchDeadline the same panic is recovered (ReasonPanic).
//
// Schedule: memstore, DeadLetter policy, WithBatchDeadline(30 s); one batch of two
// deliveries, the first whose handler attaches a write that panics, the second a write
// that succeeds; settleBatch on a fake channel. Run in a child process (the crash takes
// the test binary with it). Expected: the panic recovered as the message's failure
// (nothing committed), the first dead-lettered, the second acknowledged, the process
// alive. Observed: the child dies with that panic, from
// memstore.(*Store).CompleteManyAttached, called by idem.(*Batch).Settle.func1.
//
// Severity: high (availability: one poison message stops every consumer of the queue, in
// a crash loop; the other messages in hand are redelivered and their handlers' effects
// outside attached writes repeated).
func TestReview28_AttachedWritePanicCrashesTheConsumer(t *testing.T) {
	if os.Getenv(envChild) == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestReview28_AttachedWritePanicCrashesTheConsumer$", "-test.count=1")
		child.Env = append(os.Environ(), envChild+"=1")
		out, err := child.CombinedOutput()
		assert.NoError(t, err, "the consumer's process crashed on a panicking attached write:\n%s", tail(out, 2500))
		return
	}
	guard, err := idem.New(memstore.New(), "apply", idem.WithScope("test"))
	require.NoError(t, err)
	c, err := New(guard, "q", func(ctx context.Context, d amqp.Delivery) error {
		if d.MessageId != "poison" {
			return idem.Attach(ctx, func() error { return nil })
		}
		return idem.Attach(ctx, func() error {
			panic("the handler's bug: index out of range in the write") // a nil map, say
		})
	}, WithFailurePolicy(DeadLetter), WithRequeueDelay(0), WithBatchDeadline(30*time.Second))
	require.NoError(t, err)
	a := &acks{calls: map[uint64][]string{}}
	l := &link{closed: make(chan *amqp.Error), lost: make(chan struct{})}
	var requeues sync.WaitGroup
	in := inHand([]amqp.Delivery{
		{Acknowledger: a, DeliveryTag: 1, MessageId: "poison", Body: []byte("1")},
		{Acknowledger: a, DeliveryTag: 2, MessageId: "fine", Body: []byte("2")},
	})
	held := c.settleBatch(context.Background(), l, in, make(chan struct{}), &requeues)
	requeues.Wait()
	assert.Empty(t, held)
	assert.Equal(t, []string{"nack requeue=false"}, a.calls[1], "the panicking message, under DeadLetter")
	assert.Equal(t, []string{"ack"}, a.calls[2], "the message beside it")
}

// envChild marks a child process of a test that expects it may crash: its TestMain starts
// no server (see main_test.go).
const envChild = "IDEM_REVIEW28_CHILD"

// tail returns the last n bytes of b.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
