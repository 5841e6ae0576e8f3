package ddbrelay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/dynamostream"
	"github.com/idemkit/idem/internal/streamseq"
	"github.com/idemkit/idem/outbox"
)

// Relay publishes the events of an outbox table's stream: a Lambda handler ([Relay.Handle])
// for the stream's event source mapping. It is safe for concurrent use; create one per
// function (container) and share it.
type Relay struct {
	h     *dynamostream.Handler
	pub   outbox.Publisher
	clock idem.Clock
	hooks Hooks
}

// errShortAnswer is a publisher's answer without one error per message.
var errShortAnswer = errors.New("ddbrelay: the publisher answered no outcome for the message")

// New returns a relay publishing through pub, each event under the guard guard. It
// returns an error wrapping idem.ErrInvalidOption for a nil guard or publisher, or a bad
// option.
//
//   - An event published and recorded is not sent again when Lambda delivers its record
//     again (after a later record of the batch failed), by this container or another, as
//     long as the guard's store keeps its record.
//   - Give it a guard of its own name on the idempotency table (dynamo.New), whose expiry
//     (idem.WithExpiry) outlives every delivery of a stream record: 48 hours, as
//     cmd/outbox-relay sets (see the package documentation).
//   - The guard costs the store's batch calls (dynamostream.WithBatchClaims): ⌈n/25⌉
//     claim calls per batch of n events, one completion call for each event that another
//     event of its ordering key follows in the batch, and ⌈m/25⌉ for the m others; it
//     spares the events after a failure, which Lambda delivers again, a second publish.
//   - The relay takes from guard its clock (for [Hooks.OnLag]), its logger and its hooks,
//     as dynamostream.New says.
func New(guard *idem.Guard, pub outbox.Publisher, opts ...Option) (*Relay, error) {
	switch {
	case guard == nil:
		return nil, invalid("New", "guard must not be nil")
	case pub == nil:
		return nil, invalid("New", "publisher must not be nil")
	}
	cfg := config{concurrency: DefaultConcurrency}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	r := &Relay{pub: pub, clock: guard.Clock(), hooks: cfg.hooks}
	sopts := []dynamostream.Option{
		dynamostream.WithConcurrency(cfg.concurrency),
		dynamostream.WithKey(eventID),
		dynamostream.WithOrderingKey(orderingKey),
		// A crashed invocation's claims hold their events until their lease ends; Lambda's
		// retries come far sooner, and each would count: wait for the lease instead.
		dynamostream.WithWaitInFlight(true),
	}
	if cfg.marginSet {
		sopts = append(sopts, dynamostream.WithDeadlineMargin(cfg.margin))
	}
	h, err := dynamostream.New(guard, r.publish, sopts...)
	if err != nil {
		return nil, err
	}
	r.h = h
	return r, nil
}

// Handle is the Lambda handler: pass r.Handle to lambda.Start, and enable
// ReportBatchItemFailures on the event source mapping. It is [Relay.Process] followed by
// [Report.Response]; it returns an error, which makes Lambda retry the whole batch, only
// for an unusable event (dynamostream.ErrInvalidEvent).
func (r *Relay) Handle(ctx context.Context, event events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	rep, err := r.Process(ctx, event)
	if err != nil {
		return events.DynamoDBEventResponse{}, err
	}
	return rep.Response(), nil
}

// Process publishes a batch of the outbox table's stream and reports what became of it.
//
//   - INSERT records are the committed events; REMOVE (TTL deletions) and MODIFY records
//     are acknowledged without publishing ([Report.Skipped]).
//   - The events of one ordering key are published one at a time, in stream order, and
//     a run's events of one key (one completion: dynamo.OutboxRunAttr) that the batch
//     holds in the order they were recorded (their position), which the stream need not
//     keep within a transaction: they take the places the run's records had among the
//     key's records, and records of other runs between them keep theirs. A run split
//     across two batches, and items written without a run, keep the stream's order. A key stops
//     at its first failure: a publish the publisher reports failed (a lost answer
//     included), an event that cannot be decoded, a publish not started for the deadline.
//   - Keys are published concurrently, up to [WithConcurrency] at once: the events that
//     arrive while a call of the publisher is in flight go out together in the next call
//     (a group commit, one event per key per call), so a slow broker gets fewer, fuller
//     calls and no event waits for a timer. A publisher that panics fails every event of
//     its call (one of them as batch.ReasonPanic), and an event still waiting for its
//     call when its context ends fails unsent.
//   - Each event is guarded by its id: one published and recorded before replays
//     ([Report.Replayed]) instead of being sent again.
//
// The response reports, for each key that stopped, the lowest sequence number among its
// records not published, so Lambda delivers the shard again from there and no event is
// skipped. Process returns an error only for an unusable event, with a nil report.
func (r *Relay) Process(ctx context.Context, event events.DynamoDBEvent) (*Report, error) {
	rep := &Report{}
	var inserts []events.DynamoDBEventRecord
	var oldest time.Time
	for _, rec := range event.Records {
		if t := rec.Change.ApproximateCreationDateTime.Time; !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
			oldest = t
		}
		if rec.EventName != string(events.DynamoDBOperationTypeInsert) {
			rep.Skipped++
			continue
		}
		inserts = append(inserts, rec)
	}
	if !oldest.IsZero() {
		// A record stamped after now (the clocks apart, whole seconds) is no lag.
		rep.Lag = max(r.clock.Now().Sub(oldest), 0)
		if r.hooks.OnLag != nil {
			r.hooks.OnLag(rep.Lag)
		}
	}
	ordered := inRunOrder(inserts)
	srep, err := r.h.Process(withTogether(ctx, r.pub), events.DynamoDBEvent{Records: ordered})
	if err != nil {
		return nil, err
	}
	rep.Outcomes = srep.Outcomes
	rep.Published, rep.Replayed, rep.Failed = srep.Ran, srep.Replayed+srep.Duplicates, srep.Failed
	lowest := map[string]string{}
	for i, o := range srep.Outcomes {
		if !o.Failed() {
			continue
		}
		k := orderingKey(ordered[i])
		if low, ok := lowest[k]; !ok || streamseq.Less(o.SequenceNumber, low) {
			lowest[k] = o.SequenceNumber
		}
	}
	for _, seq := range lowest {
		rep.failures = append(rep.failures, seq)
	}
	slices.SortFunc(rep.failures, streamseq.Compare)
	if r.hooks.OnBatch != nil {
		r.hooks.OnBatch(rep)
	}
	return rep, nil
}

