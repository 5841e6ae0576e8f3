package rabbitconsumer

import (
	"strconv"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem"
)

// The back-off of a held delivery: its first wait is the requeue delay
// ([WithRequeueDelay]), then each wait doubles, from at least minHoldDelay, up to
// maxHoldDelay (or the requeue delay, when that is longer).
const (
	minHoldDelay = 10 * time.Millisecond
	maxHoldDelay = 30 * time.Second
)

// onHold, when set (by tests), runs each time a batch's deliveries are held, before they
// wait to run again.
var onHold atomic.Pointer[func()]

// inHand is a delivery in the consumer's hand.
type inHand struct {
	d amqp.Delivery
	// until is when the broker would have expired d had it stayed in the queue (its
	// expiration property, counted from its receipt); zero without one.
	until time.Time
}

// holdUntil returns when d, received at now, has expired by the broker's clock: now plus
// its per-message TTL (the expiration property, in milliseconds), which bounds what was
// left of it when it was delivered. Zero when d has none. A held delivery is requeued then,
// and the broker dead-letters (or drops) it as expired instead of the consumer running it
// late.
func holdUntil(d amqp.Delivery, now time.Time) time.Time {
	if d.Expiration == "" {
		return time.Time{}
	}
	ms, err := strconv.ParseInt(d.Expiration, 10, 64)
	if err != nil || ms < 0 {
		return time.Time{}
	}
	return now.Add(time.Duration(ms) * time.Millisecond)
}

// cutOffError is the error a handler cut off returned, as the consumer hands it to the
// guard: it wraps idem.ErrDoNotStore, so the key is released and nothing is stored,
// whatever idem.WithRememberFailures says; the message is requeued.
type cutOffError struct{ err error }

func (e *cutOffError) Error() string {
	return "rabbitconsumer: handler cut off, nothing stored: " + e.err.Error()
}

func (e *cutOffError) Unwrap() []error { return []error{e.err, idem.ErrDoNotStore} }
