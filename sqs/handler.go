package sqs

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
)

// Handler processes SQS batches for Lambda: each message under its idempotency key, with
// partial batch failures. It is safe for concurrent use; create one per function (container)
// and share it.
type Handler struct {
	fn     func(context.Context, events.SQSMessage) error
	cfg    config
	engine *batch.Engine
}

// source names SQS batches in the engine's log lines.
var source = batch.Source{Name: "sqs", System: "aws_sqs", Item: "message", IDAttr: "message_id", OrderedAttr: "fifo"}

// New returns a Handler that runs fn for each message of a batch, guarded by guard. fn
// should honour its context: it carries the Lambda deadline, and the lease that
// [idem.Attach] and [idem.Checkpoint] use. Options are applied in order; invalid settings
// return an error naming the option.
//
// The Handler takes from guard:
//
//   - its clock ([idem.WithClock]), which reads the time left before the deadline (see
//     [WithDeadlineMargin]) and times the outcomes;
//   - its logger ([idem.WithLogger]), which gets a summary line per batch (INFO, or WARN
//     when a message failed) and a line per failed message (WARN, with its message ID and
//     [Reason]; ERROR for a handler panic, with its stack). Lines carry message IDs, never
//     keys or bodies;
//   - its hooks ([idem.WithHooks]): OnBatch gets each batch's outcomes as an
//     [idem.BatchEvent], and the other hooks fire for every message that reaches the guard.
//
// A batch is a FIFO batch when its records' eventSourceARN ends in ".fifo", and only then.
// A test event for a FIFO consumer must carry such an ARN, or it is processed as a
// standard queue's (see "FIFO queues" in the package documentation).
func New(guard *idem.Guard, fn func(context.Context, events.SQSMessage) error, opts ...Option) (*Handler, error) {
	cfg := defaultConfig()
	engine, err := batch.NewAdapter(guard, fn == nil, "New", source, &cfg, opts)
	if err != nil {
		return nil, err
	}
	return &Handler{fn: fn, cfg: cfg, engine: engine}, nil
}

// Handle is the Lambda handler: pass h.Handle to lambda.Start, and enable
// ReportBatchItemFailures on the event source mapping (without it Lambda ignores the
// response and deletes every message of a batch that returned no error, failed ones too).
//
// Every message is processed as [Handler.Process] describes, and every failed one is listed
// in the response's BatchItemFailures by message ID, so SQS delivers it again. Handle
// returns an error, which makes Lambda retry the whole batch, only when the event is
// unusable ([ErrInvalidEvent]); a message's failure never fails the batch. It returns when
// every started message has finished.
func (h *Handler) Handle(ctx context.Context, event events.SQSEvent) (events.SQSEventResponse, error) {
	rep, err := h.Process(ctx, event)
	if err != nil {
		return events.SQSEventResponse{}, err
	}
	return rep.Response(), nil
}

// Process processes a batch and reports each message's [Outcome]; [Handler.Handle] is
// Process followed by [Report.Response]. Use it to act on outcomes beyond the response.
//
//   - Each message runs the handler under its key (see [WithKey]) through idem: a key
//     completed earlier is replayed without running ([StatusReplayed]), and the failures of
//     [Reason] are reported rather than returned.
//   - Messages of the batch that share a key are never raced: they are processed one after
//     another, in the event's order. One whose fingerprint equals an earlier one's takes
//     that message's outcome without running or calling the store: a success makes it a
//     [StatusDuplicate], a failure fails it too ([ReasonDuplicateFailed]), so SQS delivers
//     it again along with the original instead of acknowledging a message whose work did
//     not happen. One with another fingerprint goes through the guard, which refuses it
//     with idem.ErrPayloadMismatch if the earlier one completed.
//   - Standard queues: up to [WithConcurrency] messages run at once.
//   - FIFO queues (event source ARN ending in ".fifo", the only sign read): the messages of
//     a group run one at a time in order, up to [WithConcurrency] groups at once, each
//     claiming and completing its key on its own, never with batch claims. After a
//     failure, the rest of the group is not started ([ReasonGroupStopped]), so SQS delivers
//     the group again from the failed message on, in order; other groups go on.
//   - A message not yet started when less than the margin (see [WithDeadlineMargin]) is
//     left before ctx's deadline, or once ctx has ended, is not started
//     ([ReasonNotStarted]). A started message runs to completion under ctx.
//   - A panicking handler fails its message ([ReasonPanic]) and no other.
//   - With batch claims (see [WithBatchClaims]), the keys are claimed together before
//     the first message starts and the outcomes recorded together after the last ends, or
//     each as it ends where WithBatchClaims says so; a message whose outcome could not be
//     recorded fails ([ReasonLeaseLost], [ReasonStore]).
//
// Process returns an error only for an unusable event ([ErrInvalidEvent]), with a nil
// report. Before it returns, it writes the summary line to the guard's logger and calls
// the guard's OnBatch hook with the report as an [idem.BatchEvent] (see [New]).
func (h *Handler) Process(ctx context.Context, event events.SQSEvent) (*Report, error) {
	msgs := event.Records
	items := make([]batch.Item, len(msgs))
	fifo := false
	for i, m := range msgs {
		if m.MessageId == "" {
			return nil, fmt.Errorf("%w: record %d has no messageId", ErrInvalidEvent, i)
		}
		fifo = fifo || isFIFO(m.EventSourceARN)
		it := &items[i]
		it.ID, it.Group = m.MessageId, m.Attributes[attrGroupID]
		it.Key, it.Err = h.cfg.key(m)
		if it.Err == nil {
			it.Fingerprint, it.Err = h.cfg.fingerprint(m)
		}
	}
	// A FIFO message runs only once the one before it in its group has durably completed.
	mode := batch.Mode{Ordered: fifo, RecordEach: fifo, Destination: queueName(msgs)}
	rep, out := batch.Run(ctx, h.engine, msgs, items, h.fn, mode, func(o batch.Outcome, _ events.SQSMessage) Outcome {
		return Outcome{
			MessageID: o.ID, GroupID: o.Group, Key: o.Key,
			Status: o.Status, Reason: o.Reason, Err: o.Err, Duration: o.Duration,
		}
	})
	return &Report{
		Outcomes: out, FIFO: rep.Ordered,
		Ran: rep.Ran, Replayed: rep.Replayed, Duplicates: rep.Duplicates, Failed: rep.Failed,
		Duration: rep.Duration,
	}, nil
}

// queueName returns the name of the queue msgs came from: the last part of the first
// record's event source ARN ("arn:aws:sqs:<region>:<account>:<name>"); "" without one. An
// event source mapping reads one queue, so every record names the same.
func queueName(msgs []events.SQSMessage) string {
	for _, m := range msgs {
		if m.EventSourceARN != "" {
			return m.EventSourceARN[strings.LastIndexByte(m.EventSourceARN, ':')+1:]
		}
	}
	return ""
}

// isFIFO reports whether an event source ARN names a FIFO queue, whose names end in
// ".fifo". It is the only sign of a FIFO batch that the handler reads: a standard (fair)
// queue's messages may carry a MessageGroupId too.
func isFIFO(arn string) bool { return strings.HasSuffix(arn, ".fifo") }
