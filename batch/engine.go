package batch

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"

	"github.com/idemkit/idem"
)

// Source names a source's batches in the engine's log lines and hooks. Its zero value
// names them "batch" and their items "record".
type Source struct {
	// Name starts every log message: "sqs" gives "sqs: batch processed".
	Name string
	// System names the messaging system in the hooks ([idem.BatchEvent.System]), as the
	// OpenTelemetry messaging conventions' messaging.system does: "aws_sqs".
	System string
	// Item is what one item is called: "message" gives "message failed" and the summary's
	// count attribute "messages". Default "record".
	Item string
	// IDAttr is the log attribute of an item's [Item.ID]: "message_id", "sequence_number".
	// Default Item + "_id".
	IDAttr string
	// OrderedAttr is the summary's attribute for [Report.Ordered]: "fifo" for SQS. Default
	// "ordered".
	OrderedAttr string
}

func (s Source) withDefaults() Source {
	if s.Name == "" {
		s.Name = "batch"
	}
	if s.Item == "" {
		s.Item = "record"
	}
	if s.IDAttr == "" {
		s.IDAttr = s.Item + "_id"
	}
	if s.OrderedAttr == "" {
		s.OrderedAttr = "ordered"
	}
	return s
}

// Item is one record of a batch, as a source adapter maps it for the engine.
type Item struct {
	// ID identifies the item to the source and in logs and hooks: an SQS message ID, a
	// Kinesis or DynamoDB Streams sequence number, a Kafka offset. Never a key.
	ID string
	// Group is the ordering group in an ordered batch ([Mode.Ordered]): a FIFO message
	// group, a Kinesis partition key, a DynamoDB item key. Ignored otherwise.
	Group string
	// Key is the idempotency key (scoped and hashed by the guard).
	Key string
	// Fingerprint identifies the item's content; nil turns payload validation off.
	Fingerprint []byte
	// Err, if set, says why the key or fingerprint could not be had: the item fails with
	// [ReasonKey] without running.
	Err error
}

// Mode says how one batch is processed.
type Mode struct {
	// Ordered runs the items of each [Item.Group] one at a time in the items' order, and
	// stops a group at its first failure: the rest of the group fails with
	// [ReasonGroupStopped] without starting, and their claims are released. Groups run
	// concurrently up to [WithConcurrency]. Without it, items run concurrently, and only
	// items that share a key run one after another.
	Ordered bool
	// RecordEach makes each item claim its key and record its outcome on its own as it
	// runs, never with batch claims: in an ordered batch, an item then starts only after
	// the one before it in its group has durably completed (SQS FIFO queues). Without it,
	// outcomes are recorded together as [WithBatchClaims] says, and an ordered group's next
	// item starts once the one before it has returned.
	RecordEach bool
	// RecordBeforeNext, in an ordered batch on batch claims, records the outcome of an item
	// that another item of its group follows in the batch before that item starts: its
	// completion and attached writes committed, or its failure known. A failed recording
	// fails the item, which is its group's first failure, and the rest of the group is not
	// started. The last item of each group is recorded with the batch, so a batch whose
	// groups hold one item each costs what an unordered one does (Kinesis, DynamoDB
	// Streams). Without it, the next item starts once the one before returned (see
	// [Mode.RecordEach] for what that means). Ignored without Ordered, or with RecordEach,
	// which records every item at once.
	RecordBeforeNext bool
	// Destination names the queue or stream the batch came from, for the hooks
	// ([idem.BatchEvent.Destination]); empty if the event names none.
	Destination string
}

// Engine processes batches of items through an [idem.Guard]. It is safe for concurrent
// use; create one per function (container) and share it.
type Engine struct {
	guard *idem.Guard
	src   Source
	cfg   config

	// Taken from the guard, whose settings are fixed once it is made.
	clock   idem.Clock
	logger  *slog.Logger
	onBatch func(context.Context, idem.BatchEvent)
}

