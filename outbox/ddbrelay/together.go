package ddbrelay

import (
	"context"
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
// to make the next call.
type waiting struct {
	m    outbox.Message
	res  chan error
	lead chan struct{}
}

type togetherKey struct{}

// withTogether returns ctx carrying a [together] for the batch.
func withTogether(ctx context.Context, pub outbox.Publisher) context.Context {
	return context.WithValue(ctx, togetherKey{}, &together{ctx: ctx, pub: pub})
}

// publish publishes m with the events published at the same time, and returns its
// outcome: nil, the publisher's error for it, or errShortAnswer.
func (t *together) publish(m outbox.Message) error {
	w := &waiting{m: m, res: make(chan error, 1), lead: make(chan struct{}, 1)}
	t.mu.Lock()
	t.queue = append(t.queue, w)
	if !t.busy {
		t.busy = true
		w.lead <- struct{}{}
	}
	t.mu.Unlock()
	select {
	case err := <-w.res:
		return err
	case <-w.lead:
	}
	t.mu.Lock()
	calls := t.queue // w among them
	t.queue = nil
	t.mu.Unlock()
	msgs := make([]outbox.Message, len(calls))
	for i, c := range calls {
		msgs[i] = c.m
	}
	errs := t.pub.Publish(t.ctx, msgs)
	for i, c := range calls {
		switch {
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
		t.queue[0].lead <- struct{}{} // the first to arrive meanwhile makes the next call
	} else {
		t.busy = false
	}
	t.mu.Unlock()
	return <-w.res
}
