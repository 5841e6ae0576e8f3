// Package outbox records events that commit with a guarded handler's completion, and
// defines what relays hand to a broker.
//
// Publishing an event after a commit is a dual write: the commit succeeds, the publish
// fails, and downstream never learns of the payment. The transactional outbox closes it:
// inside a guarded handler, [Record] attaches the event to the completion (see
// idem.Attach), so it commits in the same transaction as the idempotency record and the
// business writes, or not at all. A relay then reads committed events and publishes them
// at least once, in order per ordering key; the consumer deduplicates on the event's id,
// which travels with the message (the SQS or SNS message attribute [IDAttribute], which
// package sqs takes as the idempotency key by default; the [Envelope]'s [EnvelopeKey] on
// EventBridge and Kinesis). The publishers are outbox/sqspub, outbox/snspub, outbox/ebpub
// and outbox/kinesispub.
//
// What commits an event is the store's:
//
//   - memstore.Store keeps committed events in memory ([memstore.Store.Outbox]);
//   - dynamo.Store (with dynamo.WithOutboxTable) and dynamomem.Store put an item into the
//     outbox table in the completion's TransactWriteItems; the table's stream feeds the
//     relay;
//   - pgstore.Store inserts a row into its outbox table in the completion's transaction;
//     package pgstore/pgoutbox relays it;
//   - redisstore.Store refuses at the call: Redis has no transaction that could hold the
//     event with the record.
//
// A run whose lease was taken over commits nothing it attached, its events included: only
// the run that completes the record commits events, so a re-run after a crash commits its
// own events once.
//
// Sketch:
//
//	_, err := outbox.Record(ctx, outbox.Event{
//		Destination: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders",
//		OrderingKey: "customer-42", // this customer's events arrive in order
//		Type:        "OrderPlaced",
//		Payload:     []byte(`{"order":"ord-1","cents":1250}`),
//	})
package outbox
