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
//   - its key in flight elsewhere, the store down, its lease taken over: held for the
//     requeue delay ([WithRequeueDelay]) and nacked with requeue, never run and never
//     acknowledged, so it comes back once the other run finished (and replays) or the
//     store is back;
//   - its handler failed: requeued or dead-lettered ([WithFailurePolicy]);
//   - no key, or a key used before with another body: dead-lettered, with a WARN line.
//
// A consumer that dies between recording and acknowledging leaves deliveries that replay.
// One that dies while a handler runs leaves its claim until the lease ends: another
// consumer meets the key in flight and requeues it until then, and takes the key over
// after (the lease ends when the claim's [idem.WithLease] does, or later with the
// heartbeat), so a handler must stop when its context ends.
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