// New returns an Engine that processes batches guarded by guard, naming them in its logs
// as src says. Options are applied in order; invalid settings return an error wrapping
// [idem.ErrInvalidOption] that names the option.
//
// The Engine takes from guard its clock ([idem.WithClock]), its logger ([idem.WithLogger]:
// a summary line per batch, INFO or WARN when an item failed, and a WARN line per failed
// item, ERROR with the stack for a panic; lines carry item IDs, never keys) and its hooks
// ([idem.WithHooks]: OnBatch gets each batch's outcomes as an [idem.BatchEvent], with item
// IDs, never keys).
func New(guard *idem.Guard, src Source, opts ...Option) (*Engine, error) {
	if guard == nil {
		return nil, optErr("New", "guard must not be nil")
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
	return &Engine{
		guard: guard, src: src.withDefaults(), cfg: cfg,
		clock: guard.Clock(), logger: guard.Logger(), onBatch: guard.Hooks().OnBatch,
	}, nil
}

// Process processes items and reports each one's [Outcome], in the items' order. run
// runs the handler for items[i] under ctx; it is called at most once per item, never for
// an item that replays, duplicates another or is held back.
//
//   - Each item runs under its key through the guard: a key completed earlier replays
//     without running ([StatusReplayed]), and the failures of [Reason] are reported.
//   - Items that share a key are never raced: they run one after another in the items'
//     order. One whose fingerprint equals an earlier one's takes that item's outcome
//     without running or calling the store ([StatusDuplicate], or
//     [ReasonDuplicateFailed]).
//   - mode says what runs concurrently and what runs in order (see [Mode]).
//   - An item not yet started when less than the margin (see [WithDeadlineMargin]) is left
//     before ctx's deadline, or once ctx has ended, is not started ([ReasonNotStarted]).
//   - A panicking run fails its item ([ReasonPanic]) and no other.
//
// Before it returns, Process records every outcome (see [WithBatchClaims]), writes the
// log lines and calls the guard's OnBatch hook.
func (e *Engine) Process(ctx context.Context, items []Item, run func(ctx context.Context, i int) error, mode Mode) *Report {
	start := e.clock.Now()
	b := e.newBatch(ctx, items, run, mode, start)
	units := b.plan()
	b.claimAll(ctx)
	stop := b.settleWhenLate(ctx)
	b.run(ctx, units)
	stop()
	b.settle(ctx)
	if b.claims != nil { // the outcomes are final now that the claims are settled
		for i := range b.out {
			if b.out[i].Failed() {
				e.logFailure(ctx, &b.out[i])
			}
		}
	}
	rep := &Report{Outcomes: b.out, Ordered: mode.Ordered, Duration: e.clock.Now().Sub(start)}
	rep.count()
	e.logBatch(ctx, rep)
	if e.onBatch != nil {
		e.onBatch(ctx, rep.event(e.src.System, mode.Destination))
	}
	return rep
}

// logBatch writes the summary line: INFO, or WARN when an item failed, with the failures
// counted by reason.
func (e *Engine) logBatch(ctx context.Context, rep *Report) {
	level := slog.LevelInfo
	if rep.Failed > 0 {
		level = slog.LevelWarn
	}
	if !e.logger.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.Int(e.src.Item+"s", len(rep.Outcomes)),
		slog.Bool(e.src.OrderedAttr, rep.Ordered),
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
	e.logger.LogAttrs(ctx, level, e.src.Name+": batch processed", attrs...)
}

// logFailure writes a line for a failed item: ERROR with the stack for a panic, since it is
// a bug; WARN otherwise, so that an operator reading at WARN learns which item failed and
// why, not only how many. Lines carry the item's ID and its stored key (the scoped hash,
// from which idemctl finds the record), never the caller's key.
func (e *Engine) logFailure(ctx context.Context, o *Outcome) {
	var pe *PanicError
	if errors.As(o.Err, &pe) {
		e.logger.ErrorContext(ctx, e.src.Name+": "+e.src.Item+" handler panicked", e.src.IDAttr, o.ID,
			"stored_key", e.storedKey(o), "error", o.Err, "stack", string(pe.Stack))
		return
	}
	e.logger.WarnContext(ctx, e.src.Name+": "+e.src.Item+" failed", e.src.IDAttr, o.ID,
		"stored_key", e.storedKey(o), "reason", string(o.Reason), "error", o.Err)
}

// storedKey returns the stored key of o's item, as its guard scopes and hashes it; "" for
// an item without a usable key.
func (e *Engine) storedKey(o *Outcome) string {
	if o.Key == "" {
		return ""
	}
	key, err := e.guard.StoredKey(idem.Request{Key: o.Key})
	if err != nil {
		return ""
	}
	return key
}
