package kinesis

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
)

// Handler processes Kinesis batches for Lambda: each record under its idempotency key,
// the records of a partition key in order, with partial batch failures. It is safe for
// concurrent use; create one per function (container) and share it.
type Handler struct {
	fn     func(context.Context, events.KinesisEventRecord) error
	cfg    config
	engine *batch.Engine
}

// source names Kinesis batches in the engine's log lines.
var source = batch.Source{Name: "kinesis", System: "aws_kinesis", Item: "record", IDAttr: "sequence_number", OrderedAttr: "ordered"}

// New returns a Handler that runs fn for each record of a batch, guarded by guard. fn
// should honour its context: it carries the Lambda deadline, and the lease that
// [idem.Attach] and [idem.Checkpoint] use. Options are applied in order; invalid settings
// return an error wrapping idem.ErrInvalidOption that names the option.
//
// The Handler takes from guard its clock ([idem.WithClock]), its logger
// ([idem.WithLogger]: a summary line per batch and a line per failed record, with its
// sequence number, never its key or data) and its hooks ([idem.WithHooks]: OnBatch gets
// each batch with the records' sequence numbers as item IDs).
func New(guard *idem.Guard, fn func(context.Context, events.KinesisEventRecord) error, opts ...Option) (*Handler, error) {
	cfg := defaultConfig()
	engine, err := batch.NewAdapter(guard, fn == nil, "New", source, &cfg, opts)
	if err != nil {
		return nil, err
	}
	return &Handler{fn: fn, cfg: cfg, engine: engine}, nil
}

// Handle is the Lambda handler: pass h.Handle to lambda.Start, and enable
// ReportBatchItemFailures on the event source mapping (without it Lambda ignores the
// response: a batch that returned no error counts as a success, failed records too).
//
// Every record is processed as [Handler.Process] describes. The response names the first
// failed record of each partition key by its sequence number; Lambda checkpoints before
// the lowest one and delivers the shard again from it. Handle returns an error, which
// makes Lambda retry the whole batch, only when the event is unusable ([ErrInvalidEvent]).
func (h *Handler) Handle(ctx context.Context, event events.KinesisEvent) (events.KinesisEventResponse, error) {
	rep, err := h.Process(ctx, event)
	if err != nil {
		return events.KinesisEventResponse{}, err
	}
	return rep.Response(), nil
}

// Process processes a batch and reports each record's [Outcome]; [Handler.Handle] is
// Process followed by [Report.Response].
//
//   - Each record runs the handler under its key (see [WithKey]) through idem: a key
//     completed earlier replays without running ([StatusReplayed]); so do the records
//     after a failure that Lambda delivers again, read back in the batch's claim calls.
//   - The records of one partition key run one at a time in sequence order; after a
//     failure the rest of that partition key's records are not started
//     ([ReasonGroupStopped]) and their claims are released. Records of different partition
//     keys run concurrently, up to [WithConcurrency] partition keys at once.
//   - Records that share a key and data run once ([StatusDuplicate]).
//   - A record not yet started when less than the margin (see [WithDeadlineMargin]) is
//     left before ctx's deadline is not started ([ReasonNotStarted]).
//   - The keys are claimed together and the outcomes recorded together (see
//     [WithBatchClaims]): on dynamo.Store, ⌈n/25⌉ calls each for n new records.
//
// Process returns an error only for an unusable event ([ErrInvalidEvent]), with a nil
// report.
func (h *Handler) Process(ctx context.Context, event events.KinesisEvent) (*Report, error) {
	recs := event.Records
	items := make([]batch.Item, len(recs))
	for i, r := range recs {
		if r.Kinesis.SequenceNumber == "" {
			return nil, fmt.Errorf("%w: record %d has no sequenceNumber", ErrInvalidEvent, i)
		}
		it := &items[i]
		it.ID, it.Group = r.Kinesis.SequenceNumber, h.cfg.group(r)
		it.Key, it.Err = h.cfg.key(r)
		if it.Err == nil {
			it.Fingerprint, it.Err = h.cfg.fingerprint(r)
		}
	}
	mode := batch.Mode{Ordered: true, RecordBeforeNext: true, Destination: streamName(recs)}
	rep, out := batch.Run(ctx, h.engine, recs, items, h.fn, mode, func(o batch.Outcome, _ events.KinesisEventRecord) Outcome {
		return Outcome{
			SequenceNumber: o.ID, PartitionKey: o.Group, Key: o.Key,
			Status: o.Status, Reason: o.Reason, Err: o.Err, Duration: o.Duration,
		}
	})
	return &Report{
		Outcomes: out, first: rep.FirstFailures(),
		Ran: rep.Ran, Replayed: rep.Replayed, Duplicates: rep.Duplicates, Failed: rep.Failed,
		Duration: rep.Duration,
	}, nil
}

// streamName returns the name of the stream recs came from, from the first record's event
// source ARN ("arn:aws:kinesis:<region>:<account>:stream/<name>"); "" without one.
func streamName(recs []events.KinesisEventRecord) string {
	for _, r := range recs {
		if _, name, ok := strings.Cut(r.EventSourceArn, ":stream/"); ok {
			return name
		}
	}
	return ""
}
