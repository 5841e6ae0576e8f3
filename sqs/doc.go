// Package sqs processes Amazon SQS batches in AWS Lambda idempotently, with partial batch
// failures: each message runs its handler at most once per idempotency key, and only the
// messages that failed are delivered again.
//
// # Mental model
//
// SQS delivers every message at least once: a redelivery after a visibility timeout, a batch
// retried after a Lambda timeout, a producer that sent twice. A [Handler] runs each message
// through an [idem.Guard] under a key taken from the message (see [DefaultKey]), so a
// message whose key already completed is acknowledged without running again, and a message
// whose key is still in flight in another invocation is handed back to SQS to try later.
// Each message gets an [Outcome]; the failed ones become the BatchItemFailures of the
// response, and the rest of the batch is deleted from the queue. Messages of one batch that
// share a key are processed one after another, and a true duplicate takes the first one's
// outcome without any store round trip. On a FIFO queue, groups run concurrently and each
// group in order; a failure holds back the rest of its group so the order survives the
// redelivery. Messages not started before the Lambda deadline draws near are reported, not
// lost to the timeout.
//
// A [Handler] is a thin adapter over package batch, the engine that the kinesis and
// dynamostream packages share: messages become its items (message ID, key, body as the
// fingerprint, MessageGroupId as the ordering group of a FIFO batch), and its outcomes the
// response. [Status], [Reason], the errors and [PanicError] are the engine's.
//
// On its own, a new message costs two store round trips (claim and complete), a replayed
// one one, a duplicate within the batch none. With a store that claims and completes many
// records at once ([idemstore.BatchStore], such as dynamo.Store), a standard-queue batch is
// claimed in one round trip and its outcomes recorded in one more (see [WithBatchClaims];
// the outcomes wait for the batch's end only while their leases last until the Lambda
// deadline): ten new messages cost two DynamoDB calls instead of twenty, ten replays two
// instead of ten. A batch with a single key to claim claims it as a single message would,
// so that no batch costs more calls than the per-message path. Handlers that attach their
// writes complete together too, on a store that implements [idemstore.BatchAttachStore]
// (dynamo.Store): in as few transactions as its limits allow, each completion conditional
// on its own lease, a failing one reported alone.
//
// # FIFO queues
//
// A batch is processed as a FIFO queue's when the eventSourceARN of its records ends in
// ".fifo", the suffix SQS requires of every FIFO queue's name, and only then: a
// MessageGroupId, a MessageDeduplicationId or a SequenceNumber does not make it one (the
// messages of a standard fair queue carry a MessageGroupId too). A test event for a FIFO
// consumer must therefore carry a queue ARN ending in ".fifo", such as
// "arn:aws:sqs:eu-west-1:123456789012:ledger.fifo"; without it, the batch is processed as
// a standard queue's: its messages concurrently, no group held back after a failure, and
// its keys claimed together where [WithBatchClaims] allows. [Report.FIFO] says which way a
// batch went.
//
// A FIFO batch never uses batch claims: each message claims its key and records its
// outcome on its own, so that it runs only after the one before it in its group has
// durably completed. With dynamo.Store, a FIFO consumer therefore makes single-item calls
// only (PutItem, GetItem, UpdateItem, and TransactWriteItems when it attaches writes),
// and its role needs none of the PartiQL actions (dynamodb:PartiQLInsert,
// dynamodb:PartiQLUpdate) nor dynamodb:BatchGetItem, which batch claims on a standard
// queue use.
//
// # Usage
//
// This package's name is the same as the AWS SDK's SQS client package; a program that needs
// both imports one under another name, for example sqsclient
// "github.com/aws/aws-sdk-go-v2/service/sqs".
//
//	store, err := dynamo.New(ddb, os.Getenv("IDEMPOTENCY_TABLE"))
//	...
//	guard, err := idem.New(store, "credit-account")
//	...
//	h, err := sqs.New(guard, func(ctx context.Context, m events.SQSMessage) error {
//		return credit(ctx, m.Body) // attach its DynamoDB write with dynamo.Attach
//	})
//	...
//	lambda.Start(h.Handle)
//
// The event source mapping must enable ReportBatchItemFailures (FunctionResponseTypes in
// CloudFormation and SAM): without it Lambda ignores the response and deletes every message
// of the batch, failed ones included. Set the queue's visibility timeout to at least six
// times the function timeout, and give it a dead-letter queue (redrive policy) so a message
// that keeps failing stops being retried.
//
// See https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html for
// partial batch responses, https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html for
// the event and the event source mapping, and
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/FIFO-queues.html
// for message groups and deduplication IDs.
package sqs
