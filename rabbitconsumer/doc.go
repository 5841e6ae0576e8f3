// Package rabbitconsumer consumes a RabbitMQ queue in a Go service with amqp091-go, running
// each message's handler at most once per idempotency key through idem, and acknowledging a
// message only once its outcome is recorded. It is a module of its own
// (github.com/idemkit/idem/rabbitconsumer), so Lambda users never download amqp091-go.
//
// # Mental model
//
// RabbitMQ delivers at least once: a message whose consumer dies, or whose channel closes,
// before it is acknowledged is delivered again, to this consumer or another, and a
// publisher that resends a message sends it twice. The usual answer is a processed_events
// table written in the business transaction; a [Consumer] gives the same answer with
// idem's records instead, and adds what that table lacks: a key in flight in another
// consumer is recognised and not run twice, a long handler keeps its claim with a heartbeat
// (idem.WithHeartbeat), a completed key replays its stored result, and the store may be
// DynamoDB, PostgreSQL or Redis.
//
// The deliveries that arrive together go through the batch engine (package batch) as one
// batch, beside the batches still running: their keys are claimed together, they run
// concurrently (never two of one key at once), their outcomes are recorded, and only then
// is each delivery settled. The prefetch ([WithPrefetch], the channel's basic.qos) bounds
// the deliveries in hand across all batches, so also how many handlers run at once:
//
//   - ran, replayed or a duplicate: acknowledged;
//   - its key in flight elsewhere, the store down (a completion that committed nothing
//     included, up to [WithNotCommittedRetries] times), or not started before the batch
//     deadline: held in hand, unacknowledged, and tried again (see below), so it runs once
//     the other run finished (and replays) or the store is back;
//   - its handler cut off (see below): rejected with requeue, and nothing stored for it;
//   - its handler failed, or its completion committed nothing more often than that
//     (idemstore.ErrNotCommitted: the handler ran, the store refused its outcome as a
//     whole): requeued or dead-lettered ([WithFailurePolicy]);
//   - no key, a key used before with another body, a record the guard cannot read
//     (idem.ErrIncompatibleRecord), or a failure the guard remembers
//     (idem.WithRememberFailures): dead-lettered, with a WARN line.
//
// A handler is cut off, not failed, when it returns an error after the consumer or idem
// ended its context: context.Cause of its context is idem.ErrLeaseLost (the heartbeat's
// extensions were refused, or the lease ran out), the batch deadline ([WithBatchDeadline])
// or the consumer stopping. The cause decides, when the handler returns an error: one that
// returns nil is not cut off, and its outcome is recorded. Only the guard's own refusals
// (the outcome's reason) dead-letter regardless of the policy: a handler's error that wraps
// idem.ErrPayloadMismatch (of a guarded step of its own) is its failure, and follows the
// policy.
//
// # Holding a message, requeueing a cut-off
//
// A quorum queue counts a message's returns to the queue against its delivery limit
// (x-delivery-limit, 20 by default on RabbitMQ 4), and dead-letters (or drops) the message
// there: before RabbitMQ 4.3 every basic.nack or basic.reject with requeue, from 4.3 only a
// basic.reject (a nack says the consumer did not process the message). The consumer rejects
// (basic.reject) what failed, a handler failure or a cut-off, so the limit counts those on
// every version, and nacks (basic.nack) what it returns without a failure: held messages
// requeued when it stops, and messages with a per-message TTL (below), which 4.3 does not
// count. A message that may pass later must not spend the limit: a store outage longer than
// the limit times the requeue delay would lose every message in hand. So a message whose
// key is in flight elsewhere (or was taken over by another invocation), whose store call
// failed, or which the batch deadline left unstarted, is held: unacknowledged, its claim is
// tried again in the consumer after the requeue delay ([WithRequeueDelay]), the wait
// doubling up to 30 s, until it runs, replays or fails otherwise. It is never requeued for
// these causes, so it spends no delivery count, and the consumer never publishes: its user
// needs only read permission on the queue, and a resource alarm (which blocks publishing
// connections) does not stop it. A held message keeps its prefetch slot, which bounds how
// many are held; a key in flight elsewhere becomes claimable when that run records its
// outcome or its lease ends. When the consumer stops or its channel closes, the held
// messages are nacked with requeue at once (a quorum queue counts these before 4.3).
//
// A held message is not in the queue, so the broker does not expire it, and RabbitMQ does
// not tell a consumer when a message was queued, so how much of a per-message TTL is left
// is unknown. A message with one (the expiration property) is therefore never held: for
// these causes it is nacked with requeue after the requeue delay, and the broker, which
// keeps its original expiry, dead-letters (or drops) it if its TTL has passed, so the
// consumer never runs it after its expiry. Before RabbitMQ 4.3 each such nack counts toward
// a quorum queue's delivery limit, as any requeue does. A queue's own TTL (x-message-ttl)
// is not seen by the consumer: a message held past it may still run.
//
// A handler cut off is rejected with requeue after the requeue delay (at once when the
// consumer stops; when the channel closes the broker has requeued it already), whatever
// the failure policy, and counts toward a quorum queue's delivery limit: that is what
// bounds a poison message whose handler always outlives its lease or the batch deadline.
// Set the limit with that in mind (each deploy that stops a consumer mid-handler spends
// one). The consumer hands the guard the handler's error wrapped with idem.ErrDoNotStore,
// so the key is released and nothing is stored, whatever idem.WithRememberFailures says: a
// cut-off never becomes a remembered failure.
//
// A handler failure under the [Requeue] policy is rejected with requeue, and counts: that
// is how the delivery limit bounds a message that always fails. A completion that
// committed nothing (idemstore.ErrNotCommitted: the handler ran, the store refused its
// outcome and attached writes as a whole, and the key was released) may be either: the
// store answers so for failures that pass (a broken connection, a deadlock or
// serialization failure, a transaction cancelled by a conflict or throttling) and for
// failures that recur every time (an attached write over the store's size limit, or one
// that aborts pgstore's transaction), and the error does not tell them apart. So it is
// held like a store outage, spending no delivery count, and the consumer counts the
// delivery's runs that committed nothing: past [WithNotCommittedRetries] (default 5, the
// retries after waits of 1, 2, 4, 8 and 16 s with the default delay) it is settled as a
// handler failure, under the policy. Each retry runs the handler again, repeating its
// effects outside the attached writes: that is the price of not losing a message to a
// store blip, and what the bound limits. A message with a per-message TTL, not held, is
// rejected with requeue instead, and the consumer keeps its count per key for its
// redelivery (see [WithNotCommittedRetries]): past the bound it is settled under the
// policy, as a held one is. A record the guard cannot read (idem.ErrIncompatibleRecord: a
// newer release's schema, or a damaged item) is not held: every redelivery meets it again,
// so its message is dead-lettered without running.
//
// A nack or reject with requeue returns a message to a queue bounded by x-max-length or
// x-max-length-bytes as a ready message: with the default overflow (drop-head) a full queue
// drops its oldest ready message to make room, dead-lettering (or losing) a message that
// never ran. This holds for cut-offs, the [Requeue] policy and held messages requeued when
// the consumer stops; a held message itself takes no room while it is held. Use
// x-overflow reject-publish on a bounded queue, or leave it unbounded.
//
// # Connections and long handlers
//
// The handlers of a lost connection (or closed channel) keep running: their outcomes are
// recorded, so the redeliveries the broker makes meanwhile meet their key in flight, are
// held, and replay once they finish. [Consumer.Run] dials again only once they have
// returned, so a long handler delays the new connection.
//
// RabbitMQ closes a channel whose delivery stays unacknowledged longer than its
// consumer_timeout (30 minutes by default; rabbitmq.conf, or the queue's
// x-consumer-timeout argument on recent brokers), and requeues its deliveries. A handler
// that runs longer with idem.WithHeartbeat keeps its key, so the redelivery is held
// until it finishes and then replays, but the consumer reconnects and the message is
// delivered again meanwhile: set consumer_timeout above the longest handler. A message
// held (see above) is unacknowledged too: a store outage longer than consumer_timeout
// closes the channel the same way, and the broker requeues what the consumer held.
//
// A guard that fails open (idem.WithFailOpen) runs a message whose claim meets a store
// failure unguarded and acknowledges it, instead of holding it: at most once no longer
// holds for it. A consumer has the broker to wait with; leave fail-open off.
//
// # Keys
//
// A message is keyed by its message ID (the message-id property), which a publisher that
// resends keeps only if it sets one itself; without one, by the header [WithKeyHeader]
// names (the outbox's event ID, say); without either it is dead-lettered
// ([ErrMissingKey]), never run unguarded. [WithKey] chooses keys any other way. The body is
// the fingerprint: a key met again with another body is dead-lettered
// (idem.ErrPayloadMismatch).
//
// # Handlers and queue types
//
// The consumer settles every delivery itself, once its outcome is recorded: a handler must
// not call Ack, Nack or Reject on its amqp.Delivery (nor on the channel). A second
// settlement of a delivery tag is a channel error (PRECONDITION_FAILED, unknown delivery
// tag) that closes the channel and requeues everything else in hand, and an ack before the
// outcome is recorded loses the message if the process dies first.
//
// Consume a classic or quorum queue, not a stream (x-queue-type stream). A stream keeps its
// messages and has neither dead-lettering nor a delivery limit (RabbitMQ's streams guide):
// neither policy can do there what it says. RabbitMQ refuses basic.reject and basic.nack on
// a stream with a channel error (NOT_IMPLEMENTED on 3.10, the broker the tests run), so the
// first failure, cut-off or dead-letter closes the channel, and Consume returns
// [ErrChannelClosed]; a new subscription reads from the next message written to the stream,
// so the messages that were in hand are not delivered to it again.
//
// # Usage
//
//	guard, err := idem.New(store, "apply-order", idem.WithHeartbeat(10*time.Second))
//	...
//	c, err := rabbitconsumer.New(guard, "orders", func(ctx context.Context, d amqp.Delivery) error {
//		return apply(ctx, d.Body) // attach its writes with pgstore.Attach or dynamo.Attach
//	})
//	...
//	err = c.Run(ctx, os.Getenv("AMQP_URL")) // reconnects until ctx ends
//
// See https://www.rabbitmq.com/docs/confirms for acknowledgements and prefetch, and
// https://www.rabbitmq.com/docs/dlx for dead-lettering.
package rabbitconsumer
