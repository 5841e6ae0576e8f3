// Package kafkaconsumer consumes Kafka topics in a Go service through franz-go, running
// each record at most once per idempotency key: an at-least-once consumer group made
// idempotent, without a hand-written processed_events table. It lives in a module of its
// own, so Lambda functions (package kafka) never download franz-go.
//
// # Mental model
//
// A [Consumer] polls a batch from its group's partitions and hands it to the batch engine
// that Lambda's Kafka adapter uses: the records of one record key within a partition run
// one at a time in offset order and stop at that key's first failure; other keys run
// concurrently ([WithConcurrency]). A record whose key completed before replays without
// running. After the batch, each partition's offset is committed up to its first failed
// record, never past a record whose outcome is not recorded; the partition is then
// consumed again from that record, so nothing after a failure is skipped.
//
// Kafka redelivers after a crash or a rebalance; idem answers the redelivery:
//
//   - A consumer killed mid-batch committed nothing of it: the partitions' next owner
//     gets the batch again, replays the records whose outcome the old owner recorded, and
//     runs the rest.
//   - After a rebalance the old owner may still be running a record (a host cut off from
//     the broker, a long handler): its key is in progress, and the new owner fails the
//     record (batch.ReasonInProgress) and polls it again, until it replays the old owner's
//     result or runs it after the old owner released it. It never skips it.
//   - A revocation waits for the batch in progress (kgo.BlockRebalanceOnPoll): every
//     record finishes and its outcome is recorded, or its claim released, and the
//     offsets are committed before the partitions go.
//   - While the store is down no record runs (idem fails closed), records fail with
//     batch.ReasonStore and an error wrapping idem.ErrStore, and nothing is committed;
//     [Consumer.Run] retries with back-off ([WithRetryBackoff]). Leave the guard's
//     idem.WithFailOpen off: each poll claims its records afresh, so a fail-open guard
//     runs a record whose claim meets a store failure unguarded, even one that an
//     earlier poll found in progress under another consumer.
//
// A handler that may run longer than a batch should uses WithBatchTimeout(0),
// WithBatchClaims(false) and the guard's idem.WithHeartbeat: its lease is extended while it
// runs, so no other consumer takes its key over.
//
// # Keys
//
// By default a record is keyed by its Idempotency-Key header ([DefaultKeyHeader], the
// outbox's outbox.IDAttribute, matched in any case), which an outbox relay sets to the
// event id, so a producer's retry written at a new offset is still one event; without it,
// by its place in its topic's log, "<cluster id>/<topic id>:<topic>-<partition>@<offset>"
// ([OffsetKey]). The cluster id is read from the brokers at the first poll, so two
// clusters never share a key; the topic id is the one the fetch returns (Kafka 3.1 and
// later), so a topic deleted and created again under the same name, whose offsets start
// again at 0, shares no key with the old one. A broker that returns no topic id gives
// "<cluster id>/<topic>-<partition>@<offset>", which a recreated topic's records share:
// there, key by a header or [WithKey]. Keys before topic ids had no "<topic id>:": a
// record processed under such a key runs again if it is delivered again after the
// upgrade. See [WithKeyHeader] and [WithKey].
//
// # Topics deleted and created again
//
// Offset commits name a topic, not its id (OffsetCommit up to Kafka 4.1). So when a
// topic is deleted and created again under the same name while its group consumes it,
// the offset of a record of the old topic that the consumer commits afterwards (a batch
// in flight at the deletion, or one whose commit failed and is retried) lands on the new
// topic. A consumer of the group that starts then takes the new topic up at that
// offset: the new topic's records below it never run in this group. Stop the group's
// consumers before deleting a topic, and reset the group's offsets for it
// (kafka-consumer-groups.sh --reset-offsets --to-earliest) before starting them on the
// new one.
//
// # Usage
//
//	guard, err := idem.New(store, "apply-credit")
//	...
//	c, err := kafkaconsumer.New(guard, func(ctx context.Context, r *kgo.Record) error {
//		return apply(ctx, r.Value) // attach its business write with idem.Attach
//	}, []kgo.Opt{
//		kgo.SeedBrokers(brokers...),
//		kgo.ConsumerGroup("credits-applier"),
//		kgo.ConsumeTopics("credits"),
//	})
//	...
//	defer c.Close()
//	return c.Run(ctx)
//
// See https://pkg.go.dev/github.com/twmb/franz-go/pkg/kgo for the client options, and
// https://kafka.apache.org/documentation/#consumerconfigs for what they mean to Kafka.
package kafkaconsumer
