package lambdawrap

import (
	"context"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/httpsem"
)

// HTTPAPI makes an API Gateway HTTP API (payload format 2.0) handler idempotent, with the
// semantics of the package documentation. Requests are scoped by the caller's JWT sub, Lambda
// authorizer principal, IAM identity or mutual TLS client certificate ([TenantHTTPAPI]);
// an authenticated request without any of them is refused (see [ErrUnknownCaller]) unless
// [WithTenant] says who the caller is. It takes [HTTPOption] values and the [Option]
// values of its event type. It logs and reports through the guard (see idem.WithLogger
// and idem.WithHooks). It returns an error if g or h is nil or an option is invalid. The
// returned handler is safe for concurrent use.
func HTTPAPI(g *idem.Guard, h func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), opts ...HTTPAPIOption) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	return decorate(g, h, httpAPIShape(), opts, HTTPAPIOption.applyHTTPAPI)
}

// REST makes an API Gateway REST API (Lambda proxy integration) handler idempotent, with
// the semantics of the package documentation. Requests are scoped by the caller's authorizer
// principal, Cognito sub, IAM identity, mutual TLS client certificate or API key
// ([TenantREST]); an authenticated request without any of them is refused (see
// [ErrUnknownCaller]) unless [WithTenant] says who the caller is. It takes [HTTPOption]
// values and the [Option] values of its event type. It logs and reports through the
// guard. It returns an error if g or h is nil or an option is invalid. The returned
// handler is safe for concurrent use.
func REST(g *idem.Guard, h func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error), opts ...RESTOption) (func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error), error) {
	return decorate(g, h, restShape(), opts, RESTOption.applyREST)
}

// FunctionURL makes a Lambda function URL handler (buffered invoke mode) idempotent, with
// the semantics of the package documentation. Requests are scoped by the caller's IAM
// identity when the URL uses IAM auth ([TenantFunctionURL]); a request with an authorizer
// block but no caller is refused (see [ErrUnknownCaller]). It takes [HTTPOption] values
// and the [Option] values of its event type. It logs and reports through the guard. It
// returns an error if g or h is nil or an option is invalid. The returned handler is safe
// for concurrent use.
func FunctionURL(g *idem.Guard, h func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error), opts ...FunctionURLOption) (func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error), error) {
	return decorate(g, h, functionURLShape(), opts, FunctionURLOption.applyFunctionURL)
}

// ALB makes an Application Load Balancer target group handler idempotent, with the
// semantics of the package documentation, with or without multi-value headers. An ALB event
// carries no verified caller identity, so requests are not scoped by tenant unless
// [WithTenant] says how (for example from the x-amzn-oidc-identity header, when the listener
// authenticates users). It takes [HTTPOption] values and the [Option] values of its event
// type. It logs and reports through the guard. It returns an error if g or h is nil or an
// option is invalid. The returned handler is safe for concurrent use.
func ALB(g *idem.Guard, h func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error), opts ...ALBOption) (func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error), error) {
	return decorate(g, h, albShape(), opts, ALBOption.applyALB)
}

// shape converts one event type and its response type to and from the shared form.
type shape[In, Out any] struct {
	name     string
	request  func(*In) httpsem.Request
	tenant   func(In) (string, error) // the default: an error wraps ErrUnknownCaller
	toHTTP   func(*Out) httpsem.Response
	fromHTTP func(*httpsem.Response) Out
}

// httpWrapper adapts the handler of one event shape to the [httpsem.Guard].
type httpWrapper[In, Out any] struct {
	g           *idem.Guard
	guard       *httpsem.Guard
	h           func(context.Context, In) (Out, error)
	s           shape[In, Out]
	tenant      func(In) (string, error)
	fingerprint func(In) ([]byte, error) // nil: the request's default fingerprint
}

