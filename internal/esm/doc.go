// Package esm emulates Lambda's event source mapping for streams (DynamoDB Streams and
// Kinesis), for end-to-end tests of stream handlers: a [Poller] reads a stream's shards
// from a [Source] and invokes a handler through lambda.NewHandler(h).Invoke with the JSON
// that Lambda sends, reads its partial batch response, and checkpoints, retries, bisects
// and discards as the event source mapping does. A [Report] lists every invocation, its
// outcome, every discarded batch and each shard's checkpoint, so that a test can show
// that every record's effect happened at most once and none was skipped.
//
// A test writes to a table whose stream is on (DynamoDB Local implements DynamoDB
// Streams), then drains the stream through the handler:
//
//	src := esm.NewDynamoDBStream(esm.NewStreamsClient(endpoint), streamARN)
//	p, err := esm.New(src, handler,
//		esm.WithReportBatchItemFailures(), esm.WithBisectBatchOnFunctionError())
//	report, err := p.Drain(ctx) // until no shard has a record left
//	err = report.Check()        // the checkpoint never passed an unsettled record
//
// Faults: [WithFault] fails an invocation before the handler runs ([FaultFail]) or drops
// the response of one that ran ([FaultLoseResponse]); [Crash], called from inside the
// handler, ends the invocation mid-batch as a dying process would (its context is
// cancelled, and its result is a function error whatever it returns); [WithTimeout] sets
// the function timeout, past which the invocation fails. A panic is a function error too.
// [WithRetryDelay] paces the retries of a handler that waits for something, such as a
// lease left by a crash, to end.
//
// # The rules, and where AWS states them
//
// Each rule below paraphrases the AWS Lambda Developer Guide: "Using AWS Lambda with
// Amazon DynamoDB" (with-ddb), "Configuring partial batch response with DynamoDB and
// Lambda" (services-ddb-batchfailurereporting; the Kinesis page says the same),
// "Retaining discarded records for a DynamoDB event source" (services-dynamodb-errors),
// "Lambda parameters for Amazon DynamoDB event source mappings" (services-ddb-params) and
// the Lambda FAQ; and the DynamoDB Developer Guide's "Change data capture for DynamoDB
// Streams" (Streams.html).
//
//   - Batches per shard, in order, one at a time. Lambda reads records in batches and
//     invokes the function synchronously with them, waiting for the result before it
//     polls the shard again (with-ddb); records of one shard are strictly serialized, a
//     record reaching the function only once the one before it has succeeded, while
//     shards are processed in parallel (the Lambda FAQ). BatchSize caps a batch: 100 by
//     default, at most 10,000 (services-ddb-params). Here ParallelizationFactor is 1: one
//     batch in flight per shard. DynamoDB's guide to reading a stream (Streams.html) asks
//     that a parent shard be processed before its children, and so does this poller.
//   - Success. By default the checkpoint moves to the batch's highest sequence number
//     only when the whole batch succeeds; any other result is a complete failure and the
//     batch is retried (services-ddb-batchfailurereporting).
//   - Partial responses count only with ReportBatchItemFailures on
//     ([WithReportBatchItemFailures]); otherwise the response is ignored. The response
//     is {"batchItemFailures":[{"itemIdentifier":"<SequenceNumber>"}]}. With several
//     items, Lambda checkpoints at the lowest sequence number and retries every record
//     from it on. An empty or null list, or an empty or null response, is a complete
//     success; an empty or null itemIdentifier, or one that names no record of the batch
//     ("an itemIdentifier with a wrong key name"), makes the whole batch a failure
//     (services-ddb-batchfailurereporting). A response that is not a JSON object is not
//     covered by the documentation; this poller fails the whole batch for it
//     ([InvalidResponse]), which never skips a record.
//   - Function errors retry the batch. If the function returns an error, Lambda retries
//     until the records expire, exceed MaximumRecordAgeInSeconds, or reach
//     MaximumRetryAttempts; -1, the default, retries without limit (services-dynamodb-errors,
//     services-ddb-params). Here the retries of a batch are counted for the record it
//     begins with, and reset when the checkpoint moves; a complete failure by an invalid
//     partial response counts the same as a function error.
//   - Bisection. With BisectBatchOnFunctionError ([WithBisectBatchOnFunctionError]) a
//     failed invocation splits the batch in two, whatever ReportBatchItemFailures says,
//     and the halves are retried one after the other; a split does not use up the retry
//     quota (services-dynamodb-errors). With a partial response and both settings on, the
//     batch splits at the returned sequence number and only the rest of it is retried
//     (services-ddb-batchfailurereporting). A batch of one record cannot split: it is
//     retried.
//   - Discarding. When the retries run out ([WithMaximumRetryAttempts]), Lambda discards
//     the batch, sends a description of it (shard, first and last sequence numbers, batch
//     size) to the on-failure destination if one is set, and goes on with the stream
//     (services-dynamodb-errors): here [Report.Discarded], and the checkpoint passes them.
//
// Not emulated: MaximumRecordAgeInSeconds and record expiry, batching windows, tumbling
// windows, filtering, ParallelizationFactor above 1, and the 6 MB payload limit.
//
// Kinesis: the lab module's esmkinesis package gives a Kinesis data stream's [Source]
// (its SDK stays out of this module's go.mod), with the same poller and rules.
//
// AWS documentation:
// https://docs.aws.amazon.com/lambda/latest/dg/with-ddb.html,
// https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-batchfailurereporting.html,
// https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html,
// https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-params.html,
// https://aws.amazon.com/lambda/faqs/,
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Streams.html.
package esm
