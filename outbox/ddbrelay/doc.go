// Package ddbrelay relays the events that dynamo.Store commits into its outbox table (see
// package outbox and dynamo.WithOutboxTable) to a broker: a Lambda handler on the outbox
// table's stream that publishes each committed event at least once, in order per ordering
// key, through any [outbox.Publisher] (package outbox/sqspub for SQS standard and FIFO
// queues).
//
// # Mental model
//
// The outbox item of an event is put in the completion's TransactWriteItems, so it is in
// the table, and on its stream, if and only if the run committed: an event of a
// rolled-back or fenced-off run never reaches the stream. The item's partition key is the
// event's ordering key, and DynamoDB Streams keeps one partition key's changes in one
// shard, in order; Lambda's event source mapping reads a shard one batch at a time. The
// [Relay] is a dynamostream handler: it publishes a batch's INSERT records (REMOVE records
// are TTL deletions, skipped), one ordering key's events one at a time, and stops a key at
// its first failure. Its partial batch response names, for each key that stopped, the
// lowest sequence number not published: Lambda checkpoints before it and delivers the
// shard again from it, so nothing is skipped.
//
// At least once: a publish whose answer was lost is reported failed and sent again with
// the same event id, and so is a batch whose invocation crashed. The id travels with the
// message ([outbox.IDAttribute]), and consumers deduplicate on it (package sqs does with
// its default options). The relay guards each publish by the event id on its own guard,
// so the records after a failure that Lambda delivers again are not sent again.
//
// A crashed invocation's claims hold their events until their lease ends (its deadline
// plus the guard's lease margin, idem.WithLeaseMargin), and Lambda retries far sooner. The
// relay waits for an event in flight elsewhere (dynamostream.WithWaitInFlight): it takes
// the event over once that lease ends, if it ends before the event's cut-off (the deadline
// less the relay's margin, [WithDeadlineMargin]), and else reports the event failed at
// the cut-off. So each retry spent waiting lasts the timeout less the margin, and a crash
// spends fewer than (timeout + lease margin) / (timeout − margin) of the mapping's
// retries, not one per quick retry: at most one with the template's 30 s timeout (margin
// 5 s), at most two with Lambda's default 3 s (margin 0.75 s, a quarter of the timeout;
// lease margin 2 s). Set MaximumRetryAttempts well above that.
//
// Lag: [Hooks.OnLag] gets each batch's oldest record's age. Lambda's IteratorAge metric
// of the event source mapping (AWS/Lambda, per function) is the native measure of the
// same lag; alarm on either.
//
// # Usage
//
//	store, err := dynamo.New(ddb, os.Getenv("IDEMPOTENCY_TABLE"))
//	...
//	guard, err := idem.New(store, "outbox-relay", idem.WithExpiry(48*time.Hour))
//	...
//	relay, err := ddbrelay.New(guard, sqspub.New(sqsClient))
//	...
//	lambda.Start(relay.Handle)
//
// The guard's records must outlive every delivery of an event's record: the mapping's
// MaximumRecordAgeInSeconds (6 hours in infra/template.yaml) and the stream's 24 hours.
// With idem.DefaultExpiry (an hour), a record Lambda delivers again after that (a key
// stuck behind a failing event, then freed) finds no record of its publish, and the
// event is published again; cmd/outbox-relay sets 48 hours.
//
// The event source mapping on the outbox table's stream must enable
// ReportBatchItemFailures (FunctionResponseTypes), and should set
// BisectBatchOnFunctionError, a MaximumRetryAttempts bound and an on-failure destination;
// infra/template.yaml deploys it so. A record discarded after its retries is an event not
// relayed: its description is on the on-failure destination, and the item stays in the
// outbox table until its TTL (dynamo.DefaultOutboxRetention), to be published again by
// hand.
//
// See https://docs.aws.amazon.com/lambda/latest/dg/with-ddb.html and
// https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-batchfailurereporting.html.
package ddbrelay
