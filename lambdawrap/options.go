package lambdawrap

import (
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"

	"github.com/idemkit/idem"
)

// Defaults of the options.
const (
	// DefaultHeader is the request header that carries the idempotency key (see [WithHeader]).
	DefaultHeader = "Idempotency-Key"
	// ReplayedHeader is added, with the value "true", to every replayed HTTP response.
	ReplayedHeader = "Idempotent-Replayed"
	// MaxKeyLength is the longest idempotency key an HTTP header may carry, in characters
	// (bytes: keys are printable ASCII).
	MaxKeyLength = 255
)

// DefaultMethods are the HTTP methods guarded unless [WithMethods] says otherwise. PUT and
// DELETE are idempotent by definition, and GET, HEAD and OPTIONS are safe, so only POST and
// PATCH need a key.
func DefaultMethods() []string { return []string{http.MethodPost, http.MethodPatch} }

// DefaultCacheable reports whether a handler's response with this status code is stored and
// replayed, unless [WithCacheable] says otherwise: every status except 5xx (the server
// failed; a retry should run again), 409 (a conflict that may resolve) and 429 (the client
// was told to come back later).
func DefaultCacheable(status int) bool {
	return status < 500 && status != http.StatusConflict && status != http.StatusTooManyRequests
}

// Option configures [Wrap] and the HTTP decorators ([HTTPAPI], [REST], [FunctionURL],
// [ALB]). Options are applied in order; a decorator given an invalid option returns an
// error naming it. Some options apply only to HTTP decorators, and [Wrap] refuses them.
type Option func(*config) error

type config struct {
	keyRequired bool
	methods     map[string]bool
	cacheable   func(int) bool
	header      string
	logger      *slog.Logger

	// tenant and fingerprint hold a func(In) string and a func(In) ([]byte, error) (or a
	// jmespathFingerprint) for the In of the decorator they are given to, which checks the
	// type when it is built.
	tenant      any
	fingerprint any

	httpOnly []string // names of the HTTP-only options given, which Wrap refuses
}

func newConfig(opts []Option) (*config, error) {
	c := &config{
		keyRequired: true,
		methods:     methodSet(DefaultMethods()),
		cacheable:   DefaultCacheable,
		header:      DefaultHeader,
		logger:      discardLogger(),
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func optErr(name, msg string) error {
	return fmt.Errorf("%w: lambdawrap: %s: %s", idem.ErrInvalidOption, name, msg)
}

func methodSet(methods []string) map[string]bool {
	m := make(map[string]bool, len(methods))
	for _, s := range methods {
		m[strings.ToUpper(s)] = true
	}
	return m
}

// WithKeyRequired sets whether a request without an idempotency key is refused. Default
// true: [Wrap] returns an error wrapping [idem.ErrMissingKey], and the HTTP decorators
// answer 400. With false, such a request runs the handler unguarded, as the Powertools
// utilities do by default. A key that is present but malformed is refused either way.
func WithKeyRequired(required bool) Option {
	return func(c *config) error {
		c.keyRequired = required
		return nil
	}
}

// WithMethods sets the HTTP methods that are guarded; requests with other methods pass
// through to the handler untouched, whatever headers they carry. Default [DefaultMethods]
// (POST and PATCH). Names are matched case-insensitively and must be HTTP tokens; at least
// one is required. HTTP decorators only.
func WithMethods(methods ...string) Option {
	return func(c *config) error {
		const name = "WithMethods"
		if len(methods) == 0 {
			return optErr(name, "must name at least one method")
		}
		for _, m := range methods {
			if !isToken(m) {
				return optErr(name, fmt.Sprintf("%q is not a method name", m))
			}
		}
		c.methods = methodSet(methods)
		c.httpOnly = append(c.httpOnly, name)
		return nil
	}
}

// WithCacheable sets which handler responses are stored and replayed, by status code.
// A response it rejects goes to the client as it is, and the key is released so a retry
// runs the handler again. Default [DefaultCacheable]; must not be nil. HTTP decorators only.
func WithCacheable(cacheable func(status int) bool) Option {
	return func(c *config) error {
		const name = "WithCacheable"
		if cacheable == nil {
			return optErr(name, "must not be nil")
		}
		c.cacheable = cacheable
		c.httpOnly = append(c.httpOnly, name)
		return nil
	}
}

// WithHeader sets the name of the request header that carries the idempotency key; it is
// matched case-insensitively. Default [DefaultHeader]; must be a valid header name. HTTP
// decorators only.
func WithHeader(name string) Option {
	return func(c *config) error {
		const opt = "WithHeader"
		if !isToken(name) {
			return optErr(opt, fmt.Sprintf("%q is not a header name", name))
		}
		c.header = name
		c.httpOnly = append(c.httpOnly, opt)
		return nil
	}
}

// WithLogger sets the logger for failures that a decorator answers instead of returning
// them to Lambda, which would log them: a handler that ran but whose outcome the store did
// not record (logged at ERROR: a retry after the lease ends may run it again), and, for the
// HTTP decorators, store failures (503), responses that cannot be replayed (500) and lost
// leases (409). The guard's own logger and hooks see more. Default: discard. Must not be
// nil.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return optErr("WithLogger", "must not be nil")
		}
		c.logger = l
		return nil
	}
}

