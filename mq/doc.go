// Package mq processes Amazon MQ batches in AWS Lambda idempotently, for ActiveMQ and
// RabbitMQ brokers: each message runs its handler at most once per idempotency key, in
// queue order, and a failure stops the batch.
//
// # Mental model
//
// Amazon MQ takes no partial batch response: a function that returns an error gets the
// whole batch delivered again (ActiveMQ's default redelivery policy tries 6 times, then
// moves the messages to the broker's dead-letter queue). So a batch is all or nothing,
// and an [ActiveMQHandler] or [RabbitMQHandler] runs its messages one queue at a time in
// the order Lambda sent them, stops at the first failure (the messages after it are not
// started, and their claims are released), records every message that finished, and only
// then returns an error ([ErrBatchFailed]). The redelivery replays the finished messages
// from the store, in the calls that claim the batch, and runs the rest: nothing runs twice.
//
// Each message but a queue's last is recorded before the next starts, attached writes
// included, so a write refused when recording stops the queue there too, and the next
// message sees the writes of the one before. On DynamoDB a batch of 100 new messages of one
// queue costs 4 batch claims, 99 single completions and one batch completion.
//
// # Keys
//
// A message is keyed by its message ID by default: ActiveMQ's messageID, RabbitMQ's
// basicProperties.messageId. A publisher that retries a message keeps its ID only if it
// sets one itself. RabbitMQ's messageId is optional: a message without one fails
// ([ErrMissingMessageID], batch.ReasonKey) rather than run unguarded, and stops the batch
// like any failure. Publishers that set no ID need a key from the message:
// [WithRabbitMQKey] or [WithActiveMQKey].
//
// # Usage
//
//	guard, err := idem.New(store, "apply-order")
//	...
//	h, err := mq.NewRabbitMQ(guard, func(ctx context.Context, m events.RabbitMQMessage) error {
//		data, err := mq.Data(m.Data)
//		if err != nil {
//			return err
//		}
//		return apply(ctx, data) // attach its DynamoDB write with dynamo.Attach
//	})
//	...
//	lambda.Start(h.Handle)
//
// See https://docs.aws.amazon.com/lambda/latest/dg/with-mq.html for the events and the
// event source mapping.
package mq