func decorate[In, Out, O any](g *idem.Guard, h func(context.Context, In) (Out, error), s shape[In, Out], opts []O,
	set func(O, *httpConfig[In]) error) (func(context.Context, In) (Out, error), error) {
	if g == nil || h == nil {
		return nil, optErr(s.name, "guard and handler must not be nil")
	}
	c := httpConfig[In]{http: httpsem.DefaultSettings(pkg)}
	if err := apply(&c, opts, set); err != nil {
		return nil, err
	}
	w := &httpWrapper[In, Out]{g: g, guard: httpsem.NewGuard(g, c.http), h: h, s: s, tenant: s.tenant, fingerprint: c.event.fingerprint}
	if t := c.event.tenant; t != nil {
		// The user's own reading of the caller: trusted, an empty tenant included.
		w.tenant = func(in In) (string, error) { return t(in), nil }
	}
	return w.handle, nil
}

// handle implements the semantics table of the package documentation.
func (w *httpWrapper[In, Out]) handle(ctx context.Context, in In) (Out, error) {
	req := w.s.request(&in)
	key, v, resp := w.guard.Admit(ctx, &req)
	if v == httpsem.Bypassed {
		return w.h(ctx, in)
	}
	if v == httpsem.Answered {
		return w.reply(resp)
	}
	tenant, err := w.tenant(in)
	if err != nil {
		return w.reply(w.unknownCaller(ctx, &req, err))
	}
	r := idem.Request{Key: key, Tenant: tenant}
	if w.fingerprint != nil {
		r.Fingerprint, err = w.fingerprint(in)
	} else {
		r.Fingerprint, err = req.Fingerprint()
	}
	var first Out // exactly what the handler returned
	v, resp, err = w.guard.Run(ctx, &req, r, err, func(ctx context.Context) (httpsem.Response, error) {
		out, err := w.h(ctx, in)
		if err != nil {
			return httpsem.Response{}, err
		}
		first = out
		return w.s.toHTTP(&out), nil
	})
	switch v {
	case httpsem.Ran:
		return first, nil
	case httpsem.Answered:
		return w.reply(resp)
	}
	var zero Out
	return zero, err
}

// unknownCaller refuses an authenticated request without a caller identity: scoped by the
// empty tenant, it would share its records with every other such caller, so that one
// could be replayed another's response. It is the function's configuration that is at
// fault, so the answer is 500 and the refusal is logged at ERROR and reported through the
// guard's OnUnguarded hook.
func (w *httpWrapper[In, Out]) unknownCaller(ctx context.Context, req *httpsem.Request, err error) httpsem.Response {
	w.g.Logger().ErrorContext(ctx, pkg+": refusing an authenticated request without a caller identity; scope requests with WithTenant", "error", err)
	if on := w.g.Hooks().OnUnguarded; on != nil {
		on(ctx, idem.Event{Err: err})
	}
	return w.guard.Problem(http.StatusInternalServerError, httpsem.ProblemUnknownCaller,
		"the request is authenticated, but the function finds no caller identity in it to scope its idempotency key by", 0, req.MultiValue)
}

// reply answers with r, converted to the event's response type.
func (w *httpWrapper[In, Out]) reply(r httpsem.Response) (Out, error) { return w.s.fromHTTP(&r), nil }

