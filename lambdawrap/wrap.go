package lambdawrap

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/idemkit/idem"
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
// is returned unchanged and nothing is stored, so the next retry runs h again. The lease on
// the key ends at the invocation's deadline plus the guard's margin, so a timed-out
// invocation does not block its retries for long.
//
// Wrap returns an error if g, h or key is nil or an option is invalid; HTTP-only options
// are invalid here. The returned handler is safe for concurrent use.
func Wrap[In, Out any](g *idem.Guard, h func(context.Context, In) (Out, error), key KeyFunc[In], opts ...Option) (func(context.Context, In) (Out, error), error) {
	if g == nil || h == nil || key == nil {
		return nil, errors.New("lambdawrap: Wrap: guard, handler and key function must not be nil")
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
	required := c.keyRequired

	return func(ctx context.Context, in In) (Out, error) {
		k, err := key(in)
		if err != nil || k == "" {
			if !required {
				return h(ctx, in)
			}
			var zero Out
			if err != nil {
				return zero, fmt.Errorf("lambdawrap: key: %w: %w", idem.ErrMissingKey, err)
			}
			return zero, fmt.Errorf("lambdawrap: key: %w", idem.ErrMissingKey)
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
		out, _, err := idem.Do(ctx, g, req, func(ctx context.Context) (Out, error) { return h(ctx, in) })
		return out, err
	}, nil
}
