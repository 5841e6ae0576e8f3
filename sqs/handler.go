package sqs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
)

// Handler processes SQS batches for Lambda: each message under its idempotency key, with
// partial batch failures. It is safe for concurrent use; create one per function (container)
// and share it.
type Handler struct {
	guard *idem.Guard
	fn    func(context.Context, events.SQSMessage) error
	cfg   config

	// Taken from the guard, whose settings are fixed once it is made.
	clock   idem.Clock
	logger  *slog.Logger
	onBatch func(context.Context, idem.BatchEvent)
}

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
	if guard == nil {
		return nil, optErr("New", "guard must not be nil")
	}
	if fn == nil {
		return nil, optErr("New", "handler must not be nil")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	return &Handler{guard: guard, fn: fn, cfg: cfg, clock: guard.Clock(), logger: guard.Logger(), onBatch: guard.Hooks().OnBatch}, nil
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
	start := h.clock.Now()
	for i, m := range event.Records {
		if m.MessageId == "" {
			return nil, fmt.Errorf("%w: record %d has no messageId", ErrInvalidEvent, i)
		}
	}
	b := h.newBatch(ctx, event.Records, start)
	units := b.plan()
	b.claimAll(ctx)
	stop := b.settleWhenLate(ctx)
	b.run(ctx, units)
	stop()
	b.settle(ctx)
	if b.claims != nil { // the outcomes are final now that the claims are settled
		for i := range b.out {
			if b.out[i].Failed() {
				h.logFailure(ctx, &b.out[i])
			}
		}
	}
	rep := &Report{Outcomes: b.out, FIFO: b.fifo, Duration: h.clock.Now().Sub(start)}
	rep.count()
	h.logBatch(ctx, rep)
	if h.onBatch != nil {
		h.onBatch(ctx, rep.event(queueName(event.Records)))
	}
	return rep, nil
}

// logBatch writes the summary line: INFO, or WARN when a message failed, with the failures
// counted by reason.
func (h *Handler) logBatch(ctx context.Context, rep *Report) {
	level := slog.LevelInfo
	if rep.Failed > 0 {
		level = slog.LevelWarn
	}
	if !h.logger.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.Int("messages", len(rep.Outcomes)),
		slog.Bool("fifo", rep.FIFO),
		slog.Int("ran", rep.Ran),
		slog.Int("replayed", rep.Replayed),
		slog.Int("duplicates", rep.Duplicates),
		slog.Int("failed", rep.Failed),
		slog.Duration("duration", rep.Duration),
	}
	if rep.Failed > 0 {
		counts := rep.FailedBy()
		var by []any
		for _, r := range slices.Sorted(maps.Keys(counts)) {
			by = append(by, slog.Int(string(r), counts[r]))
		}
		attrs = append(attrs, slog.Group("failed_by", by...))
	}
	h.logger.LogAttrs(ctx, level, "sqs: batch processed", attrs...)
}

// logFailure writes a line for a failed message: ERROR with the stack for a panic, since it
// is a bug; WARN otherwise, so that an operator reading at WARN learns which message failed
// and why, not only how many. Lines carry the message ID and the stored key (the scoped
// hash, from which idemctl finds the record), never the caller's key or the body.
func (h *Handler) logFailure(ctx context.Context, o *Outcome) {
	var pe *PanicError
	if errors.As(o.Err, &pe) {
		h.logger.ErrorContext(ctx, "sqs: message handler panicked", "message_id", o.MessageID, "stored_key", h.storedKey(o),
			"error", o.Err, "stack", string(pe.Stack))
		return
	}
	h.logger.WarnContext(ctx, "sqs: message failed", "message_id", o.MessageID, "stored_key", h.storedKey(o),
		"reason", string(o.Reason), "error", o.Err)
}

// storedKey returns the stored key of o's message, as its guard scopes and hashes it; ""
// for a message without a usable key.
func (h *Handler) storedKey(o *Outcome) string {
	if o.Key == "" {
		return ""
	}
	key, err := h.guard.StoredKey(idem.Request{Key: o.Key})
	if err != nil {
		return ""
	}
	return key
}
