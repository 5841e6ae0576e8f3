package esm

import (
	"context"
	"errors"
	"sync"
)

// Errors the poller records as an invocation's function error ([Invocation.Err]).
var (
	// ErrInjected is the function error of an invocation failed by [FaultFail].
	ErrInjected = errors.New("esm: injected function error")
	// ErrResponseLost is the function error of an invocation whose response
	// [FaultLoseResponse] dropped.
	ErrResponseLost = errors.New("esm: response lost")
	// ErrCrashed is the function error of an invocation ended by [Crash].
	ErrCrashed = errors.New("esm: invocation crashed")
	// ErrTimeout is the function error of an invocation that outran its function timeout
	// ([WithTimeout]); Lambda reports "Task timed out".
	ErrTimeout = errors.New("esm: task timed out")
	// ErrPanic is the function error of an invocation whose handler panicked; in Lambda the
	// runtime exits (Runtime.ExitError).
	ErrPanic = errors.New("esm: handler panicked")
)

// Fault is a failure [WithFault] injects into one invocation.
type Fault int

const (
	// FaultNone injects nothing.
	FaultNone Fault = iota
	// FaultFail fails the invocation with [ErrInjected] before the handler runs, as when
	// the runtime cannot start.
	FaultFail
	// FaultLoseResponse runs the handler to the end and drops its response: the poller
	// sees [ErrResponseLost], as when the sandbox dies or times out just after the work.
	// Every effect of the handler happened, and the batch is delivered again.
	FaultLoseResponse
)

// Batch describes an invocation about to be made, for [WithFault].
type Batch struct {
	// Shard is the shard the records come from.
	Shard string
	// Records are the sequence numbers of the batch, in order.
	Records []string
	// Retry counts the failed invocations before this one that began with the same record
	// (0 the first time).
	Retry int
}

// crash is the handle [Crash] finds in an invocation's context.
type crash struct {
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	done   bool
}

type crashKey struct{}

// Crash ends the invocation that ctx (or a context derived from it) belongs to, the way a
// process dies mid-batch: the invocation's context is cancelled with cause [ErrCrashed], so
// every call that honours it fails from then on, and the poller records a function error
// whatever the handler goes on to return. Call it from the handler, or from anything the
// handler calls, at the point to crash. It reports whether ctx belonged to an invocation.
func Crash(ctx context.Context) bool {
	c, ok := ctx.Value(crashKey{}).(*crash)
	if !ok {
		return false
	}
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
	c.cancel(ErrCrashed)
	return true
}

func (c *crash) crashed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}
