package lambdawrap

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/httpsem"
)

// KeyFunc returns the idempotency key of an event.
// An empty key, or an error, means the event has none. [Wrap] then refuses it with
// [idem.ErrMissingKey], or runs it unguarded when the key function came from [OptionalKey].
type KeyFunc[In any] func(In) (string, error)

// OptionalKey returns key, made optional.
// When it finds no key in an event (an empty key or an error), [Wrap] runs the handler
// unguarded instead of refusing the event. The Powertools utilities do so by default.
// Every such run is reported, so that a key that is never found does not go unnoticed
// (a misspelt JMESPath expression, say):
//
//   - through the guard's OnUnguarded hook, with an empty Key and an error wrapping
//     [idem.ErrMissingKey] and the key function's error, if any;
//   - at WARN, through the guard's logger.
//
// In an unguarded run, idem.Attach and idem.Checkpoint return [idem.ErrNoLease]. A handler
// that attaches its writes makes them itself when it gets that error. Called directly, the
// returned function answers an event without a key with such an error.
// OptionalKey(nil) is nil.
func OptionalKey[In any](key KeyFunc[In]) KeyFunc[In] {
	if key == nil {
		return nil
	}
	return func(in In) (string, error) {
		k, err := key(in)
		if err != nil || k == "" {
			return "", &optionalKeyError{missingKey(err)}
		}
		return k, nil
	}
}

// optionalKeyError is the answer of an [OptionalKey] function that found no key.
// [Wrap] tells it apart from a required key's absence by its type.
type optionalKeyError struct{ err error }

func (e *optionalKeyError) Error() string { return e.err.Error() }
func (e *optionalKeyError) Unwrap() error { return e.err }

// missingKey returns the error of an event without a key, wrapping [idem.ErrMissingKey]
// and cause, the key function's error, if any.
func missingKey(cause error) error {
	var opt *optionalKeyError
	if errors.As(cause, &opt) {
		return opt.err
	}
	if cause != nil {
		return fmt.Errorf("lambdawrap: key: %w: %w", idem.ErrMissingKey, cause)
	}
	return fmt.Errorf("lambdawrap: key: %w", idem.ErrMissingKey)
}

// Wrap makes a Lambda handler idempotent. The returned handler, of the same type, runs h
// at most once per key within the guard's expiry window. Every retry or duplicate gets the
// first run's result, which must therefore survive the guard's codec (JSON by default).
// It is meant to go straight to lambda.Start.
//
// The key is key(event). The guard and [WithTenant], if given, scope it.
// [WithFingerprint] or [WithFingerprintJMESPath] turn on payload validation.
// Its options are typed by the event. An option for another event, or an [HTTPOption],
// does not compile.
//
// The handler returns what h returns on a first run. Otherwise it returns the errors of
// [idem.Do], notably:
//
//   - [idem.ErrInProgress] for a duplicate in flight, so Lambda retries it later;
//   - [idem.ErrPayloadMismatch];
//   - [idem.ErrStore];
//   - [idem.ErrMissingKey] for an event without a key, unless key came from [OptionalKey].
//     It wraps the key function's error, if there was one.
//
// An error from h is returned unchanged, and nothing is stored. So the next retry runs h
// again.
//
// The store may fail to record the outcome after h succeeded:
//
//   - Usually the handler then returns h's result and no error, so that Lambda does not
//     retry work that happened. The guard logs the failure at ERROR. A duplicate arriving
//     after the lease ends may run h again.
//   - If the store committed nothing ([github.com/idemkit/idem/idemstore.ErrNotCommitted]),
//     that error is returned. The key was released, and the retry runs h again.
//
// The lease on the key ends at the invocation's deadline plus the guard's margin. So a
// timed-out invocation does not block its retries for long.
//
// Wrap logs and reports through the guard (see idem.WithLogger and idem.WithHooks). It
// returns an error if g, h or key is nil or an option is invalid. The returned handler is
// safe for concurrent use.
func Wrap[In, Out any](g *idem.Guard, h func(context.Context, In) (Out, error), key KeyFunc[In], opts ...Option[In]) (func(context.Context, In) (Out, error), error) {
	if g == nil || h == nil || key == nil {
		return nil, optErr("Wrap", "guard, handler and key function must not be nil")
	}
	var c eventConfig[In]
	if err := apply(&c, opts, setEvent[In]); err != nil {
		return nil, err
	}
	tenant, fingerprint := c.tenant, c.fingerprint

	return func(ctx context.Context, in In) (Out, error) {
		k, err := key(in)
		if err != nil || k == "" {
			var optional *optionalKeyError
			if errors.As(err, &optional) {
				httpsem.ReportUnguarded(ctx, pkg, g, optional.err)
				return h(ctx, in)
			}
			var zero Out
			return zero, missingKey(err)
		}
		req := idem.Request{Key: k}
		if tenant != nil {
			req.Tenant = tenant(in)
		}
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
		if ran && httpsem.NotRecorded(err) {
			// h's effects happened, and the guard logged the failure: an error would make
			// Lambda retry the event, and the retry would run h again once the lease ends.
			return out, nil
		}
		// The error goes to Lambda, which logs it without the stored key: the line names it.
		httpsem.LogRefusal(ctx, pkg, g, req, httpsem.RefusalReason(err), 0, err)
		return out, err
	}, nil
}