// WithTenant sets how the caller's identity is read from the event. The same key from two
// tenants is two separate records, so no tenant can ever be replayed another's response;
// an empty tenant means the key is not scoped by caller. In must be the decorated
// handler's event type, or the decorator returns an error. Default: for the HTTP
// decorators, the identity the event carries (see the package documentation for the order
// in which it is looked up); for [Wrap], none. Must not be nil.
func WithTenant[In any](tenant func(In) string) Option {
	return func(c *config) error {
		if tenant == nil {
			return optErr("WithTenant", "must not be nil")
		}
		c.tenant = tenant
		return nil
	}
}

// WithFingerprint sets what identifies a request's content: a key reused with a different
// fingerprint is refused with [idem.ErrPayloadMismatch] (HTTP 422). An error from it refuses
// the request: [Wrap] returns it wrapped, the HTTP decorators answer 400. In must be the
// decorated handler's event type, or the decorator returns an error. Default: for the HTTP
// decorators, the method, path, query string and body, the body decoded from base64 when
// the event says so and canonicalised when it is JSON, so that key order and white space do
// not matter, except the order of keys equal under Unicode case folding (exact duplicates
// included): Go's decoder matches them to one struct field and the last one wins, so
// {"amount":1,"AMOUNT":100} and {"AMOUNT":100,"amount":1} are two requests. For [Wrap],
// none (payload validation off). Must not be nil.
func WithFingerprint[In any](fingerprint func(In) ([]byte, error)) Option {
	return func(c *config) error {
		if fingerprint == nil {
			return optErr("WithFingerprint", "must not be nil")
		}
		c.fingerprint = fingerprint
		return nil
	}
}

// WithFingerprintJMESPath sets the fingerprint to the part of the event that the JMESPath
// expression selects from the event's JSON, canonicalised, for parity with the Powertools
// utilities' payload validation. The Powertools functions powertools_json,
// powertools_base64 and powertools_base64_gzip are available (see [KeyFromJMESPath]).
// It replaces [WithFingerprint]. The expression must compile.
func WithFingerprintJMESPath(expr string) Option {
	return func(c *config) error {
		q, err := compileJMESPath(expr)
		if err != nil {
			return fmt.Errorf("%w: lambdawrap: WithFingerprintJMESPath: %w", idem.ErrInvalidOption, err)
		}
		c.fingerprint = q
		return nil
	}
}

// resolveTenant returns the configured tenant function for In, or def when none was set.
func resolveTenant[In any](c *config, def func(In) string) (func(In) string, error) {
	switch f := c.tenant.(type) {
	case nil:
		return def, nil
	case func(In) string:
		return f, nil
	default:
		return nil, typeErr("WithTenant", f, reflect.TypeFor[In]())
	}
}

// resolveFingerprint returns the configured fingerprint function for In, or def when none
// was set.
func resolveFingerprint[In any](c *config, def func(In) ([]byte, error)) (func(In) ([]byte, error), error) {
	switch f := c.fingerprint.(type) {
	case nil:
		return def, nil
	case func(In) ([]byte, error):
		return f, nil
	case *jmespathQuery:
		return func(in In) ([]byte, error) { return f.fingerprint(in) }, nil
	default:
		return nil, typeErr("WithFingerprint", f, reflect.TypeFor[In]())
	}
}

func typeErr(name string, f any, in reflect.Type) error {
	return optErr(name, fmt.Sprintf("takes %s, the handler takes %s", reflect.TypeOf(f).In(0), in))
}

// isToken reports whether s is a non-empty HTTP token (RFC 9110, section 5.6.2), as method
// and header names must be.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
