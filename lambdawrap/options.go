package lambdawrap

import (
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/jmespathkey"
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

// setEvent applies o to c. A nil o does nothing, as a nil interface did when Option was an
// interface.
func setEvent[In any](o Option[In], c *eventConfig[In]) error {
	if o == nil {
		return nil
	}
	return o(c)
}

// WithTenant sets how the caller's identity is read from the event.
// The same key from two tenants is two separate records. So no tenant can ever be replayed
// another's response. An empty tenant means the key is not scoped by caller.
// The default depends on the decorator:
//
//   - For the HTTP decorators, it is the identity the event carries. The package
//     documentation gives the order in which it is looked up. An authenticated event that
//     carries none is refused (see [ErrUnknownCaller]).
//   - For [Wrap], there is none.
//
// The function given replaces the default whole: what it returns, "" included, is the
// tenant. Must not be nil.
func WithTenant[In any](tenant func(In) string) Option[In] {
	return func(c *eventConfig[In]) error {
		if tenant == nil {
			return optErr("WithTenant", "must not be nil")
		}
		c.tenant = tenant
		return nil
	}
}

// WithFingerprint sets what identifies a request's content.
// A key reused with a different fingerprint is refused with [idem.ErrPayloadMismatch]
// (HTTP 422). An error from the function refuses the request: [Wrap] returns it wrapped,
// and the HTTP decorators answer 400. The default depends on the decorator:
//
//   - For the HTTP decorators, it is the method, path, query string and body. The body is
//     decoded from base64 when the event says so. It is canonicalised when it is JSON, so
//     that key order and white space do not matter.
//   - For [Wrap], there is none: payload validation is off.
//
// One order in the JSON body does matter: that of keys equal under Unicode case folding,
// exact duplicates included. Go's decoder matches them to one struct field, and the last
// one wins. So {"amount":1,"AMOUNT":100} and {"AMOUNT":100,"amount":1} are two requests.
// Must not be nil.
func WithFingerprint[In any](fingerprint func(In) ([]byte, error)) Option[In] {
	return func(c *eventConfig[In]) error {
		if fingerprint == nil {
			return optErr("WithFingerprint", "must not be nil")
		}
		c.fingerprint = fingerprint
		return nil
	}
}

// WithFingerprintJMESPath sets the fingerprint to a part of the event's JSON.
// The JMESPath expression selects the part, which is canonicalised. This matches the
// Powertools utilities' payload validation. It replaces [WithFingerprint].
//
// The Powertools functions powertools_json, powertools_base64 and powertools_base64_gzip
// are available (see [KeyFromJMESPath]). In, the event type, is given explicitly, as for
// [KeyFromJMESPath]. The expression must compile. An expression that fails over an event
// fails the invocation. The error names the expression, never the event's values (see
// [KeyFromJMESPath]).
func WithFingerprintJMESPath[In any](expr string) Option[In] {
	q, err := jmespathkey.Compile("lambdawrap", expr)
	return func(c *eventConfig[In]) error {
		if err != nil {
			return fmt.Errorf("%w: lambdawrap: WithFingerprintJMESPath: %w", idem.ErrInvalidOption, err)
		}
		c.fingerprint = func(in In) ([]byte, error) { return q.Fingerprint(in) }
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