func httpAPIShape() shape[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse] {
	return shape[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse]{
		name: "HTTPAPI",
		request: func(e *events.APIGatewayV2HTTPRequest) httpsem.Request {
			return v2Request(e.RequestContext.HTTP.Method, e.RawPath, e.RawQueryString, e.Headers, e.Body, e.IsBase64Encoded)
		},
		tenant: callerHTTPAPI,
		toHTTP: func(r *events.APIGatewayV2HTTPResponse) httpsem.Response {
			return httpsem.Response{StatusCode: r.StatusCode, Headers: r.Headers, MultiValueHeaders: r.MultiValueHeaders,
				Cookies: r.Cookies, Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
		},
		fromHTTP: func(r *httpsem.Response) events.APIGatewayV2HTTPResponse {
			return events.APIGatewayV2HTTPResponse{StatusCode: r.StatusCode, Headers: r.Headers, MultiValueHeaders: r.MultiValueHeaders,
				Cookies: r.Cookies, Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
		},
	}
}

func restShape() shape[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse] {
	return shape[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse]{
		name: "REST",
		request: func(e *events.APIGatewayProxyRequest) httpsem.Request {
			return v1Request(e.HTTPMethod, e.Path, e.QueryStringParameters, e.MultiValueQueryStringParameters,
				e.Headers, e.MultiValueHeaders, e.Body, e.IsBase64Encoded)
		},
		tenant: callerREST,
		toHTTP: func(r *events.APIGatewayProxyResponse) httpsem.Response {
			return httpsem.Response{StatusCode: r.StatusCode, Headers: r.Headers, MultiValueHeaders: r.MultiValueHeaders,
				Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
		},
		fromHTTP: func(r *httpsem.Response) events.APIGatewayProxyResponse {
			return events.APIGatewayProxyResponse{StatusCode: r.StatusCode, Headers: r.Headers, MultiValueHeaders: r.MultiValueHeaders,
				Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
		},
	}
}

func functionURLShape() shape[events.LambdaFunctionURLRequest, events.LambdaFunctionURLResponse] {
	return shape[events.LambdaFunctionURLRequest, events.LambdaFunctionURLResponse]{
		name: "FunctionURL",
		request: func(e *events.LambdaFunctionURLRequest) httpsem.Request {
			return v2Request(e.RequestContext.HTTP.Method, e.RawPath, e.RawQueryString, e.Headers, e.Body, e.IsBase64Encoded)
		},
		tenant: callerFunctionURL,
		toHTTP: func(r *events.LambdaFunctionURLResponse) httpsem.Response {
			return httpsem.Response{StatusCode: r.StatusCode, Headers: r.Headers, Cookies: r.Cookies,
				Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
		},
		fromHTTP: func(r *httpsem.Response) events.LambdaFunctionURLResponse {
			return events.LambdaFunctionURLResponse{StatusCode: r.StatusCode, Headers: r.Headers, Cookies: r.Cookies,
				Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
		},
	}
}

func albShape() shape[events.ALBTargetGroupRequest, events.ALBTargetGroupResponse] {
	return shape[events.ALBTargetGroupRequest, events.ALBTargetGroupResponse]{
		name: "ALB",
		request: func(e *events.ALBTargetGroupRequest) httpsem.Request {
			r := v1Request(e.HTTPMethod, e.Path, e.QueryStringParameters, e.MultiValueQueryStringParameters,
				e.Headers, e.MultiValueHeaders, e.Body, e.IsBase64Encoded)
			// With multi-value headers on, the load balancer sends and reads only those.
			r.MultiValue = e.MultiValueHeaders != nil
			return r
		},
		tenant: func(events.ALBTargetGroupRequest) (string, error) { return "", nil },
		toHTTP: func(r *events.ALBTargetGroupResponse) httpsem.Response {
			return httpsem.Response{StatusCode: r.StatusCode, StatusDescription: r.StatusDescription, Headers: r.Headers,
				MultiValueHeaders: r.MultiValueHeaders, Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
		},
		fromHTTP: func(r *httpsem.Response) events.ALBTargetGroupResponse {
			return events.ALBTargetGroupResponse{StatusCode: r.StatusCode, StatusDescription: r.StatusDescription, Headers: r.Headers,
				MultiValueHeaders: r.MultiValueHeaders, Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
		},
	}
}

// v1Request maps the fields of payload format 1.0 events (REST APIs, load balancers).
func v1Request(method, path string, query map[string]string, multiQuery map[string][]string,
	headers map[string]string, multiHeaders map[string][]string, body string, base64 bool) httpsem.Request {
	return httpsem.Request{Method: method, Path: path, Query: query, MultiQuery: multiQuery,
		Headers: headers, MultiHeaders: multiHeaders, Body: body, Base64: base64}
}

// v2Request maps the fields of payload format 2.0 events (HTTP APIs, function URLs).
func v2Request(method, rawPath, rawQuery string, headers map[string]string, body string, base64 bool) httpsem.Request {
	return httpsem.Request{Method: method, Path: rawPath, RawQuery: rawQuery,
		Headers: headers, Body: body, Base64: base64}
}
