// Package kafka processes Amazon MSK and self-managed Apache Kafka batches in AWS Lambda
// idempotently: each record runs its handler at most once per idempotency key, the
// records of one record key within a topic-partition run in offset order, and a failure
// stops that key, so nothing after it runs before it has succeeded.
//
// # Mental model
//
// Lambda delivers Kafka records grouped by topic-partition ("orders-0"), in offset order
// within each, with keys and values base64-encoded ([Value], [RecordKey], [Header] decode
// them). Order holds within a partition, and a producer that keys its records keeps the
// records of one key in one partition; so a [Handler] runs the records of one record key
// of one partition one at a time in offset order, and stops that key at its first
// failure. Records of other keys, or other partitions, go on concurrently (see
// [WithConcurrency]). A record followed in the batch by another of its key is recorded,
// attached writes included, before that one starts: the next sees its writes, and a write
// refused when recording stops the key there (one single completion each on DynamoDB;
// records of distinct keys are recorded together).
//
// What Lambda does with a failure depends on the event source mapping:
//
//   - By default (and always outside provisioned poller mode) Kafka has no partial
//     response: any error retries the whole batch. [Handler.Handle] then records every
//     record that finished and returns an error ([ErrBatchFailed]); the redelivery replays
//     the finished records from the store, in the calls that claim the batch, and runs the
//     rest.
//   - In provisioned poller mode with ReportBatchItemFailures, [WithReportBatchItemFailures]
//     makes Handle answer with a partial batch response ([Response]) naming every
//     record that failed or was not started after a failure, by topic-partition and
//     offset. Lambda has no Go type for it; this
//     package defines it. Returned to a mapping without the setting, it would acknowledge
//     the failed records, so it is off by default.
//
// # Keys
//
// By default a record is keyed by the Idempotency-Key header its producer set
// ([DefaultKeyHeader], outbox.IDAttribute, matched without regard to case; see
// [WithKeyHeader]), or, without one, by its place in the log of its cluster,
// "<source>/<topic>-<partition>@<offset>" ([OffsetKey]: the source is the MSK cluster's
// ARN, or a self-managed cluster's bootstrap servers), which stays the same when Lambda
// delivers it again, and differs between two event source mappings on two clusters. A
// producer's retry that the broker did not deduplicate writes the record again
// at a new offset: only a key the producer chose (the header, or [WithKey] over the value)
// tells the two apart. A transactional outbox relay sets the header to the event's ID.
//
// Lambda's Kafka event carries no topic id (KIP-516), so the offset key cannot tell a
// topic deleted and created again under the same name from the old one: the new log's
// offsets start again at 0, and its records share the old records' keys (one with the old
// value replays without running, one with another value fails with a payload mismatch at
// every delivery). Where a topic may be recreated, key its records by an event id header
// (the outbox sets one) or [WithKey].
//
// # Usage
//
//	guard, err := idem.New(store, "apply-order-event")
//	...
//	h, err := kafka.New(guard, func(ctx context.Context, r events.KafkaRecord) error {
//		value, err := kafka.Value(r)
//		if err != nil {
//			return err
//		}
//		return apply(ctx, value) // attach its DynamoDB write with dynamo.Attach
//	})
//	...
//	lambda.Start(h.Handle)
//
// See https://docs.aws.amazon.com/lambda/latest/dg/with-msk.html and
// https://docs.aws.amazon.com/lambda/latest/dg/with-kafka.html for the event, and
// https://docs.aws.amazon.com/lambda/latest/dg/kafka-retry-configurations.html for the
// error handling controls and partial batch responses of provisioned mode.
package kafka
