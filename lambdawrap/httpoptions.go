package lambdawrap

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// Defaults of the HTTP options.
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

// HTTPOption is a setting of how an HTTP request is guarded, whatever its event shape:
// [WithKeyRequired], [WithMethods], [WithCacheable] and [WithHeader]. Every HTTP decorator
// takes it; [Wrap] does not, so giving it one does not compile.
type HTTPOption interface {
	HTTPAPIOption
	RESTOption
	FunctionURLOption
	ALBOption
}

// HTTPAPIOption configures [HTTPAPI]: an [HTTPOption], or an [Option] for
// events.APIGatewayV2HTTPRequest.
type HTTPAPIOption interface {
	applyHTTPAPI(*httpConfig[events.APIGatewayV2HTTPRequest]) error
}

// RESTOption configures [REST]: an [HTTPOption], or an [Option] for
// events.APIGatewayProxyRequest.
type RESTOption interface {
	applyREST(*httpConfig[events.APIGatewayProxyRequest]) error
}

// FunctionURLOption configures [FunctionURL]: an [HTTPOption], or an [Option] for
// events.LambdaFunctionURLRequest.
type FunctionURLOption interface {
	applyFunctionURL(*httpConfig[events.LambdaFunctionURLRequest]) error
}

// ALBOption configures [ALB]: an [HTTPOption], or an [Option] for
// events.ALBTargetGroupRequest.
type ALBOption interface {
	applyALB(*httpConfig[events.ALBTargetGroupRequest]) error
}

// httpConfig is the configuration of an HTTP decorator whose events are In.
type httpConfig[In any] struct {
	http  httpSettings
	event eventConfig[In]
}

// httpSettings are the settings that do not depend on the event shape.
type httpSettings struct {
	keyRequired bool
	methods     map[string]bool
	cacheable   func(int) bool
	header      string
}

func defaultHTTPSettings() httpSettings {
	return httpSettings{
		keyRequired: true,
		methods:     methodSet(DefaultMethods()),
		cacheable:   DefaultCacheable,
		header:      DefaultHeader,
	}
}

// httpOption is the one implementation of [HTTPOption].
type httpOption func(*httpSettings) error

func (o httpOption) applyHTTPAPI(c *httpConfig[events.APIGatewayV2HTTPRequest]) error {
	return o(&c.http)
}
func (o httpOption) applyREST(c *httpConfig[events.APIGatewayProxyRequest]) error { return o(&c.http) }
func (o httpOption) applyFunctionURL(c *httpConfig[events.LambdaFunctionURLRequest]) error {
	return o(&c.http)
}
func (o httpOption) applyALB(c *httpConfig[events.ALBTargetGroupRequest]) error { return o(&c.http) }

// WithKeyRequired sets whether a guarded request without an idempotency key is refused.
// Default true: the HTTP decorators answer 400. With false, such a request runs the
// handler unguarded, as the Powertools utilities do by default; each such run is reported
// through the guard's OnUnguarded hook and logged at WARN through the guard's logger, and
// in it idem.Attach and idem.Checkpoint return [idem.ErrNoLease], so a handler that
// attaches its writes makes them itself when it gets that error. A key that is present
// but malformed is refused either way. For [Wrap], see [OptionalKey].
func WithKeyRequired(required bool) HTTPOption {
	return httpOption(func(c *httpSettings) error {
		c.keyRequired = required
		return nil
	})
}

// WithMethods sets the HTTP methods that are guarded; requests with other methods pass
// through to the handler untouched, whatever headers they carry. Default [DefaultMethods]
// (POST and PATCH). Names are matched case-insensitively and must be HTTP tokens; at least
// one is required.
func WithMethods(methods ...string) HTTPOption {
	return httpOption(func(c *httpSettings) error {
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
		return nil
	})
}

// WithCacheable sets which handler responses are stored and replayed, by status code.
// A response it rejects goes to the client as it is, and the key is released so a retry
// runs the handler again. Default [DefaultCacheable]; must not be nil.
func WithCacheable(cacheable func(status int) bool) HTTPOption {
	return httpOption(func(c *httpSettings) error {
		if cacheable == nil {
			return optErr("WithCacheable", "must not be nil")
		}
		c.cacheable = cacheable
		return nil
	})
}

// WithHeader sets the name of the request header that carries the idempotency key; it is
// matched case-insensitively. Default [DefaultHeader]; must be a valid header name.
func WithHeader(name string) HTTPOption {
	return httpOption(func(c *httpSettings) error {
		if !isToken(name) {
			return optErr("WithHeader", fmt.Sprintf("%q is not a header name", name))
		}
		c.header = name
		return nil
	})
}

func methodSet(methods []string) map[string]bool {
	m := make(map[string]bool, len(methods))
	for _, s := range methods {
		m[strings.ToUpper(s)] = true
	}
	return m
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