// publish publishes one INSERT record's event.
func (r *Relay) publish(ctx context.Context, rec events.DynamoDBEventRecord) error {
	m, err := message(rec)
	if err != nil {
		return err
	}
	t, ok := ctx.Value(togetherKey{}).(*together)
	if !ok { // not from Process: a call of its own
		t = &together{ctx: ctx, pub: r.pub}
	}
	if err := t.publish(ctx, m); err != nil {
		return fmt.Errorf("ddbrelay: publish %s: %w", m.ID, err)
	}
	return nil
}

// eventID is a record's idempotency key: the event id, the sort key in its Keys.
func eventID(rec events.DynamoDBEventRecord) (string, error) {
	if id := keyString(rec, dynamo.OutboxIDAttr); id != "" {
		return id, nil
	}
	return "", fmt.Errorf("ddbrelay: record %s has no %s in its Keys", rec.Change.SequenceNumber, dynamo.OutboxIDAttr)
}

// orderingKey is a record's ordering group: the event's ordering key, the partition key in
// its Keys.
func orderingKey(rec events.DynamoDBEventRecord) string {
	return keyString(rec, dynamo.OutboxOrderingKeyAttr)
}

func keyString(rec events.DynamoDBEventRecord, attr string) string {
	v, ok := rec.Change.Keys[attr]
	if !ok || v.DataType() != events.DataTypeString {
		return ""
	}
	return v.String()
}

// inRunOrder returns recs with each ordering key's records in stream order, except that
// the records of one run (the same dynamo.OutboxRunAttr) are in position order: a run's
// records fill the places in the key's order that they had in the stream, sorted by
// position, so records of other runs between them keep their places. Records without a
// run (items written before the attribute existed) keep the stream's order: two runs of
// one stored key cannot be told apart without it. Each key keeps the places its records
// had in the batch.
func inRunOrder(recs []events.DynamoDBEventRecord) []events.DynamoDBEventRecord {
	type entry struct {
		rec      events.DynamoDBEventRecord
		run      string
		position int
	}
	byKey := map[string][]entry{}
	for _, rec := range recs {
		e := entry{rec: rec}
		e.run, e.position = runOf(rec)
		k := orderingKey(rec)
		byKey[k] = append(byKey[k], e)
	}
	for _, es := range byKey {
		slots := map[string][]int{} // each run's places among the key's records
		for i, e := range es {
			if e.run != "" {
				slots[e.run] = append(slots[e.run], i)
			}
		}
		for _, idx := range slots {
			run := make([]entry, len(idx))
			for j, i := range idx {
				run[j] = es[i]
			}
			slices.SortStableFunc(run, func(a, b entry) int { return a.position - b.position })
			for j, i := range idx {
				es[i] = run[j]
			}
		}
	}
	out := make([]events.DynamoDBEventRecord, 0, len(recs))
	next := map[string]int{}
	for _, rec := range recs {
		k := orderingKey(rec)
		out = append(out, byKey[k][next[k]].rec)
		next[k]++
	}
	return out
}

// Report is what became of one batch.
type Report struct {
	// Outcomes holds one dynamostream.Outcome per INSERT record, in the order the relay
	// published them.
	Outcomes []dynamostream.Outcome
	// Published counts the events published by this batch; Replayed those published
	// before (found in the guard's store, or twice in the batch); Skipped the records that
	// are not INSERTs; Failed the events not published, to be delivered again.
	Published, Replayed, Skipped, Failed int
	// Lag is the age of the batch's oldest record, by the guard's clock: now minus its
	// ApproximateCreationDateTime (whole seconds); 0 for an empty batch.
	Lag time.Duration

	failures []string
}

// Response returns the partial batch response for Lambda: for each ordering key that
// stopped, the lowest sequence number among its records not published, in sequence order.
// An empty list acknowledges the whole batch.
func (r *Report) Response() events.DynamoDBEventResponse {
	out := make([]events.DynamoDBBatchItemFailure, 0, len(r.failures))
	for _, seq := range r.failures {
		out = append(out, events.DynamoDBBatchItemFailure{ItemIdentifier: seq})
	}
	return events.DynamoDBEventResponse{BatchItemFailures: out}
}
