package lambdawrap

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/httpsem"
)

// This file holds the four HTTP event shapes, one block each. A fifth shape is one more
// block, or one new file. testdata/newshape/lattice.go.txt is such a file, and
// TestNewShapeIsOneFile type-checks it with the package. A block holds:
//
//   - the decorator, which calls decorate with the shape and its option method;
//   - the option interface, XxxOption, with one unexported method over *httpConfig[Xxx];
//   - that method on HTTPOption and on Option[In], one line each: the adapter that puts
//     both option types in the decorator's one list;
//   - the shape: how the event and its response map to httpsem's, and the default tenant.
//
// Go allows one method per name on a type, so each shape needs a method name of its own.
// No other code changes: not options.go, httpoptions.go, http.go or wrap.go. The package
// documentation should name the new decorator, and its tests go in a file of their own.
// LocalHandler serves a new shape only if local.go learns it; that is optional.
// An event source that is not HTTP needs no change here: Wrap takes any event type.

// HTTPAPI makes an API Gateway HTTP API (payload format 2.0) handler idempotent.
// It has the semantics of the package documentation. Requests are scoped by the caller's
// JWT sub, Lambda authorizer principal, IAM identity or mutual TLS client certificate
// ([TenantHTTPAPI]). An authenticated request without any of them is refused (see
// [ErrUnknownCaller]), unless [WithTenant] says who the caller is.
//
// It takes [HTTPOption] values and the [Option] values of its event type. It logs and
// reports through the guard (see idem.WithLogger and idem.WithHooks). It returns an error
// if g or h is nil or an option is invalid. The returned handler is safe for concurrent
// use.
func HTTPAPI(g *idem.Guard, h func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), opts ...HTTPAPIOption) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	return decorate(g, h, httpAPIShape(), opts, HTTPAPIOption.applyHTTPAPI)
}

// HTTPAPIOption configures [HTTPAPI]: an [HTTPOption], or an [Option] for
// events.APIGatewayV2HTTPRequest.
type HTTPAPIOption interface {
	applyHTTPAPI(*httpConfig[events.APIGatewayV2HTTPRequest]) error
}

func (o HTTPOption) applyHTTPAPI(c *httpConfig[events.APIGatewayV2HTTPRequest]) error {
	return setHTTP(o, &c.http)
}

//lint:ignore U1000 called through HTTPAPIOption (dominikh/go-tools#1440)
func (o Option[In]) applyHTTPAPI(c *httpConfig[In]) error { return setEvent(o, &c.event) }

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

// REST makes an API Gateway REST API (Lambda proxy integration) handler idempotent.
// It has the semantics of the package documentation. Requests are scoped by the caller's
// authorizer principal, Cognito sub, IAM identity, mutual TLS client certificate or API key
// ([TenantREST]). An authenticated request without any of them is refused (see
// [ErrUnknownCaller]), unless [WithTenant] says who the caller is.
//
// It takes [HTTPOption] values and the [Option] values of its event type. It logs and
// reports through the guard. It returns an error if g or h is nil or an option is invalid.
// The returned handler is safe for concurrent use.
func REST(g *idem.Guard, h func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error), opts ...RESTOption) (func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error), error) {
	return decorate(g, h, restShape(), opts, RESTOption.applyREST)
}

// RESTOption configures [REST]: an [HTTPOption], or an [Option] for
// events.APIGatewayProxyRequest.
type RESTOption interface {
	applyREST(*httpConfig[events.APIGatewayProxyRequest]) error
}

func (o HTTPOption) applyREST(c *httpConfig[events.APIGatewayProxyRequest]) error {
	return setHTTP(o, &c.http)
}

//lint:ignore U1000 called through RESTOption (dominikh/go-tools#1440)
func (o Option[In]) applyREST(c *httpConfig[In]) error { return setEvent(o, &c.event) }

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

// FunctionURL makes a Lambda function URL handler (buffered invoke mode) idempotent.
// It has the semantics of the package documentation. Requests are scoped by the caller's
// IAM identity when the URL uses IAM auth ([TenantFunctionURL]). A request with an
// authorizer block but no caller is refused (see [ErrUnknownCaller]).
//
// It takes [HTTPOption] values and the [Option] values of its event type. It logs and
// reports through the guard. It returns an error if g or h is nil or an option is invalid.
// The returned handler is safe for concurrent use.
func FunctionURL(g *idem.Guard, h func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error), opts ...FunctionURLOption) (func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error), error) {
	return decorate(g, h, functionURLShape(), opts, FunctionURLOption.applyFunctionURL)
}

// FunctionURLOption configures [FunctionURL]: an [HTTPOption], or an [Option] for
// events.LambdaFunctionURLRequest.
type FunctionURLOption interface {
	applyFunctionURL(*httpConfig[events.LambdaFunctionURLRequest]) error
}

func (o HTTPOption) applyFunctionURL(c *httpConfig[events.LambdaFunctionURLRequest]) error {
	return setHTTP(o, &c.http)
}

//lint:ignore U1000 called through FunctionURLOption (dominikh/go-tools#1440)
func (o Option[In]) applyFunctionURL(c *httpConfig[In]) error { return setEvent(o, &c.event) }

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

// ALB makes an Application Load Balancer target group handler idempotent.
// It has the semantics of the package documentation, with or without multi-value headers.
// An ALB event carries no verified caller identity. So requests are not scoped by tenant,
// unless [WithTenant] says how. For example, the tenant may come from the
// x-amzn-oidc-identity header when the listener authenticates users.
//
// It takes [HTTPOption] values and the [Option] values of its event type. It logs and
// reports through the guard. It returns an error if g or h is nil or an option is invalid.
// The returned handler is safe for concurrent use.
func ALB(g *idem.Guard, h func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error), opts ...ALBOption) (func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error), error) {
	return decorate(g, h, albShape(), opts, ALBOption.applyALB)
}

// ALBOption configures [ALB]: an [HTTPOption], or an [Option] for
// events.ALBTargetGroupRequest.
type ALBOption interface {
	applyALB(*httpConfig[events.ALBTargetGroupRequest]) error
}

func (o HTTPOption) applyALB(c *httpConfig[events.ALBTargetGroupRequest]) error {
	return setHTTP(o, &c.http)
}

//lint:ignore U1000 called through ALBOption (dominikh/go-tools#1440)
func (o Option[In]) applyALB(c *httpConfig[In]) error { return setEvent(o, &c.event) }

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
