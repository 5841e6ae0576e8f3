package rabbitconsumer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/idemstore"
)

// drainYields is how many times a batch being gathered yields the processor, when no
// delivery is ready, before it starts: amqp091-go hands deliveries over one at a time from
// a goroutine of its own, which on a busy machine has not run yet, and a batch of one
// costs a store round trip of its own.
const drainYields = 3

// maxReconnectDelay caps the doubling wait of [Consumer.Run] between dials.
const maxReconnectDelay = time.Minute

// Consumer consumes a RabbitMQ queue and runs a handler for each delivery at most once per
// idempotency key, acknowledging a delivery only once its outcome is recorded. It is safe
// for concurrent use: several goroutines may each run [Consumer.Consume] on a channel of
// their own.
type Consumer struct {
	queue  string
	fn     func(context.Context, amqp.Delivery) error
	cfg    config
	engine *batch.Engine
	guard  *idem.Guard
	clock  idem.Clock
	logger *slog.Logger
	// uncommitted keeps the counts of runs that committed nothing of the messages returned
	// to the queue with their count unspent, per key, for their redeliveries.
	uncommitted uncommittedCounts
}

// New returns a Consumer of queue that runs fn for each delivery, guarded by guard. fn
// should honour its context: it ends when the lease is lost (see idem.WithHeartbeat, which
// keeps the lease of a long handler) or the consumer stops. Options are applied in order;
// invalid settings return an error wrapping idem.ErrInvalidOption that names the option.
//
// The Consumer takes from guard its clock, its logger (a summary line per batch of
// deliveries, a line per failed or dead-lettered message with its message ID and stored
// key, never its body; the message ID is the key itself when the key defaults to it) and
// its hooks (OnBatch gets each batch with the message IDs as item IDs).
func New(guard *idem.Guard, queue string, fn func(context.Context, amqp.Delivery) error, opts ...Option) (*Consumer, error) {
	if guard == nil {
		return nil, optErr("New", "guard must not be nil")
	}
	if queue == "" {
		return nil, optErr("New", "queue must not be empty")
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
	src := batch.Source{Name: "rabbitmq", System: "rabbitmq", Item: "message", IDAttr: "message_id"}
	// A batch holds at most the prefetch, and all of it runs at once.
	engine, err := batch.New(guard, src,
		batch.WithConcurrency(cfg.prefetch), batch.WithBatchClaims(cfg.batchClaims))
	if err != nil {
		return nil, err
	}
	return &Consumer{
		queue: queue, fn: fn, cfg: cfg, engine: engine, guard: guard,
		clock: guard.Clock(), logger: guard.Logger(),
	}, nil
}

// Run consumes the queue on a connection to url of its own until ctx ends, and returns
// nil then. When the connection is lost (the broker restarts, the network fails) or cannot
// be had, it logs why at WARN and dials again after a wait (see [WithReconnectDelay]); the
// deliveries it had not acknowledged are delivered again by the broker, and those whose
// outcome was recorded replay without running.
func (c *Consumer) Run(ctx context.Context, url string) error {
	delay := c.cfg.reconnectDelay
	for {
		consumed, err := c.dialAndConsume(ctx, url)
		if ctx.Err() != nil {
			return nil
		}
		if consumed {
			delay = c.cfg.reconnectDelay
		}
		c.logger.WarnContext(ctx, "rabbitmq: consumer disconnected, dialling again",
			"queue", c.queue, "error", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(delay):
		}
		delay = min(2*delay, maxReconnectDelay)
	}
}

// dialAndConsume dials url, consumes on a new channel until it closes or ctx ends, and
// closes the connection. consumed reports whether the subscription was made.
func (c *Consumer) dialAndConsume(ctx context.Context, url string) (consumed bool, err error) {
	conn, err := amqp.DialConfig(url, c.cfg.amqp)
	if err != nil {
		return false, fmt.Errorf("rabbitconsumer: dial: %w", err)
	}
	defer func() { _ = conn.Close() }()
	ch, err := conn.Channel()
	if err != nil {
		return false, fmt.Errorf("rabbitconsumer: open channel: %w", err)
	}
	return c.consume(ctx, ch)
}

// Consume consumes the queue on ch until ctx ends or ch closes. It sets ch's prefetch
// ([WithPrefetch]) and subscribes without auto-acknowledgement; it never publishes, so
// the consumer's user needs only read permission on the queue. Each time deliveries
// arrive it takes those in hand as one batch through the batch engine, alongside the
// batches still running, so as many handlers run at once as the prefetch lets the broker
// send (messages that share a key never do). Once a batch's outcomes are recorded it
// settles each delivery:
//
//   - ran, replayed (its key completed before) or a duplicate of another in the batch:
//     acknowledged;
//   - its key in flight elsewhere (idem.ErrInProgress, or its lease taken over by another
//     invocation), a store failure (idem.ErrStore, but for the record below; a completion
//     that committed nothing within [WithNotCommittedRetries]) or not started before the
//     batch deadline: held, unacknowledged, and its claim tried again in the consumer after
//     the requeue delay ([WithRequeueDelay]), doubling up to 30 s, until it settles
//     otherwise: it is never requeued for these, so a quorum queue's delivery limit is not
//     spent (see the package documentation); one with a per-message TTL (the expiration
//     property) is never held, but nacked with requeue after the requeue delay, so the
//     broker expires it on time (rejected, when its completion committed nothing);
//   - its handler cut off (its context ended by a lost lease, the batch deadline or the
//     consumer stopping): rejected with requeue after the requeue delay (at once when the
//     consumer stops or ch closes), whatever the failure policy, and nothing stored for
//     it;
//   - its handler failed or panicked, or its completion committed nothing (an error
//     wrapping idemstore.ErrNotCommitted: the store refused its outcome and attached
//     writes as a whole, and the key was released) once more than
//     [WithNotCommittedRetries] allows: as the failure policy says ([WithFailurePolicy]);
//     under [Requeue] rejected with requeue after the requeue delay, like a cut-off;
//   - no key ([ErrMissingKey]), a key used before with another body, a record the guard
//     cannot read (idem.ErrIncompatibleRecord: a newer release's schema, say) or a
//     failure the guard remembers (idem.ErrFailed): nacked without requeue
//     (dead-lettered), with a WARN line saying why; it never runs unguarded.
//
// When ctx ends, Consume cancels the subscription; the handlers running see their context
// end, the batches' outcomes are still recorded, and the messages that did not succeed are
// returned to the queue at once (those that failed rejected, those held nacked); Consume
// returns nil then (also when ctx has ended before it is called). When ch closes, the held
// deliveries and the delayed requeues stop waiting at once (the broker has requeued them),
// so Consume returns as soon as the running handlers have, with an error wrapping
// [ErrChannelClosed] (the caller opens another). A channel that amqp091-go's automatic
// recovery reopens (amqp.Config.Recovery) counts as closed at its first loss: its delivery
// tags start again, so Consume settles nothing it received before and runs nothing it
// receives after (unacknowledged until the caller closes ch), and returns the same way (see
// [WithAMQPConfig]). It returns [ErrConsumerCancelled] when the broker cancelled the
// subscription (the queue was deleted). The caller closes ch afterwards.
func (c *Consumer) Consume(ctx context.Context, ch *amqp.Channel) error {
	_, err := c.consume(ctx, ch)
	return err
}

func (c *Consumer) consume(ctx context.Context, ch *amqp.Channel) (consumed bool, err error) {
	if ctx.Err() != nil {
		return false, nil
	}
	l := newLink(ch)
	if err := ch.Qos(c.cfg.prefetch, 0, false); err != nil {
		return false, fmt.Errorf("rabbitconsumer: qos: %w", err)
	}
	// Cancelling sub cancels the subscription: when the channel is lost, so that a channel
	// that amqp091-go's automatic recovery reopens takes no more deliveries for it.
	sub, cancelSub := context.WithCancel(ctx)
	defer cancelSub()
	deliveries, err := ch.ConsumeWithContext(sub, c.queue, c.cfg.tag, false, false, false, false, nil)
	if err != nil && ctx.Err() != nil {
		return false, nil // stopped before it consumed: nothing in hand
	}
	if err != nil {
		return false, fmt.Errorf("rabbitconsumer: consume %s: %w", c.queue, err)
	}
	var requeues sync.WaitGroup // deliveries held back for a delayed requeue
	defer requeues.Wait()
	// Batches run side by side: a slow handler does not hold back the deliveries that
	// arrive meanwhile, and the prefetch bounds what is in hand across all of them.
	var running sync.WaitGroup
	defer running.Wait()
	// gone closes once no more deliveries come: the held ones stop waiting then.
	gone := make(chan struct{})
	for {
		var first amqp.Delivery
		ok := false
		select {
		case first, ok = <-deliveries:
		case e := <-l.closed:
			l.lose(e)
		case <-l.lost:
		}
		if !ok {
			break
		}
		ds := []amqp.Delivery{first}
	drain:
		for yields := 0; len(ds) < c.cfg.prefetch; {
			select {
			case d, ok := <-deliveries:
				if !ok {
					break drain
				}
				ds = append(ds, d)
			default:
				if yields++; yields > drainYields {
					break drain
				}
				runtime.Gosched()
			}
		}
		if l.isLost() {
			break // the broker has requeued these, or they came on a recovered channel
		}
		running.Add(1)
		go func() {
			defer running.Done()
			c.process(ctx, l, inHand(ds), gone, &requeues)
		}()
	}
	close(gone)
	if l.isLost() {
		cancelSub()
	}
	switch {
	case ctx.Err() != nil:
		return true, nil
	case l.isLost() || ch.IsClosed():
		return true, l.closedErr()
	default:
		return true, ErrConsumerCancelled
	}
}

// link is the channel a call of [Consumer.Consume] settles its deliveries on, as it was
// when it subscribed. Once that channel closes it stays lost, even when amqp091-go's
// automatic recovery (a connection dialled with amqp.Config.Recovery) reopens it: the
// reopened channel numbers its deliveries from 1 again, so a delivery tag of the lost one
// would settle another message there. A lost link settles nothing: the broker requeued
// those deliveries when the channel closed.
type link struct {
	// closed is the channel's NotifyClose: amqp091-go sends the broker's error on it (or
	// closes it) as the channel closes, before any recovery reopens it.
	closed <-chan *amqp.Error
	once   sync.Once
	lost   chan struct{} // closed once the channel is known closed
	err    *amqp.Error   // why it closed, when the broker said; set before lost closes
}

func newLink(ch *amqp.Channel) *link {
	return &link{closed: ch.NotifyClose(make(chan *amqp.Error, 1)), lost: make(chan struct{})}
}

// lose marks the link lost, because of e (nil when not known).
func (l *link) lose(e *amqp.Error) {
	l.once.Do(func() {
		l.err = e
		close(l.lost)
	})
}

// isLost reports whether the channel has closed since the link was made.
func (l *link) isLost() bool {
	select {
	case <-l.lost:
		return true
	default:
	}
	select {
	case e := <-l.closed:
		l.lose(e)
		return true
	default:
		return false
	}
}

// closedErr returns the error of a closed channel: [ErrChannelClosed], wrapping the
// broker's error when it is known.
func (l *link) closedErr() error {
	if l.isLost() && l.err != nil {
		return fmt.Errorf("%w: %w", ErrChannelClosed, l.err)
	}
	return ErrChannelClosed
}

// ack acknowledges d, unless the link is lost.
func (l *link) ack(d amqp.Delivery) error {
	if l.isLost() {
		return ErrChannelClosed
	}
	return d.Ack(false)
}

// nack returns d to the queue (requeue) or dead-letters it with basic.nack, unless the
// link is lost. RabbitMQ 4.3 and later do not count a nack toward a quorum queue's
// delivery limit: it says the consumer did not process d.
func (l *link) nack(d amqp.Delivery, requeue bool) error {
	if l.isLost() {
		return ErrChannelClosed
	}
	return d.Nack(false, requeue)
}

// reject returns d to the queue with basic.reject, unless the link is lost: d failed. Every
// RabbitMQ version counts it toward a quorum queue's delivery limit (4.3 and later count a
// reject, not a nack).
func (l *link) reject(d amqp.Delivery) error {
	if l.isLost() {
		return ErrChannelClosed
	}
	return d.Reject(true)
}

// Causes the consumer ends a handler's context with.
var (
	// errBatchDeadline is the cause of a handler's context ended by [WithBatchDeadline].
	errBatchDeadline = errors.New("rabbitconsumer: the batch deadline passed")
	// errStopping is the cause of a handler's context ended because the consumer stopped.
	errStopping = errors.New("rabbitconsumer: the consumer stopped")
)

// handlerRun is what one handler of a batch returned.
type handlerRun struct {
	// err is the error returned to the guard, compared by identity with the outcome's to
	// tell the handler's own failure from the guard's.
	err error
	// cut reports whether the handler returned an error after the consumer or idem ended
	// its context: the lease was lost, the batch deadline passed, or the consumer stopped.
	cut bool
}

// cutOff reports whether ctx, a handler's context, was ended by the consumer or by idem
// rather than left running: its cause is idem's lease loss (idem.ErrLeaseLost), the batch
// deadline or the consumer stopping.
func cutOff(ctx context.Context) bool {
	if ctx.Err() == nil {
		return false
	}
	cause := context.Cause(ctx)
	return errors.Is(cause, idem.ErrLeaseLost) || errors.Is(cause, errBatchDeadline) ||
		errors.Is(cause, errStopping)
}

// process runs one batch of deliveries and settles each one with the broker. The
// deliveries whose failure may pass while they are in hand are held and run again after a
// back-off, as a batch of their own, until they settle otherwise, the consumer stops or no
// more deliveries come (gone).
func (c *Consumer) process(ctx context.Context, l *link, in []held, gone <-chan struct{}, requeues *sync.WaitGroup) {
	wait := c.cfg.requeueDelay
	for {
		in = c.settleBatch(ctx, l, in, gone, requeues)
		if len(in) == 0 {
			return
		}
		if f := onHold.Load(); f != nil {
			(*f)()
		}
		select {
		case <-c.clock.After(wait):
		case <-ctx.Done():
		case <-gone:
		}
		if ctx.Err() != nil || isClosed(gone) {
			// Stopping, or the channel closed (the broker requeues them then, and these
			// nacks fail): back to the queue at once.
			for _, h := range in {
				_ = l.nack(h.d, true)
			}
			return
		}
		wait = min(max(2*wait, minHoldDelay), max(maxHoldDelay, c.cfg.requeueDelay))
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// settleBatch runs one batch of deliveries in hand, settles each one with the broker, and
// returns those to hold, with their counts of runs that committed nothing. A delayed
// requeue waits for the requeue delay, the consumer stopping or no more deliveries coming
// (gone), whichever is first.
func (c *Consumer) settleBatch(ctx context.Context, l *link, in []held, gone <-chan struct{}, requeues *sync.WaitGroup) (keep []held) {
	items := make([]batch.Item, len(in))
	now := c.clock.Now()
	for i, h := range in {
		key, err := c.keyOf(h.d)
		items[i] = batch.Item{ID: itemID(h.d), Key: key, Fingerprint: h.d.Body, Err: err}
		if err == nil {
			// A redelivery of a message returned to the queue with runs that committed
			// nothing goes on counting them (see uncommittedCounts).
			in[i].uncommitted = max(in[i].uncommitted, c.uncommitted.get(key, now))
		}
	}
	// Each index is written by its own handler, and read once Process has returned.
	runs := make([]handlerRun, len(in))
	run := func(hctx context.Context, i int) error {
		// The handler's context ends with its lease (the engine's), the batch deadline or
		// the consumer.
		hctx, cancel := context.WithCancelCause(hctx)
		defer cancel(nil)
		stop := context.AfterFunc(ctx, func() { cancel(fmt.Errorf("%w: %w", errStopping, context.Cause(ctx))) })
		defer stop()
		err := c.fn(hctx, in[i].d)
		if err != nil && cutOff(hctx) {
			// Cut off, not failed: nothing is stored for it, whatever
			// idem.WithRememberFailures says, and the message is requeued.
			err = &cutOffError{err: err}
			runs[i] = handlerRun{err: err, cut: true}
			return err
		}
		runs[i] = handlerRun{err: err}
		return err
	}
	// The outcomes are recorded even when the consumer stops meanwhile.
	bctx := context.WithoutCancel(ctx)
	if c.cfg.batchDeadline > 0 {
		var cancel context.CancelFunc
		bctx, cancel = context.WithDeadlineCause(bctx, c.clock.Now().Add(c.cfg.batchDeadline), errBatchDeadline)
		defer cancel()
	}
	rep := c.engine.Process(bctx, items, run, batch.Mode{Destination: c.queue})
	stopped := ctx.Err() != nil
	kinds := make([]settlement, len(in))
	var failed int
	for i, o := range rep.Outcomes {
		uncommitted := notCommitted(o)
		if uncommitted {
			in[i].uncommitted++
		}
		kinds[i] = c.settlement(o, runs[i], stopped, in[i].uncommitted)
		if o.Reason == batch.ReasonDuplicateFailed {
			// A duplicate of a failed item shares its settlement: one held is held, one cut off
			// is requeued, one that failed follows the policy.
			if j := original(items, rep.Outcomes, i); j >= 0 {
				kinds[i] = kinds[j]
			}
		}
		d := in[i].d
		kind := kinds[i]
		counted := false // returned to the queue with its count of runs that committed nothing
		switch {
		case kind == hold && d.Expiration != "" && uncommitted:
			// A per-message TTL (below), and the run committed nothing: rejected with
			// requeue after the delay, as a cut-off is, whatever the policy. The consumer
			// keeps its count for the key, so its redelivery goes on counting: past
			// WithNotCommittedRetries it is settled under the policy, as a held one is,
			// should the store refuse it every time.
			kind, counted = retry, true
		case kind == hold && d.Expiration != "":
			// A per-message TTL: the broker expires a message only while it is in the
			// queue, and does not tell when this one was queued, so the consumer cannot
			// know how long it may hold it. Requeued after the delay instead: the broker
			// expires it then if its TTL has passed.
			kind = requeueLater
		}
		if key := items[i].Key; items[i].Err == nil {
			switch {
			case counted:
				c.uncommitted.put(key, in[i].uncommitted, c.clock.Now())
			case kind == hold, kind == requeueLater:
				// Not settled: the count goes on, in hand or for the redelivery.
			default:
				c.uncommitted.drop(key) // settled, or handed to the failure policy
			}
		}
		var err error
		switch kind {
		case ack:
			err = l.ack(d)
		case deadLetter:
			c.logger.WarnContext(ctx, "rabbitmq: message dead-lettered", "message_id", o.ID,
				"stored_key", c.storedKey(o), "queue", c.queue, "reason", string(o.Reason), "error", o.Err)
			err = l.nack(d, false)
		case retryNow:
			err = l.reject(d)
		case hold:
			if stopped {
				err = l.nack(d, true)
			} else {
				keep = append(keep, in[i])
			}
		case retry, requeueLater:
			failure := kind == retry
			requeues.Add(1)
			go func() {
				defer requeues.Done()
				if !stopped {
					select {
					case <-c.clock.After(c.cfg.requeueDelay):
					case <-ctx.Done():
					case <-gone:
						// The channel closed (the broker has requeued it, and this nack
						// fails) or the subscription was cancelled: Consume returns
						// without waiting out the delay, and Run dials again.
					}
				}
				// A failure here means the channel closed: the broker requeues it then.
				if failure {
					_ = l.reject(d)
				} else {
					_ = l.nack(d, true)
				}
			}()
		}
		if err != nil {
			failed++
		}
	}
	if failed > 0 {
		// The channel closed: the broker delivers these again, and those whose outcome
		// was recorded replay.
		c.logger.WarnContext(ctx, "rabbitmq: could not settle messages with the broker",
			"queue", c.queue, "messages", failed)
	}
	return keep
}

// held is a delivery in hand, and how many of its runs in hand ended with a completion
// that committed nothing (see [Consumer.storeSettlement]).
type held struct {
	d           amqp.Delivery
	uncommitted int
}

// inHand returns ds as deliveries in hand, none of whose runs has committed nothing yet.
func inHand(ds []amqp.Delivery) []held {
	in := make([]held, len(ds))
	for i, d := range ds {
		in[i] = held{d: d}
	}
	return in
}

// notCommitted reports whether o is a run whose completion committed nothing
// (idemstore.ErrNotCommitted: the handler ran, the store refused its outcome and attached
// writes as a whole, and the guard released the key), or a duplicate sharing one.
func notCommitted(o batch.Outcome) bool {
	return (o.Reason == batch.ReasonStore || o.Reason == batch.ReasonDuplicateFailed) &&
		errors.Is(o.Err, idemstore.ErrNotCommitted) && !errors.Is(o.Err, idem.ErrIncompatibleRecord)
}

// original returns the index of the earlier item of the batch whose failure item i shares
// (the same key and body, failed on its own), or -1.
func original(items []batch.Item, outs []batch.Outcome, i int) int {
	for j := range i {
		if items[j].Err == nil && items[j].Key == items[i].Key && bytes.Equal(items[j].Fingerprint, items[i].Fingerprint) &&
			outs[j].Failed() && outs[j].Reason != batch.ReasonDuplicateFailed {
			return j
		}
	}
	return -1
}

// storedKey returns the stored key of o's item, as the guard scopes and hashes it (idemctl
// finds the record by it); "" for an item without a usable key.
func (c *Consumer) storedKey(o batch.Outcome) string {
	if o.Key == "" {
		return ""
	}
	key, err := c.guard.StoredKey(idem.Request{Key: o.Key})
	if err != nil {
		return ""
	}
	return key
}

// settlement is how a delivery is settled with the broker.
type settlement int

const (
	ack settlement = iota
	// retry rejects with requeue (basic.reject) after the requeue delay, at once when the
	// consumer stops: a handler failure under the Requeue policy, or a handler cut off. It
	// counts toward a quorum queue's delivery limit, on RabbitMQ 4.3 and later too.
	retry
	// retryNow rejects with requeue at once: a handler failure while the consumer stops.
	retryNow
	// requeueLater nacks with requeue (basic.nack) after the requeue delay, at once when the
	// consumer stops: a delivery with a per-message TTL that would have been held. It did
	// not fail, and RabbitMQ 4.3 and later do not count a nack toward the delivery limit.
	requeueLater
	// hold keeps a delivery that may pass while it is in hand, unacknowledged, and runs it
	// again after a back-off (see Consumer.process); at once nacked with requeue when the
	// consumer stops. A delivery with a per-message TTL is requeued instead.
	hold
	deadLetter
)

// settlement says how to settle a delivery whose outcome is o, its handler having
// returned r; stopped reports whether the consumer was stopping, and uncommitted is how
// many of the delivery's runs in hand, this one included, committed nothing.
//
// A handler cut off (its context ended by idem's lease loss, the batch deadline or the
// consumer stopping, and it returned an error) did not fail: its message is requeued,
// whatever the policy. The guard's own failures say why from the outcome's reason, never
// from the handler's error chain: a handler's error that wraps an idem sentinel (of a
// guarded step of its own) is the handler's failure.
func (c *Consumer) settlement(o batch.Outcome, r handlerRun, stopped bool, uncommitted int) settlement {
	if !o.Failed() {
		return ack
	}
	switch o.Reason {
	case batch.ReasonKey, batch.ReasonPayloadMismatch:
		// Redelivery fails the same way.
		return deadLetter
	case batch.ReasonHandler, batch.ReasonPanic:
		switch {
		case o.Err != r.err && errors.Is(o.Err, idem.ErrFailed): //nolint:errorlint // by identity
			// The guard's, not the handler's: a failure it remembers
			// (idem.WithRememberFailures), which every redelivery meets again.
			return deadLetter
		case r.cut:
			return retry
		}
		return c.failure(stopped)
	case batch.ReasonStore:
		return c.storeSettlement(o.Err, stopped, uncommitted)
	case batch.ReasonDuplicateFailed:
		// Settled as its original when that is in hand (see settleBatch).
		var cut *cutOffError
		switch {
		case errors.As(o.Err, &cut):
			return retry
		case errors.Is(o.Err, idem.ErrIncompatibleRecord), errors.Is(o.Err, idemstore.ErrNotCommitted):
			return c.storeSettlement(o.Err, stopped, uncommitted)
		case mayPassInHand(o.Err):
			return hold
		}
		return c.failure(stopped)
	default: // in progress elsewhere, lease taken over, not started
		return hold
	}
}

// storeSettlement says how to settle a delivery whose outcome failed with err, of reason
// batch.ReasonStore; stopped reports whether the consumer was stopping, and uncommitted is
// how many of the delivery's runs in hand, this one included, committed nothing. A store
// failure is held, as it may pass, but for two:
//   - a record this version cannot read (idem.ErrIncompatibleRecord: a newer release's
//     schema, or a damaged item): dead-lettered, as a key used with another body is; every
//     redelivery meets it again, and the handler never runs over it;
//   - a completion that committed nothing (idemstore.ErrNotCommitted: the store refused
//     the outcome with its attached writes as a whole, and the guard released the key):
//     held while uncommitted is at most [WithNotCommittedRetries], then settled as the
//     failure policy says. The store answers so for a failure that passes (a broken
//     connection, a deadlock, throttling) and for one that recurs every time (an attached
//     write over its size limit, one that swallows a failed statement), and the error does
//     not tell them apart; held for ever, the second would run the handler again at every
//     back-off, and no delivery limit would count it.
func (c *Consumer) storeSettlement(err error, stopped bool, uncommitted int) settlement {
	switch {
	case errors.Is(err, idem.ErrIncompatibleRecord):
		return deadLetter
	case errors.Is(err, idemstore.ErrNotCommitted) && uncommitted > c.cfg.notCommittedRetries:
		return c.failure(stopped)
	}
	return hold
}

// failure says how to settle a delivery whose handler failed (and was not cut off), as
// the failure policy says; stopped reports whether the consumer was stopping.
func (c *Consumer) failure(stopped bool) settlement {
	switch {
	case stopped:
		return retryNow
	case c.cfg.policy == DeadLetter:
		return deadLetter
	}
	return retry
}

// mayPassInHand reports whether err is a failure that may pass while its delivery is held:
// a key in flight elsewhere, a store failure, a lease taken over, an item not started.
func mayPassInHand(err error) bool {
	return errors.Is(err, idem.ErrInProgress) || errors.Is(err, idem.ErrStore) ||
		errors.Is(err, idem.ErrLeaseLost) || errors.Is(err, batch.ErrNotStarted)
}
