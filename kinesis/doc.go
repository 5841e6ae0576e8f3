// Package kinesis processes Amazon Kinesis Data Streams batches in AWS Lambda
// idempotently, with partial batch failures: each record runs its handler at most once
// per idempotency key, the records of a partition key run in order, and a failure is
// reported so that Lambda delivers the shard again from it, never past it.
//
// # Mental model
//
// Lambda reads a shard in sequence order and, with ReportBatchItemFailures, checkpoints
// before the lowest sequence number the function reports; it then delivers every record
// from that one on again. With BisectBatchOnFunctionError it splits the batch there. So
// within a partition key, processing must stop at the first failure: a later record that
// ran would run out of order, before the one that failed. A [Handler] therefore runs the
// records of one partition key one at a time in sequence order and stops that partition
// key at its first failure: the later records are not started, their claims are released,
// and the first failure's sequence number is reported. A record is recorded, with its
// attached writes, before the next record of its partition key starts: that one sees its
// writes, and a failure to record it (an attached write's condition) is such a first
// failure too. Records of other partition keys go on, concurrently (see
// [WithConcurrency]).
// [WithOrderingKey] with one value for every record orders the whole shard instead:
// nothing after a failure runs.
//
// When Lambda delivers the shard again from the lowest failure, the records after it that
// finished are in the batch once more. They replay from the store without running, in
// the same calls that claim the batch's new records: on dynamo.Store a batch of n records
// of distinct partition keys costs ⌈n/25⌉ claim calls and ⌈n/25⌉ completion calls, where a
// per-record idempotent handler makes 2n. A record followed in the batch by another of its
// partition key costs one completion call of its own (see [WithBatchClaims]). That is
// what makes running partition keys concurrently both safe and cheap.
//
// # Keys
//
// By default a record is keyed by its sequence number with its shard ([DefaultKey], the
// eventID), which Lambda keeps when it delivers a record again. A producer's retry is
// another matter: a PutRecord whose answer was lost (a timeout, a connection reset) and
// that the producer, or its SDK, sends again writes a second record, with a new sequence
// number and the same data. Only a key from the data tells the two apart: an event or
// order ID, chosen with [WithKeyJMESPath] ("event_id") or [WithKey].
//
// # Usage
//
//	store, err := dynamo.New(ddb, os.Getenv("IDEMPOTENCY_TABLE"))
//	...
//	guard, err := idem.New(store, "apply-event")
//	...
//	h, err := kinesis.New(guard, func(ctx context.Context, r events.KinesisEventRecord) error {
//		return apply(ctx, r.Kinesis.Data) // attach its DynamoDB write with dynamo.Attach
//	}, kinesis.WithKeyJMESPath("event_id"))
//	...
//	lambda.Start(h.Handle)
//
// The event source mapping must enable ReportBatchItemFailures (FunctionResponseTypes in
// CloudFormation and SAM); without it Lambda ignores the response. Give it
// BisectBatchOnFunctionError, a MaximumRetryAttempts bound and an on-failure destination,
// so a record that keeps failing stops holding its shard back.
//
// See https://docs.aws.amazon.com/lambda/latest/dg/services-kinesis-batchfailurereporting.html
// for partial batch responses and
// https://docs.aws.amazon.com/lambda/latest/dg/with-kinesis.html for the event and the
// event source mapping.
package kinesis
