package httpsem

import (
	"context"
	"errors"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// ReportUnguarded makes a run without a key visible: the handler is about to run with no
// guard, because the request carried no key and the key is optional. A key that is never
// found (a misspelt JMESPath expression, a client that never sends the header) would
// otherwise leave every request unguarded without a trace. It logs at WARN through the
// guard's logger, naming the public package pkg, and calls the guard's OnUnguarded hook
// with an empty Key and err, which wraps idem.ErrMissingKey.
func ReportUnguarded(ctx context.Context, pkg string, g *idem.Guard, err error) {
	g.Logger().WarnContext(ctx, pkg+": no idempotency key; running the handler unguarded", "error", err)
	if on := g.Hooks().OnUnguarded; on != nil {
		on(ctx, idem.Event{Err: err})
	}
}

// NotRecorded reports whether err, from idem.Do, says the handler ran but the store
// failed to record its outcome, which is then neither committed nor known to be absent.
// A completion that committed nothing (idemstore.ErrNotCommitted) released the key
// instead.
func NotRecorded(err error) bool {
	return isOp(err, opComplete) && !errors.Is(err, idemstore.ErrNotCommitted)
}

// isOp reports whether err is an idem.StoreError of operation op.
func isOp(err error, op string) bool {
	var se *idem.StoreError
	return errors.As(err, &se) && se.Op == op
}

// opComplete is the idem.StoreError operation that records a handler's outcome.
const opComplete = "complete"
