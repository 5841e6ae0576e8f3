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

// DefaultMethods are the HTTP methods guarded unless [WithMethods] says otherwise. PUT and
// DELETE are idempotent by definition, and GET, HEAD and OPTIONS are safe, so only POST and
// PATCH need a key.
func DefaultMethods() []string { return httpsem.DefaultMethods() }

// DefaultCacheable reports whether a handler's response with this status code is stored and
// replayed, unless [WithCacheable] says otherwise: every status except 5xx (the server
// failed; a retry should run again), 409 (a conflict that may resolve) and 429 (the client
// was told to come back later).
func DefaultCacheable(status int) bool { return httpsem.DefaultCacheable(status) }

// ErrNotCacheable is the error a guarded HTTP handler's response presents to the guard when
// [WithCacheable] refuses to store it (by default 5xx, 409 and 429), so the guard releases
// the key and the next retry runs the handler again; the guard's hooks see it. The client
// still gets the response. It wraps [idem.ErrDoNotStore], so even a guard built with
// [idem.WithRememberFailures] never stores such a response.
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

// setHTTP applies o to s. A nil o does nothing, as a nil interface did before HTTPOption
// was a function type.
func setHTTP(o HTTPOption, s *httpsem.Settings) error {
	if o == nil {
		return nil
	}
	return o(s)
}

// WithKeyRequired sets whether a guarded request without an idempotency key is refused.
// Default true: the HTTP decorators answer 400. With false, such a request runs the
// handler unguarded, as the Powertools utilities do by default; each such run is reported
// through the guard's OnUnguarded hook and logged at WARN through the guard's logger, and
// in it idem.Attach and idem.Checkpoint return [idem.ErrNoLease], so a handler that
// attaches its writes makes them itself when it gets that error. A key that is present
// but malformed is refused either way. For [Wrap], see [OptionalKey].
func WithKeyRequired(required bool) HTTPOption {
	return func(c *httpsem.Settings) error {
		c.KeyRequired = required
		return nil
	}
}

// WithMethods sets the HTTP methods that are guarded; requests with other methods pass
// through to the handler untouched, whatever headers they carry. Default [DefaultMethods]
// (POST and PATCH). Names are matched case-insensitively and must be HTTP tokens; at least
// one is required.
func WithMethods(methods ...string) HTTPOption {
	return func(c *httpsem.Settings) error { return c.SetMethods(methods) }
}

// WithCacheable sets which handler responses are stored and replayed, by status code.
// A response it rejects goes to the client as it is, and the key is released so a retry
// runs the handler again. Default [DefaultCacheable]; must not be nil.
func WithCacheable(cacheable func(status int) bool) HTTPOption {
	return func(c *httpsem.Settings) error { return c.SetCacheable(cacheable) }
}

// WithHeader sets the name of the request header that carries the idempotency key; it is
// matched case-insensitively. Default [DefaultHeader]; must be a valid header name.
func WithHeader(name string) HTTPOption {
	return func(c *httpsem.Settings) error { return c.SetHeader(name) }
}
