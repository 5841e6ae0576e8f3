package lambdawrap

import (
	"fmt"

	"github.com/idemkit/idem"
)

// Option is a setting that reads the event, so its type names the event type In.
// [WithTenant], [WithFingerprint] and [WithFingerprintJMESPath] make one.
// Options are applied in order; a nil Option does nothing.
// Which functions take it:
//
//   - [Wrap] takes the options of its own event type.
//   - Each HTTP decorator takes those of its event shape, besides every [HTTPOption].
//     For example, an Option for events.APIGatewayV2HTTPRequest is an [HTTPAPIOption].
//
// An option written for another event type does not compile.
// A decorator given an invalid option returns an error naming it.
type Option[In any] func(*eventConfig[In]) error

// eventConfig holds the settings that read the event, for any decorator.
type eventConfig[In any] struct {
	tenant      func(In) string          // nil: the decorator's default
	fingerprint func(In) ([]byte, error) // nil: the decorator's default
}

// setEvent applies o to c. A nil o does nothing, as a nil interface did before Option was
// a function type.
func setEvent[In any](o Option[In], c *eventConfig[In]) error {
	if o == nil {
		return nil
	}
	return o(c)
}

// WithTenant sets how the caller's identity is read from the event. The same key from two
// tenants is two separate records, so no tenant can ever be replayed another's response;
// an empty tenant means the key is not scoped by caller. Default: for the HTTP decorators,
// the identity the event carries (see the package documentation for the order in which it
// is looked up), and a refusal of an authenticated event that carries none (see
// [ErrUnknownCaller]); for [Wrap], none. The function given replaces the default whole:
// what it returns, "" included, is the tenant. Must not be nil.
func WithTenant[In any](tenant func(In) string) Option[In] {
	return func(c *eventConfig[In]) error {
		if tenant == nil {
			return optErr("WithTenant", "must not be nil")
		}
		c.tenant = tenant
		return nil
	}
}

// WithFingerprint sets what identifies a request's content: a key reused with a different
// fingerprint is refused with [idem.ErrPayloadMismatch] (HTTP 422). An error from it refuses
// the request: [Wrap] returns it wrapped, the HTTP decorators answer 400. Default: for the
// HTTP decorators, the method, path, query string and body, the body decoded from base64
// when the event says so and canonicalised when it is JSON, so that key order and white
// space do not matter, except the order of keys equal under Unicode case folding (exact
// duplicates included): Go's decoder matches them to one struct field and the last one
// wins, so {"amount":1,"AMOUNT":100} and {"AMOUNT":100,"amount":1} are two requests. For
// [Wrap], none (payload validation off). Must not be nil.
func WithFingerprint[In any](fingerprint func(In) ([]byte, error)) Option[In] {
	return func(c *eventConfig[In]) error {
		if fingerprint == nil {
			return optErr("WithFingerprint", "must not be nil")
		}
		c.fingerprint = fingerprint
		return nil
	}
}

// WithFingerprintJMESPath sets the fingerprint (see [WithFingerprint], which it replaces)
// to the part of the event that the JMESPath expression selects from the event's JSON,
// canonicalised, for parity with the Powertools utilities' payload validation. The
// Powertools functions powertools_json, powertools_base64 and powertools_base64_gzip are
// available (see [KeyFromJMESPath]). In, the event type, is given explicitly, as for
// [KeyFromJMESPath]. The expression must compile. An expression that fails over an event
// fails the invocation with an error that names the expression, never the event's values
// (see [KeyFromJMESPath]).
func WithFingerprintJMESPath[In any](expr string) Option[In] {
	q, err := compileJMESPath(expr)
	return func(c *eventConfig[In]) error {
		if err != nil {
			return fmt.Errorf("%w: lambdawrap: WithFingerprintJMESPath: %w", idem.ErrInvalidOption, err)
		}
		c.fingerprint = func(in In) ([]byte, error) { return q.fingerprint(in) }
		return nil
	}
}

// apply applies opts to c in order, with set choosing the method of the decorator's kind.
// A nil option does nothing.
func apply[O any, C any](c *C, opts []O, set func(O, *C) error) error {
	for _, o := range opts {
		if any(o) == nil {
			continue
		}
		if err := set(o, c); err != nil {
			return err
		}
	}
	return nil
}

func optErr(name, msg string) error {
	return fmt.Errorf("%w: lambdawrap: %s: %s", idem.ErrInvalidOption, name, msg)
}
