package idemhttp

import (
	"net/http"

	"github.com/idemkit/idem/internal/httpsem"
)

// Limits of the bodies the middleware holds in memory.
const (
	// DefaultMaxRequestBody is the largest request body read to fingerprint a guarded
	// request, in bytes (see [WithMaxRequestBody]): API Gateway's payload limit, as
	// lambdawrap's local adapter has it.
	DefaultMaxRequestBody = 10 << 20
	// DefaultMaxResponseBody is the largest response body held back until the outcome is
	// recorded, in bytes (see [WithMaxResponseBody]): Lambda's 6 MB response payload
	// limit, the largest response lambdawrap can answer with.
	DefaultMaxResponseBody = 6 << 20
)

// Option configures [Middleware]. Options are applied in order; an invalid one makes
// Middleware return an error naming it.
type Option func(*config) error

// config is the configuration of a middleware.
type config struct {
	http        httpsem.Settings
	tenant      func(*http.Request) string // nil: no tenant
	maxRequest  int64
	maxResponse int
}

// DefaultCacheable reports whether a handler's response with this status code is stored and
// replayed, unless [WithCacheable] says otherwise: every status except 5xx (the server
// failed; a retry should run again), 409 (a conflict that may resolve) and 429 (the client
// was told to come back later).
func DefaultCacheable(status int) bool { return httpsem.DefaultCacheable(status) }

// WithKeyRequired sets whether a guarded request without an idempotency key is refused.
// Default true: the middleware answers 400 [ProblemMissingKey]. With false, such a request
// runs the handler unguarded; each such run is reported through the guard's OnUnguarded
// hook (with an error wrapping idem.ErrMissingKey) and logged at WARN through the guard's
// logger, and in it idem.Attach and idem.Checkpoint return idem.ErrNoLease. A key that is
// present but malformed is refused either way.
func WithKeyRequired(required bool) Option {
	return func(c *config) error {
		c.http.KeyRequired = required
		return nil
	}
}

// WithMethods sets the HTTP methods that are guarded; requests with other methods pass
// through to the handler untouched, whatever headers they carry, and their bodies are not
// read. Default POST and PATCH: PUT and DELETE are idempotent by definition, and GET, HEAD
// and OPTIONS are safe. Names are matched case-insensitively and must be HTTP tokens; at
// least one is required.
func WithMethods(methods ...string) Option {
	return func(c *config) error { return c.http.SetMethods(methods) }
}

// WithCacheable sets which handler responses are stored and replayed, by status code.
// A response it rejects goes to the client as it is, and the key is released so a retry
// runs the handler again. Default [DefaultCacheable]; must not be nil.
func WithCacheable(cacheable func(status int) bool) Option {
	return func(c *config) error { return c.http.SetCacheable(cacheable) }
}

// WithHeader sets the name of the request header that carries the idempotency key; it is
// matched case-insensitively. Default "Idempotency-Key"; must be a valid header name.
func WithHeader(name string) Option {
	return func(c *config) error { return c.http.SetHeader(name) }
}

// WithTenant sets how the caller's identity is read from a request: the same key from two
// tenants is two separate records, so no tenant can ever be replayed another's response.
// Plain HTTP carries no verified identity, so there is no default: without WithTenant,
// keys are not scoped by caller, and two callers who send the same key share its record.
// Read the identity your authentication established (a verified JWT's subject put in the
// request's context by an earlier middleware, say), never a header the client can set
// freely. An empty tenant means the key is not scoped. tenant is called once per guarded
// request, after the body has been read, and must be safe for concurrent use; must not be
// nil.
func WithTenant(tenant func(r *http.Request) string) Option {
	return func(c *config) error {
		if tenant == nil {
			return c.http.OptionError("WithTenant", "must not be nil")
		}
		c.tenant = tenant
		return nil
	}
}

// WithMaxRequestBody sets the largest request body the middleware reads, in bytes, to
// fingerprint a guarded request (the body is then given back to the handler unchanged). A
// larger one is refused with 413 [ProblemRequestTooLarge] before the key is claimed, and
// the handler does not run. Default [DefaultMaxRequestBody]; must be positive.
func WithMaxRequestBody(n int64) Option {
	return func(c *config) error {
		if n <= 0 {
			return c.http.OptionError("WithMaxRequestBody", "must be positive")
		}
		c.maxRequest = n
		return nil
	}
}

// WithMaxResponseBody sets the largest response body the middleware holds back, in bytes,
// until the outcome is recorded. A handler that writes more has its response sent as it
// is written from then on, and the key is recorded as completed without the response (see
// the package documentation): the handler never runs again for the key, and a retry gets
// 500 [ProblemNotReplayable]. This limit bounds memory, not what is stored: whatever it
// is, a response is stored only if its encoding, compressed, fits the guard's
// idem.WithMaxResultSize (by default just under DynamoDB's 400 KB item limit), and a
// larger one is recorded without its body too, with the same answer to a retry. Default
// [DefaultMaxResponseBody]; must be positive.
func WithMaxResponseBody(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return c.http.OptionError("WithMaxResponseBody", "must be positive")
		}
		c.maxResponse = n
		return nil
	}
}
