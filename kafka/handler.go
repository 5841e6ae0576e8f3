package kafka

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
)

// Handler processes Kafka batches for Lambda: each record under its idempotency key, the
// records of one record key within a partition in offset order. It is safe for concurrent
// use; create one per function (container) and share it.
type Handler struct {
	fn     func(context.Context, events.KafkaRecord) error
	cfg    config
	engine *batch.Engine
}

// source names Kafka batches in the engine's log lines and hooks.
var source = batch.Source{Name: "kafka", System: "kafka", Item: "record", IDAttr: "record_id", OrderedAttr: "ordered"}

// New returns a Handler that runs fn for each record of a batch, guarded by guard. fn
// should honour its context: it carries the Lambda deadline, and the lease that
// [idem.Attach] and [idem.Checkpoint] use. Options are applied in order; invalid settings
// return an error wrapping idem.ErrInvalidOption that names the option.
//
// The Handler takes from guard its clock ([idem.WithClock]), its logger
// ([idem.WithLogger]: a summary line per batch and a line per failed record, named
// "<topic>-<partition>@<offset>", never by its key or value) and its hooks
// ([idem.WithHooks]: OnBatch gets each batch with the records' "<topic>-<partition>@<offset>"
// as item IDs).
func New(guard *idem.Guard, fn func(context.Context, events.KafkaRecord) error, opts ...Option) (*Handler, error) {
	cfg := defaultConfig()
	engine, err := batch.NewAdapter(guard, fn == nil, "New", source, &cfg, opts)
	if err != nil {
		return nil, err
	}
	return &Handler{fn: fn, cfg: cfg, engine: engine}, nil
}

// Handle is the Lambda handler: pass h.Handle to lambda.Start.
//
// Every record is processed as [Handler.Process] describes. By default, when a record
// failed, Handle returns an error wrapping [ErrBatchFailed] and the first failure: Lambda
// retries the whole batch, and the records that finished replay from the store. With
// [WithReportBatchItemFailures], it returns the partial batch response instead
// ([Report.Response]) and no error. Handle also returns an error, which makes Lambda retry
// the whole batch, when the event is unusable ([ErrInvalidEvent]).
func (h *Handler) Handle(ctx context.Context, event events.KafkaEvent) (Response, error) {
	rep, err := h.Process(ctx, event)
	if err != nil {
		return Response{}, err
	}
	if !h.cfg.partial {
		if err := rep.Err(); err != nil {
			return Response{}, err
		}
	}
	return rep.Response(), nil
}

// Process processes a batch and reports each record's [Outcome], partition by partition
// (in the order of their names) and in offset order within each.
//
//   - Each record runs the handler under its key (see [WithKey], [WithKeyHeader]) through
//     idem: a key completed earlier replays without running ([StatusReplayed]); so do the
//     records that finished before Lambda retried the batch, read back in the batch's
//     claim calls.
//   - The records of one record key within a partition run one at a time in offset order;
//     after a failure the rest of them are not started ([ReasonGroupStopped]) and their
//     claims are released. Other keys run concurrently, up to [WithConcurrency] at once.
//   - Records that share an idempotency key and value run once ([StatusDuplicate]).
//   - A record not yet started when less than the margin (see [WithDeadlineMargin]) is
//     left before ctx's deadline is not started ([ReasonNotStarted]).
//   - The keys are claimed together and the outcomes recorded together (see
//     [WithBatchClaims]): on dynamo.Store, ⌈n/25⌉ calls each for n new records. Every
//     record that finished is recorded before Process returns.
//
// Process returns an error only for an unusable event ([ErrInvalidEvent]), with a nil
// report.
func (h *Handler) Process(ctx context.Context, event events.KafkaEvent) (*Report, error) {
	var recs []events.KafkaRecord
	for _, tp := range slices.Sorted(maps.Keys(event.Records)) {
		recs = append(recs, event.Records[tp]...)
	}
	items := make([]batch.Item, len(recs))
	topics := map[string]bool{}
	src := EventSource(event)
	for i, r := range recs {
		if r.Topic == "" {
			return nil, fmt.Errorf("%w: record %d has no topic", ErrInvalidEvent, i)
		}
		topics[r.Topic] = true
		it := &items[i]
		// The record key as Lambda sent it: equal keys have equal base64.
		it.ID, it.Group = itemID(r), TopicPartition(r)+"\x00"+r.Key
		it.Key, it.Err = h.cfg.keyOf(src, r)
		if it.Err == nil {
			it.Fingerprint, it.Err = h.cfg.fingerprint(r)
		}
	}
	destination := ""
	if len(topics) == 1 {
		destination = recs[0].Topic
	}
	mode := batch.Mode{Ordered: true, RecordBeforeNext: true, Destination: destination}
	rep, out := batch.Run(ctx, h.engine, recs, items, h.fn, mode, func(o batch.Outcome, r events.KafkaRecord) Outcome {
		return Outcome{
			ID: o.ID, TopicPartition: TopicPartition(r), Offset: r.Offset, Key: o.Key,
			Status: o.Status, Reason: o.Reason, Err: o.Err, Duration: o.Duration,
		}
	})
	return &Report{
		Outcomes: out,
		Ran:      rep.Ran, Replayed: rep.Replayed, Duplicates: rep.Duplicates, Failed: rep.Failed,
		Duration: rep.Duration,
	}, nil
}
