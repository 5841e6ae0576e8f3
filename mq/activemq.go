package mq

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
)

// ActiveMQHandler processes Amazon MQ for ActiveMQ batches for Lambda: all or nothing, in
// queue order, each message under its idempotency key. It is safe for concurrent use;
// create one per function (container) and share it.
type ActiveMQHandler struct {
	fn     func(context.Context, events.ActiveMQMessage) error
	key    func(events.ActiveMQMessage) (string, error)
	engine *batch.Engine
}

// NewActiveMQ returns a handler that runs fn for each message of an ActiveMQ batch,
// guarded by guard. fn should honour its context: it carries the Lambda deadline, and the
// lease that [idem.Attach] and [idem.Checkpoint] use. Options are applied in order;
// invalid settings return an error wrapping idem.ErrInvalidOption that names the option.
//
// The handler takes from guard its clock, its logger (a summary line per batch, a line
// per failed message with its messageID, never its key or data) and its hooks (OnBatch
// gets each batch with the messages' IDs as item IDs).
func NewActiveMQ(guard *idem.Guard, fn func(context.Context, events.ActiveMQMessage) error, opts ...Option) (*ActiveMQHandler, error) {
	cfg := defaultConfig()
	src := batch.Source{Name: "activemq", System: "activemq", Item: "message", IDAttr: "message_id", OrderedAttr: "ordered"}
	engine, err := batch.NewAdapter(guard, fn == nil, "NewActiveMQ", src, &cfg, opts)
	if err != nil {
		return nil, err
	}
	if cfg.rabbitKey != nil {
		return nil, optErr("WithRabbitMQKey", "applies to NewRabbitMQ only")
	}
	key := cfg.activeKey
	if key == nil {
		key = ActiveMQMessageID
	}
	return &ActiveMQHandler{fn: fn, key: key, engine: engine}, nil
}

// Handle is the Lambda handler: pass h.Handle to lambda.Start. It processes the batch as
// [ActiveMQHandler.Process] says and returns [Report.Err]: an error wrapping
// [ErrBatchFailed] when a message failed, once every message that finished is recorded,
// so the broker's redelivery replays them.
func (h *ActiveMQHandler) Handle(ctx context.Context, event events.ActiveMQEvent) error {
	return h.Process(ctx, event).Err()
}

// Process processes a batch and reports each message's [Outcome].
//
//   - Each message runs the handler under its key (see [WithActiveMQKey]) through idem: a
//     key completed earlier replays without running ([StatusReplayed]), read back in the
//     batch's claim calls.
//   - The messages of a queue run one at a time in the order Lambda sent them; after a
//     failure the rest are not started ([ReasonGroupStopped]) and their claims are
//     released.
//   - Messages that share a key and data run once ([StatusDuplicate]).
//   - A message not yet started when less than the margin (see [WithDeadlineMargin]) is
//     left before ctx's deadline is not started ([ReasonNotStarted]).
//   - Every message that finished is recorded before Process returns: on dynamo.Store in
//     ⌈n/25⌉ claim calls and ⌈n/25⌉ completion calls for n new messages.
func (h *ActiveMQHandler) Process(ctx context.Context, event events.ActiveMQEvent) *Report {
	msgs := event.Messages
	items := make([]batch.Item, len(msgs))
	for i, m := range msgs {
		it := &items[i]
		it.ID, it.Group, it.Fingerprint = m.MessageID, m.Destination.PhysicalName, []byte(m.Data)
		it.Key, it.Err = h.key(m)
	}
	destination := ""
	if len(msgs) > 0 {
		destination = msgs[0].Destination.PhysicalName
	}
	run := func(ctx context.Context, i int) error { return h.fn(ctx, msgs[i]) }
	return process(ctx, h.engine, items, run, destination)
}
