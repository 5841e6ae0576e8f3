package lambdawrap

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
)

// HTTPAPI makes an API Gateway HTTP API (payload format 2.0) handler idempotent, with the
// semantics of the package documentation. Requests are scoped by the caller's JWT sub, Lambda
// authorizer principal or IAM identity ([TenantHTTPAPI]). It returns an error if g or h is
// nil or an option is invalid. The returned handler is safe for concurrent use.
func HTTPAPI(g *idem.Guard, h func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), opts ...Option) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	return decorate(g, h, httpAPIShape(), opts)
}

// REST makes an API Gateway REST API (Lambda proxy integration) handler idempotent, with
// the semantics of the package documentation. Requests are scoped by the caller's authorizer
// principal, Cognito sub, IAM identity or API key ([TenantREST]). It returns an error if g
// or h is nil or an option is invalid. The returned handler is safe for concurrent use.
func REST(g *idem.Guard, h func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error), opts ...Option) (func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error), error) {
	return decorate(g, h, restShape(), opts)
}

// FunctionURL makes a Lambda function URL handler (buffered invoke mode) idempotent, with
// the semantics of the package documentation. Requests are scoped by the caller's IAM
// identity when the URL uses IAM auth ([TenantFunctionURL]). It returns an error if g or h
// is nil or an option is invalid. The returned handler is safe for concurrent use.
func FunctionURL(g *idem.Guard, h func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error), opts ...Option) (func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error), error) {
	return decorate(g, h, functionURLShape(), opts)
}

// ALB makes an Application Load Balancer target group handler idempotent, with the
// semantics of the package documentation, with or without multi-value headers. An ALB event
// carries no verified caller identity, so requests are not scoped by tenant unless
// [WithTenant] says how (for example from the x-amzn-oidc-identity header, when the listener
// authenticates users). It returns an error if g or h is nil or an option is invalid. The
// returned handler is safe for concurrent use.
func ALB(g *idem.Guard, h func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error), opts ...Option) (func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error), error) {
	return decorate(g, h, albShape(), opts)
}

func httpAPIShape() shape[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse] {
	return shape[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse]{
		name: "HTTPAPI",
		request: func(e *events.APIGatewayV2HTTPRequest) httpRequest {
			return v2Request(e.RequestContext.HTTP.Method, e.RawPath, e.RawQueryString, e.Headers, e.Body, e.IsBase64Encoded)
		},
		tenant: TenantHTTPAPI,
		toHTTP: func(r *events.APIGatewayV2HTTPResponse) httpResponse {
			return httpResponse{StatusCode: r.StatusCode, Headers: r.Headers, MultiValueHeaders: r.MultiValueHeaders,
				Cookies: r.Cookies, Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
		},
		fromHTTP: func(r *httpResponse) events.APIGatewayV2HTTPResponse {
			return events.APIGatewayV2HTTPResponse{StatusCode: r.StatusCode, Headers: r.Headers, MultiValueHeaders: r.MultiValueHeaders,
				Cookies: r.Cookies, Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
		},
	}
}

func restShape() shape[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse] {
	return shape[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse]{
		name: "REST",
		request: func(e *events.APIGatewayProxyRequest) httpRequest {
			return v1Request(e.HTTPMethod, e.Path, e.QueryStringParameters, e.MultiValueQueryStringParameters,
				e.Headers, e.MultiValueHeaders, e.Body, e.IsBase64Encoded)
		},
		tenant: TenantREST,
		toHTTP: func(r *events.APIGatewayProxyResponse) httpResponse {
			return httpResponse{StatusCode: r.StatusCode, Headers: r.Headers, MultiValueHeaders: r.MultiValueHeaders,
				Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
		},
		fromHTTP: func(r *httpResponse) events.APIGatewayProxyResponse {
			return events.APIGatewayProxyResponse{StatusCode: r.StatusCode, Headers: r.Headers, MultiValueHeaders: r.MultiValueHeaders,
				Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
		},
	}
}

func functionURLShape() shape[events.LambdaFunctionURLRequest, events.LambdaFunctionURLResponse] {
	return shape[events.LambdaFunctionURLRequest, events.LambdaFunctionURLResponse]{
		name: "FunctionURL",
		request: func(e *events.LambdaFunctionURLRequest) httpRequest {
			return v2Request(e.RequestContext.HTTP.Method, e.RawPath, e.RawQueryString, e.Headers, e.Body, e.IsBase64Encoded)
		},
		tenant: TenantFunctionURL,
		toHTTP: func(r *events.LambdaFunctionURLResponse) httpResponse {
			return httpResponse{StatusCode: r.StatusCode, Headers: r.Headers, Cookies: r.Cookies,
				Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
		},
		fromHTTP: func(r *httpResponse) events.LambdaFunctionURLResponse {
			return events.LambdaFunctionURLResponse{StatusCode: r.StatusCode, Headers: r.Headers, Cookies: r.Cookies,
				Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
		},
	}
}

func albShape() shape[events.ALBTargetGroupRequest, events.ALBTargetGroupResponse] {
	return shape[events.ALBTargetGroupRequest, events.ALBTargetGroupResponse]{
		name: "ALB",
		request: func(e *events.ALBTargetGroupRequest) httpRequest {
			r := v1Request(e.HTTPMethod, e.Path, e.QueryStringParameters, e.MultiValueQueryStringParameters,
				e.Headers, e.MultiValueHeaders, e.Body, e.IsBase64Encoded)
			// With multi-value headers on, the load balancer sends and reads only those.
			r.multiValue = e.MultiValueHeaders != nil
			return r
		},
		tenant: func(events.ALBTargetGroupRequest) string { return "" },
		toHTTP: func(r *events.ALBTargetGroupResponse) httpResponse {
			return httpResponse{StatusCode: r.StatusCode, StatusDescription: r.StatusDescription, Headers: r.Headers,
				MultiValueHeaders: r.MultiValueHeaders, Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
		},
		fromHTTP: func(r *httpResponse) events.ALBTargetGroupResponse {
			return events.ALBTargetGroupResponse{StatusCode: r.StatusCode, StatusDescription: r.StatusDescription, Headers: r.Headers,
				MultiValueHeaders: r.MultiValueHeaders, Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
		},
	}
}

// v1Request maps the fields of payload format 1.0 events (REST APIs, load balancers).
func v1Request(method, path string, query map[string]string, multiQuery map[string][]string,
	headers map[string]string, multiHeaders map[string][]string, body string, base64 bool) httpRequest {
	return httpRequest{method: method, path: path, query: query, multiQuery: multiQuery,
		headers: headers, multiHeaders: multiHeaders, body: body, base64: base64}
}

// v2Request maps the fields of payload format 2.0 events (HTTP APIs, function URLs).
func v2Request(method, rawPath, rawQuery string, headers map[string]string, body string, base64 bool) httpRequest {
	return httpRequest{method: method, path: rawPath, rawQuery: rawQuery,
		headers: headers, body: body, base64: base64}
}
