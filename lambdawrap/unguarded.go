package lambdawrap

import (
	"context"

	"github.com/idemkit/idem"
)

// reportUnguarded makes a run without a key visible: the handler is about to run with no
// guard, because the request carried no key and the key is optional. A key that is never
// found (a misspelt JMESPath expression, a client that never sends the header) would
// otherwise leave every request unguarded without a trace. It logs at WARN through the
// guard's logger and calls the guard's OnUnguarded hook with an empty Key and err, which
// wraps [idem.ErrMissingKey].
func reportUnguarded(ctx context.Context, g *idem.Guard, err error) {
	g.Logger().WarnContext(ctx, "lambdawrap: no idempotency key; running the handler unguarded", "error", err)
	if on := g.Hooks().OnUnguarded; on != nil {
		on(ctx, idem.Event{Err: err})
	}
}
