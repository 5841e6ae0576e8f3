// Package dynamostream processes Amazon DynamoDB Streams batches in AWS Lambda
// idempotently, with partial batch failures: each record runs its handler at most once
// per idempotency key, the changes of one item run in order, and a failure is reported so
// that Lambda delivers the shard again from it, never past it.
//
// # Mental model
//
// A DynamoDB stream holds each item's changes in order within a shard. Lambda reads a
// shard in sequence order and, with ReportBatchItemFailures, checkpoints before the
// lowest sequence number the function reports; it then delivers every record from that
// one on again (with BisectBatchOnFunctionError it splits the batch there). So the changes
// of one item must stop at its first failure: a later change that ran would apply out of
// order. A [Handler] runs the records of one item (its primary key, [ItemKey]) one at a
// time in sequence order and stops that item at its first failure: the later records are
// not started, their claims are released, and the first failure's sequence number is
// reported. A record is recorded, with its attached writes, before the next record of its
// item starts, so a failure to record it (an attached write's condition) is such a first
// failure too. Records of other items go on, concurrently (see [WithConcurrency]).
// [WithOrderingKey] with one value for every record orders the whole shard instead:
// nothing after a failure runs.
//
// When Lambda delivers the shard again from the lowest failure, the records after it that
// finished are in the batch once more. They replay from the store in the calls that claim
// the batch's new records: on dynamo.Store a batch of n records of distinct items costs
// ⌈n/25⌉ claim calls and ⌈n/25⌉ completion calls, where a per-record idempotent handler
// makes 2n. A record followed in the batch by another of its item costs one completion
// call of its own (see [WithBatchClaims]).
//
// Records are keyed by their eventID ([DefaultKey]), the same on every delivery of one
// change; [WithKey] and [WithKeyJMESPath] choose another (for example a field of the new
// image).
//
// # Usage
//
//	store, err := dynamo.New(ddb, os.Getenv("IDEMPOTENCY_TABLE"))
//	...
//	guard, err := idem.New(store, "project-order")
//	...
//	project := func(ctx context.Context, r events.DynamoDBEventRecord) error {
//		return write(ctx, r.EventName, r.Change.NewImage) // attach it with dynamo.Attach
//	}
//	h, err := dynamostream.New(guard, project)
//	...
//	lambda.Start(h.Handle)
//
// The event source mapping must enable ReportBatchItemFailures (FunctionResponseTypes in
// CloudFormation and SAM); without it Lambda ignores the response. Give it
// BisectBatchOnFunctionError, a MaximumRetryAttempts bound and an on-failure destination,
// so a record that keeps failing stops holding its shard back.
//
// See https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-batchfailurereporting.html
// for partial batch responses and
// https://docs.aws.amazon.com/lambda/latest/dg/with-ddb.html for the event and the event
// source mapping.
package dynamostream
