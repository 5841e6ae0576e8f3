package rabbitconsumer

import (
	"sync/atomic"
	"time"

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

// cutOffError is the error a handler cut off returned, as the consumer hands it to the
// guard: it wraps idem.ErrDoNotStore, so the key is released and nothing is stored,
// whatever idem.WithRememberFailures says; the message is requeued.
type cutOffError struct{ err error }

func (e *cutOffError) Error() string {
	return "rabbitconsumer: handler cut off, nothing stored: " + e.err.Error()
}

func (e *cutOffError) Unwrap() []error { return []error{e.err, idem.ErrDoNotStore} }
