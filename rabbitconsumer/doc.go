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
//   - its key in flight elsewhere, the store down, its lease taken over, or its handler cut
//     off (see below): held for the requeue delay ([WithRequeueDelay]) and put back,
//     never acknowledged before it is back in the queue, so it comes back once the other
//     run finished (and replays) or the store is back;
//   - its handler failed: requeued or dead-lettered ([WithFailurePolicy]);
//   - no key, a key used before with another body, or a failure the guard remembers
//     (idem.WithRememberFailures): dead-lettered, with a WARN line.
//
// A handler is cut off, not failed, when it returns an error after the consumer or idem
// ended its context: context.Cause of its context is idem.ErrLeaseLost (the heartbeat's
// extensions were refused, or the lease ran out), the batch deadline ([WithBatchDeadline])
// or the consumer stopping. The cause decides, whatever the handler returns. Only the
// guard's own refusals (the outcome's reason) dead-letter regardless of the policy: a
// handler's error that wraps idem.ErrPayloadMismatch (of a guarded step of its own) is its
// failure, and follows the policy.
//
// # Putting a message back
//
// A quorum queue counts every nack with requeue against its delivery limit
// (x-delivery-limit, 20 by default on RabbitMQ 4), and dead-letters (or drops) the message
// there. A message that may pass later must not spend it: a store outage longer than the
// limit times the requeue delay would lose every message in hand. So a message is put back
// by publishing a copy (its body, message ID, headers and properties) on the consumer's
// channel, in confirm mode, and the original is acknowledged only once the broker confirms
// the copy. The copy goes through the default exchange to the queue consumed, not to the
// exchange and routing key it came with: those may route it to other queues bound to them,
// whose consumers would get it twice. Its exchange, routing key and user-id are kept in
// x-rabbitconsumer-* headers and restored before its key is chosen and its handler runs,
// so the handler sees the delivery it would have seen (only Redelivered is false); the
// broker's x-delivery-count is not copied. The copy joins the back of the queue, and a
// per-message TTL (expiration) starts again. A consumer that dies between the confirm and
// the acknowledgement leaves both in the queue: they share the key, so one runs and the
// other replays. When the copy cannot be had (the broker refuses it, or no confirm comes
// within 30 s) the original is nacked with requeue, which counts.
//
// A handler failure under the [Requeue] policy is nacked with requeue, and counts: that is
// how the delivery limit bounds a message that always fails.
//
// # Connections and long handlers
//
// The handlers of a lost connection (or closed channel) keep running: their outcomes are
// recorded, so the redeliveries the broker makes meanwhile meet their key in flight, are
// put back, and replay once they finish. [Consumer.Run] dials again only once they have
// returned, so a long handler delays the new connection.
//
// RabbitMQ closes a channel whose delivery stays unacknowledged longer than its
// consumer_timeout (30 minutes by default; rabbitmq.conf, or the queue's
// x-consumer-timeout argument on recent brokers), and requeues its deliveries. A handler
// that runs longer with idem.WithHeartbeat keeps its key, so the redelivery is put back
// until it finishes and then replays, but the consumer reconnects and the message is
// delivered again meanwhile: set consumer_timeout above the longest handler.
//
// A guard that fails open (idem.WithFailOpen) runs a message whose claim meets a store
// failure unguarded and acknowledges it, instead of putting it back: at most once no longer
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
