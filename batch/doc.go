// Package batch is the batch engine under every idem event source: SQS, Kinesis, DynamoDB
// Streams, and the sources to come (Kafka, Amazon MQ). It runs each record of a batch at
// most once per idempotency key, through an [idem.Guard], and tells the source adapter
// what became of each one, so the adapter can answer its source's way.
//
// # Mental model
//
// A source adapter maps its event's records to [Item]s (an ID the source knows the record
// by, an idempotency key, a fingerprint of its content, an ordering group) and calls
// [Engine.Process] with a function that runs the handler for one record. The engine:
//
//   - claims the batch's keys together ([idem.Guard.Claim]): on dynamo.Store one round
//     trip per 25 keys, which also answers the keys completed before, so a redelivered
//     record replays from these calls;
//   - runs items that share a key and content once (the others are duplicates), reports a
//     key in flight elsewhere as a failure (or waits for it: [WithWaitInFlight]), and
//     starts no item once less than the margin is left before the Lambda deadline;
//   - in an ordered batch ([Mode.Ordered]) runs the items of each group one at a time in
//     order, and stops a group at its first failure: the rest of the group fails with
//     [ReasonGroupStopped] without starting, and their claims are released;
//   - records the outcomes together after the last item (attached writes in as few
//     transactions as the store allows), or each as it ends where [idem.Batch] says so,
//     and with [Mode.RecordBeforeNext] each item that another item of its group follows;
//   - writes a summary log line and a line per failed item, and calls the guard's
//     [idem.Hooks.OnBatch] with the item IDs, never keys.
//
// The adapter then turns the [Report] into its source's response: SQS lists every failed
// message ([Report.Outcomes]); a stream reports the first failure of each ordering group
// ([Report.FirstFailures]), since Lambda checkpoints at the lowest reported sequence
// number and retries the shard from there.
//
// # Writing an adapter
//
// An adapter is a thin layer: decode the event, build the items, call Process, answer.
//
//	items := make([]batch.Item, len(records))
//	for i, r := range records {
//		key, err := keyOf(r) // an error fails the record with ReasonKey
//		items[i] = batch.Item{ID: r.ID, Group: r.Partition, Key: key, Fingerprint: r.Data, Err: err}
//	}
//	run := func(ctx context.Context, i int) error { return handle(ctx, records[i]) }
//	rep := engine.Process(ctx, items, run, batch.Mode{Ordered: true, RecordBeforeNext: true})
//	for _, i := range rep.FirstFailures() {
//		fmt.Println("report", records[i].ID)
//	}
//
// The adapters of this repository share the rest through three helpers: [Settings], the
// options every adapter offers (concurrency, deadline margin, batch claims) and one an
// adapter may offer (waiting for a key in flight), embedded in the adapter's
// configuration; [NewAdapter], its constructor's checks, options and engine; and [Run],
// which processes the records and maps each [Outcome] to the adapter's own outcome type.
//
// Choosing the mode:
//
//   - Unordered (SQS standard queues): every item may run concurrently with every other of
//     another key, and every failed item is reported.
//   - Ordered (Kinesis per partition key, DynamoDB Streams per item key, Kafka per
//     topic-partition and record key, Amazon MQ with one group for the whole queue): the
//     source redelivers from a failure on, so the items after it in its group must not run.
//     Items of different groups run concurrently; [WithConcurrency](1) runs the whole batch
//     one item at a time in its order.
//   - RecordBeforeNext with Ordered (Kinesis, DynamoDB Streams): an item that another
//     item of its group follows in the batch is recorded on its own (its completion and
//     attached writes committed, or its failure known) before that item starts, so the next
//     item sees its writes, and a failed recording stops the group there, the failed item
//     being its first failure. The keys are still claimed together, and the last item of
//     each group is recorded with the batch: a batch whose groups hold one item each costs
//     what an unordered batch does. A last item whose recording fails at the end fails
//     then; nothing of its group ran after it.
//   - RecordEach with Ordered (SQS FIFO queues): each item claims its key and records its
//     outcome on its own, the one before it in its group recorded before it starts.
//   - Ordered alone: the next item of a group starts once the one before returned, and
//     outcomes are recorded with the batch: if a recording then fails (the lease was lost,
//     the store failed, an attached write's condition failed), that item fails and is its
//     group's first failure, while the later items of its group have run, did not see its
//     attached writes, and are recorded. Use it only for handlers whose items of a group
//     do not depend on each other's writes.
//
// A source without partial responses (Kafka outside provisioned mode, Amazon MQ) returns
// an error for the whole batch when [Report.Failed] is not zero: Process has recorded every
// item that finished before it returns, so the redelivery replays them and runs the rest.
//
// [Source] names the adapter's log lines ("sqs: batch processed", message_id=…). The
// statuses, reasons and errors are the engine's; an adapter may alias them (package sqs
// does) so its users need not import this package.
//
// See https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html and
// https://docs.aws.amazon.com/lambda/latest/dg/services-kinesis-batchfailurereporting.html
// for partial batch responses.
package batch
