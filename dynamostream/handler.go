package dynamostream

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
)

// Handler processes DynamoDB Streams batches for Lambda: each record under its
// idempotency key, the records of an item in order, with partial batch failures. It is safe for
// concurrent use; create one per function (container) and share it.
type Handler struct {
	fn     func(context.Context, events.DynamoDBEventRecord) error
	cfg    config
	engine *batch.Engine
}

// source names DynamoDB Streams batches in the engine's log lines.
var source = batch.Source{Name: "dynamostream", System: "aws_dynamodb_streams", Item: "record", IDAttr: "sequence_number", OrderedAttr: "ordered"}

// New returns a Handler that runs fn for each record of a batch, guarded by guard. fn
// should honour its context: it carries the Lambda deadline, and the lease that
// [idem.Attach] and [idem.Checkpoint] use. Options are applied in order; invalid settings
// return an error wrapping idem.ErrInvalidOption that names the option.
//
// The Handler takes from guard its clock ([idem.WithClock]), its logger
// ([idem.WithLogger]: a summary line per batch and a line per failed record, with its
// sequence number, never its key or images) and its hooks ([idem.WithHooks]: OnBatch gets
// each batch with the records' sequence numbers as item IDs).
func New(guard *idem.Guard, fn func(context.Context, events.DynamoDBEventRecord) error, opts ...Option) (*Handler, error) {
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
// failed record of each item by its sequence number; Lambda checkpoints before
// the lowest one and delivers the shard again from it. Handle returns an error, which
// makes Lambda retry the whole batch, only when the event is unusable ([ErrInvalidEvent]).
func (h *Handler) Handle(ctx context.Context, event events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	rep, err := h.Process(ctx, event)
	if err != nil {
		return events.DynamoDBEventResponse{}, err
	}
	return rep.Response(), nil
}

// Process processes a batch and reports each record's [Outcome]; [Handler.Handle] is
// Process followed by [Report.Response].
//
//   - Each record runs the handler under its key (see [WithKey]) through idem: a key
//     completed earlier replays without running ([StatusReplayed]); so do the records
//     after a failure that Lambda delivers again, read back in the batch's claim calls.
//   - The records of one item (one primary key, [ItemKey]) run one at a time in sequence
//     order; after a failure the rest of that item's records are not started
//     ([ReasonGroupStopped]) and their claims are released. Records of different items run
//     concurrently, up to [WithConcurrency] items at once.
//   - Records that share a key and content run once ([StatusDuplicate]).
//   - A record not yet started when less than the margin (see [WithDeadlineMargin]) is
//     left before ctx's deadline is not started ([ReasonNotStarted]).
//   - The keys are claimed together and the outcomes recorded together (see
//     [WithBatchClaims]): on dynamo.Store, ⌈n/25⌉ calls each for n new records.
//
// Process returns an error only for an unusable event ([ErrInvalidEvent]), with a nil
// report.
func (h *Handler) Process(ctx context.Context, event events.DynamoDBEvent) (*Report, error) {
	recs := event.Records
	items := make([]batch.Item, len(recs))
	for i, r := range recs {
		if r.Change.SequenceNumber == "" {
			return nil, fmt.Errorf("%w: record %d has no SequenceNumber", ErrInvalidEvent, i)
		}
		it := &items[i]
		it.ID = r.Change.SequenceNumber
		it.Group, it.Err = h.cfg.group(r)
		if it.Err == nil {
			it.Key, it.Err = h.cfg.key(r)
		}
		if it.Err == nil {
			it.Fingerprint, it.Err = h.cfg.fingerprint(r)
		}
	}
	mode := batch.Mode{Ordered: true, RecordBeforeNext: true, Destination: tableName(recs)}
	rep, out := batch.Run(ctx, h.engine, recs, items, h.fn, mode, func(o batch.Outcome, r events.DynamoDBEventRecord) Outcome {
		return Outcome{
			SequenceNumber: o.ID, EventID: r.EventID, Key: o.Key,
			Status: o.Status, Reason: o.Reason, Err: o.Err, Duration: o.Duration,
		}
	})
	return &Report{
		Outcomes: out, first: rep.FirstFailures(),
		Ran: rep.Ran, Replayed: rep.Replayed, Duplicates: rep.Duplicates, Failed: rep.Failed,
		Duration: rep.Duration,
	}, nil
}

// tableName returns the name of the table whose stream recs came from, from the first
// record's event source ARN
// ("arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>"); "" without one.
func tableName(recs []events.DynamoDBEventRecord) string {
	for _, r := range recs {
		if _, rest, ok := strings.Cut(r.EventSourceArn, ":table/"); ok {
			name, _, _ := strings.Cut(rest, "/")
			return name
		}
	}
	return ""
}
