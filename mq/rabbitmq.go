package mq

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
)

// RabbitMQHandler processes Amazon MQ for RabbitMQ batches for Lambda: all or nothing, in
// queue order, each message under its idempotency key. It is safe for concurrent use;
// create one per function (container) and share it.
type RabbitMQHandler struct {
	fn     func(context.Context, events.RabbitMQMessage) error
	key    func(events.RabbitMQMessage) (string, error)
	engine *batch.Engine
}

// NewRabbitMQ returns a handler that runs fn for each message of a RabbitMQ batch,
// guarded by guard. fn should honour its context: it carries the Lambda deadline, and the
// lease that [idem.Attach] and [idem.Checkpoint] use. Options are applied in order;
// invalid settings return an error wrapping idem.ErrInvalidOption that names the option.
//
// The handler takes from guard its clock, its logger (a summary line per batch, a line
// per failed message with its messageId, never its key or data) and its hooks (OnBatch
// gets each batch with the messages' IDs as item IDs: the messageId, or
// "<queue>::<virtual host>#<index>" for a message without one).
func NewRabbitMQ(guard *idem.Guard, fn func(context.Context, events.RabbitMQMessage) error, opts ...Option) (*RabbitMQHandler, error) {
	cfg := defaultConfig()
	src := batch.Source{Name: "rabbitmq", System: "rabbitmq", Item: "message", IDAttr: "message_id", OrderedAttr: "ordered"}
	engine, err := batch.NewAdapter(guard, fn == nil, "NewRabbitMQ", src, &cfg, opts)
	if err != nil {
		return nil, err
	}
	if cfg.activeKey != nil {
		return nil, optErr("WithActiveMQKey", "applies to NewActiveMQ only")
	}
	key := cfg.rabbitKey
	if key == nil {
		key = RabbitMQMessageID
	}
	return &RabbitMQHandler{fn: fn, key: key, engine: engine}, nil
}

// Handle is the Lambda handler: pass h.Handle to lambda.Start. It processes the batch as
// [RabbitMQHandler.Process] says and returns [Report.Err]: an error wrapping
// [ErrBatchFailed] when a message failed, once every message that finished is recorded,
// so the redelivery replays them.
func (h *RabbitMQHandler) Handle(ctx context.Context, event events.RabbitMQEvent) error {
	return h.Process(ctx, event).Err()
}

// Process processes a batch and reports each message's [Outcome], queue by queue (in the
// order of their "<queue>::<virtual host>" names), each in the order Lambda sent them.
//
//   - Each message runs the handler under its key (see [WithRabbitMQKey]) through idem: a
//     key completed earlier replays without running ([StatusReplayed]), read back in the
//     batch's claim calls. A message without a messageId fails ([ErrMissingMessageID])
//     unless a key function is set.
//   - The messages of a queue run one at a time; after a failure the rest are not started
//     ([ReasonGroupStopped]) and their claims are released.
//   - Messages that share a key and data run once ([StatusDuplicate]).
//   - A message not yet started when less than the margin (see [WithDeadlineMargin]) is
//     left before ctx's deadline is not started ([ReasonNotStarted]).
//   - Every message that finished is recorded before Process returns: on dynamo.Store in
//     ⌈n/25⌉ claim calls and ⌈n/25⌉ completion calls for n new messages.
func (h *RabbitMQHandler) Process(ctx context.Context, event events.RabbitMQEvent) *Report {
	var (
		msgs  []events.RabbitMQMessage
		items []batch.Item
	)
	queues := slices.Sorted(maps.Keys(event.MessagesByQueue))
	for _, q := range queues {
		for i, m := range event.MessagesByQueue[q] {
			it := batch.Item{Group: q, Fingerprint: []byte(m.Data)}
			if m.BasicProperties.MessageID != nil && *m.BasicProperties.MessageID != "" {
				it.ID = *m.BasicProperties.MessageID
			} else {
				it.ID = q + "#" + strconv.Itoa(i)
			}
			it.Key, it.Err = h.key(m)
			msgs, items = append(msgs, m), append(items, it)
		}
	}
	destination := ""
	if len(queues) > 0 {
		destination, _, _ = strings.Cut(queues[0], "::")
	}
	run := func(ctx context.Context, i int) error { return h.fn(ctx, msgs[i]) }
	return process(ctx, h.engine, items, run, destination)
}
