package lambdawrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// KeyFunc returns the idempotency key of an event. An empty key, or an error, means the
// event has none: [Wrap] then refuses it with [idem.ErrMissingKey], or runs it unguarded
// when the key is optional ([WithKeyRequired]).
type KeyFunc[In any] func(In) (string, error)

// Wrap makes a Lambda handler idempotent: the returned handler, of the same type, runs h at
// most once per key within the guard's expiry window and gives every retry or duplicate
// the first run's result, which must therefore survive the guard's codec (JSON by default).
// It is meant to go straight to lambda.Start. The key is key(event) and is scoped by the
// guard and by [WithTenant], if given; [WithFingerprint] or [WithFingerprintJMESPath]
// turn on payload validation.
//
// The handler returns what h returns on a first run, and otherwise the errors of
// [idem.Do]: notably [idem.ErrInProgress] for a duplicate in flight (so Lambda retries it
// later), [idem.ErrPayloadMismatch], and [idem.ErrStore]; plus [idem.ErrMissingKey] for an
// event without a key, wrapping the key function's error if there was one. An error from h
// is returned unchanged and nothing is stored, so the next retry runs h again.
//
// If h succeeded but the store failed to record its outcome, the handler returns h's
// result and no error, so that Lambda does not retry work that happened, and logs the
// failure at ERROR ([WithLogger]); a duplicate arriving after the lease ends may run h
// again. If the store committed nothing ([idemstore.ErrNotCommitted]), that error is returned:
// the key was released, and the retry runs h again. The lease on the key ends at the
// invocation's deadline plus the guard's margin, so a timed-out invocation does not block
// its retries for long.
//
// Wrap returns an error if g, h or key is nil or an option is invalid; HTTP-only options
// are invalid here. The returned handler is safe for concurrent use.
func Wrap[In, Out any](g *idem.Guard, h func(context.Context, In) (Out, error), key KeyFunc[In], opts ...Option) (func(context.Context, In) (Out, error), error) {
	if g == nil || h == nil || key == nil {
		return nil, optErr("Wrap", "guard, handler and key function must not be nil")
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(c.httpOnly) > 0 {
		return nil, optErr(strings.Join(c.httpOnly, ", "), "applies to HTTP decorators only")
	}
	tenant, err := resolveTenant[In](c, func(In) string { return "" })
	if err != nil {
		return nil, err
	}
	fingerprint, err := resolveFingerprint[In](c, nil)
	if err != nil {
		return nil, err
	}
	required, logger := c.keyRequired, c.logger

	return func(ctx context.Context, in In) (Out, error) {
		k, err := key(in)
		if err != nil || k == "" {
			if err != nil {
				err = fmt.Errorf("lambdawrap: key: %w: %w", idem.ErrMissingKey, err)
			} else {
				err = fmt.Errorf("lambdawrap: key: %w", idem.ErrMissingKey)
			}
			if !required {
				reportUnguarded(ctx, g, err)
				return h(ctx, in)
			}
			var zero Out
			return zero, err
		}
		req := idem.Request{Key: k, Tenant: tenant(in)}
		if fingerprint != nil {
			fp, err := fingerprint(in)
			if err != nil {
				var zero Out
				return zero, fmt.Errorf("lambdawrap: fingerprint: %w", err)
			}
			req.Fingerprint = fp
		}
		ran := false // h returned without an error
		out, _, err := idem.Do(ctx, g, req, func(ctx context.Context) (Out, error) {
			out, err := h(ctx, in)
			ran = err == nil
			return out, err
		})
		if ran && notRecorded(err) {
			// h's effects happened: an error would make Lambda retry the event, and the
			// retry would run h again once the lease ends.
			logNotRecorded(ctx, logger, err)
			return out, nil
		}
		return out, err
	}, nil
}

// notRecorded reports whether err, from [idem.Do], says the handler ran but the store
// failed to record its outcome, which is then neither committed nor known to be absent.
// A completion that committed nothing ([idemstore.ErrNotCommitted]) released the key instead.
func notRecorded(err error) bool {
	return isOp(err, opComplete) && !errors.Is(err, idemstore.ErrNotCommitted)
}

// isOp reports whether err is an [idem.StoreError] of operation op.
func isOp(err error, op string) bool {
	var se *idem.StoreError
	return errors.As(err, &se) && se.Op == op
}

// opComplete is the [idem.StoreError] operation that records a handler's outcome.
const opComplete = "complete"

func logNotRecorded(ctx context.Context, l *slog.Logger, err error) {
	l.ErrorContext(ctx, "lambdawrap: the handler ran but its outcome was not recorded; "+
		"a retry after the lease ends may run it again", "error", err)
}
