package ddbrelay

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/idemkit/idem/outbox"
)

// together hands the events that the batch's keys publish at the same time to the
// publisher in one call (a group commit): the first event goes out alone, the ones that
// arrive while a call is in flight wait and go out together in the next, so a slow broker
// gets fewer, fuller calls (SendMessageBatch takes ten) and no event waits for a timer.
// Each key has at most one event waiting (the engine runs a key's events one at a time, each
// after the one before returned), so a call never holds two events of one key, as
// outbox.Publisher requires. Calls are made with the batch's context.
type together struct {
	ctx context.Context
	pub outbox.Publisher

	mu    sync.Mutex
	busy  bool // a caller is publishing
	queue []*waiting
}

// waiting is an event waiting for its call: res gets its outcome; lead tells its caller
// to make the next call (leading is set, under mu, when it does).
type waiting struct {
	m       outbox.Message
	res     chan error
	lead    chan struct{}
	leading bool
}

type togetherKey struct{}

// errPublisherPanicked is the outcome of the events of a call in which the publisher
// panicked; the event whose caller made the call panics with the value instead.
var errPublisherPanicked = errors.New("ddbrelay: the publisher panicked in a call of several events")

// withTogether returns ctx carrying a [together] for the batch.
func withTogether(ctx context.Context, pub outbox.Publisher) context.Context {
	return context.WithValue(ctx, togetherKey{}, &together{ctx: ctx, pub: pub})
}

// publish publishes m with the events published at the same time, and returns its
// outcome: nil, the publisher's error for it, or errShortAnswer. An event still waiting
// for its call when ctx ends returns ctx's error, unsent. A publisher that panics fails
// every event of its call: the caller that made the call panics again with the value (the
// engine fails its record so), the others get errPublisherPanicked.
func (t *together) publish(ctx context.Context, m outbox.Message) error {
	w := &waiting{m: m, res: make(chan error, 1), lead: make(chan struct{}, 1)}
	t.mu.Lock()
	t.queue = append(t.queue, w)
	if !t.busy {
		t.busy = true
		w.leading = true
		w.lead <- struct{}{}
	}
	t.mu.Unlock()
	select {
	case err := <-w.res:
		return err
	case <-w.lead:
	case <-ctx.Done():
		t.mu.Lock()
		if i := slices.Index(t.queue, w); i >= 0 && !w.leading {
			t.queue = slices.Delete(t.queue, i, i+1) // no call took it: it leaves unsent
			t.mu.Unlock()
			return context.Cause(ctx)
		}
		t.mu.Unlock()
		// A call took it (its outcome comes), or it was made the next caller.
		select {
		case err := <-w.res:
			return err
		case <-w.lead:
		}
	}
	t.mu.Lock()
	calls := t.queue // w among them
	t.queue = nil
	t.mu.Unlock()
	msgs := make([]outbox.Message, len(calls))
	for i, c := range calls {
		msgs[i] = c.m
	}
	errs, panicked := t.call(msgs)
	for i, c := range calls {
		switch {
		case panicked != nil:
			c.res <- errPublisherPanicked
		case errs == nil:
			c.res <- nil
		case len(errs) != len(msgs):
			c.res <- errShortAnswer
		default:
			c.res <- errs[i]
		}
	}
	t.mu.Lock()
	if len(t.queue) > 0 {
		next := t.queue[0] // the first to arrive meanwhile makes the next call
		next.leading = true
		next.lead <- struct{}{}
	} else {
		t.busy = false
	}
	t.mu.Unlock()
	if panicked != nil {
		panic(panicked.v)
	}
	return <-w.res
}

// panicValue is what a publisher panicked with.
type panicValue struct{ v any }

// call calls the publisher with msgs, recovering a panic.
func (t *together) call(msgs []outbox.Message) (errs []error, panicked *panicValue) {
	defer func() {
		if v := recover(); v != nil {
			panicked = &panicValue{v: v}
		}
	}()
	return t.pub.Publish(t.ctx, msgs), nil
}
