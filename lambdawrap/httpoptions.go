package lambdawrap

import "github.com/idemkit/idem/internal/httpsem"

// Defaults of the HTTP options.
const (
	// DefaultHeader is the request header that carries the idempotency key (see [WithHeader]).
	DefaultHeader = httpsem.DefaultHeader
	// ReplayedHeader is added, with the value "true", to every replayed HTTP response.
	ReplayedHeader = httpsem.ReplayedHeader
	// MaxHeaderKeyLength is the longest idempotency key the HTTP header may carry.
	// It counts characters, which are bytes: keys are printable ASCII.
	// A longer key is refused with 400 [ProblemInvalidKey].
	// The guard's own limit, idem.MaxKeyLength, is larger.
	MaxHeaderKeyLength = httpsem.MaxKeyLength
	// MaxKeyLength is the old name of [MaxHeaderKeyLength].
	//
	// Deprecated: Use [MaxHeaderKeyLength], whose name says what it limits.
	MaxKeyLength = MaxHeaderKeyLength
)

// DefaultMethods returns the HTTP methods guarded unless [WithMethods] says otherwise:
// POST and PATCH. PUT and DELETE are idempotent by definition, and GET, HEAD and OPTIONS
// are safe. So only POST and PATCH need a key.
func DefaultMethods() []string { return httpsem.DefaultMethods() }

// DefaultCacheable reports whether a handler's response with this status code is stored
// and replayed, unless [WithCacheable] says otherwise. Every status is, except:
//
//   - 5xx: the server failed, and a retry should run again;
//   - 409: a conflict that may resolve;
//   - 429: the client was told to come back later.
func DefaultCacheable(status int) bool { return httpsem.DefaultCacheable(status) }

// ErrNotCacheable tells the guard not to store a guarded HTTP handler's response.
// A response presents it when [WithCacheable] refuses to store it (by default 5xx, 409
// and 429). The guard then releases the key, and the next retry runs the handler again.
// The guard's hooks see the error; the client still gets the response. It wraps
// [idem.ErrDoNotStore]. So even a guard built with [idem.WithRememberFailures] never
// stores such a response.
var ErrNotCacheable = httpsem.ErrNotCacheable

// HTTPOption is a setting of how an HTTP request is guarded, whatever its event shape.
// [WithKeyRequired], [WithMethods], [WithCacheable] and [WithHeader] make one.
// Every HTTP decorator takes it; [Wrap] does not, so giving it one does not compile.
// A nil HTTPOption does nothing.
type HTTPOption func(*httpSettings) error

// httpSettings are the settings an [HTTPOption] changes.
type httpSettings = httpsem.Settings

// httpConfig is the configuration of an HTTP decorator whose events are In. An
// [HTTPOption] sets http, an [Option] of In sets event.
type httpConfig[In any] struct {
	http  httpsem.Settings
	event eventConfig[In]
}

// setHTTP applies o to s. A nil o does nothing, as a nil interface did when HTTPOption
// was an interface.
func setHTTP(o HTTPOption, s *httpsem.Settings) error {
	if o == nil {
		return nil
	}
	return o(s)
}

// WithKeyRequired sets whether a guarded request without an idempotency key is refused.
// Default true: the HTTP decorators answer 400. With false, such a request runs the
// handler unguarded, as the Powertools utilities do by default. Each such run:
//
//   - is reported through the guard's OnUnguarded hook;
//   - is logged at WARN through the guard's logger;
//   - gets [idem.ErrNoLease] from idem.Attach and idem.Checkpoint. A handler that attaches
//     its writes makes them itself when it gets that error.
//
// A key that is present but malformed is refused either way. For [Wrap], see [OptionalKey].
func WithKeyRequired(required bool) HTTPOption {
	return func(c *httpsem.Settings) error {
		c.KeyRequired = required
		return nil
	}
}

// WithMethods sets the HTTP methods that are guarded.
// Requests with other methods pass through to the handler untouched, whatever headers they
// carry. Default [DefaultMethods] (POST and PATCH). Names are matched case-insensitively
// and must be HTTP tokens. At least one is required.
func WithMethods(methods ...string) HTTPOption {
	return func(c *httpsem.Settings) error { return c.SetMethods(methods) }
}

// WithCacheable sets which handler responses are stored and replayed, by status code.
// A response it rejects goes to the client as it is. The key is released, so a retry runs
// the handler again. Default [DefaultCacheable]. Must not be nil.
func WithCacheable(cacheable func(status int) bool) HTTPOption {
	return func(c *httpsem.Settings) error { return c.SetCacheable(cacheable) }
}

// WithHeader sets the name of the request header that carries the idempotency key.
// It is matched case-insensitively. Default [DefaultHeader]. Must be a valid header name.
func WithHeader(name string) HTTPOption {
	return func(c *httpsem.Settings) error { return c.SetHeader(name) }
}
