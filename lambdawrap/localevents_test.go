package lambdawrap_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/lambdawrap"
)

// TestLocalHandlerEvent checks the event the adapter builds for an HTTP API function, as
// API Gateway would.
func TestLocalHandlerEvent(t *testing.T) {
	t.Parallel()
	var (
		got      events.APIGatewayV2HTTPRequest
		deadline time.Duration
		lc       *lambdacontext.LambdaContext
	)
	srv := httptest.NewServer(lambdawrap.LocalHandler(func(ctx context.Context, e events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		got = e
		dl, _ := ctx.Deadline()
		deadline = time.Until(dl)
		lc, _ = lambdacontext.FromContext(ctx)
		return events.APIGatewayV2HTTPResponse{StatusCode: 204, MultiValueHeaders: map[string][]string{"X-Multi": {"a", "b"}}}, nil
	}))
	t.Cleanup(srv.Close)

	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/a%20b/c?x=1&x=2&y=z", strings.NewReader(`{"a":1}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "ev-1")
	req.Header.Add("X-Repeated", "one")
	req.Header.Add("X-Repeated", "two")
	req.AddCookie(&http.Cookie{Name: "theme", Value: "dark"})
	req.AddCookie(&http.Cookie{Name: "cart", Value: "c1"})
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, []string{"a", "b"}, resp.Header.Values("X-Multi"))
	assert.Empty(t, resp.Header.Get("Content-Type"), "no sniffed content type")

	assert.Equal(t, "2.0", got.Version)
	assert.Equal(t, "/a%20b/c", got.RawPath)
	assert.Equal(t, "x=1&x=2&y=z", got.RawQueryString)
	assert.Equal(t, map[string]string{"x": "1,2", "y": "z"}, got.QueryStringParameters)
	assert.Equal(t, []string{"theme=dark", "cart=c1"}, got.Cookies)
	assert.Equal(t, "ev-1", got.Headers["idempotency-key"])
	assert.Equal(t, "one,two", got.Headers["x-repeated"])
	assert.Equal(t, "application/json", got.Headers["content-type"])
	assert.NotContains(t, got.Headers, "cookie")
	assert.Equal(t, strings.TrimPrefix(srv.URL, "http://"), got.Headers["host"])
	for k := range got.Headers {
		assert.Equal(t, strings.ToLower(k), k)
	}
	assert.Equal(t, `{"a":1}`, got.Body)
	assert.False(t, got.IsBase64Encoded)
	assert.Equal(t, http.MethodPost, got.RequestContext.HTTP.Method)
	assert.Equal(t, "/a b/c", got.RequestContext.HTTP.Path)
	assert.Equal(t, "127.0.0.1", got.RequestContext.HTTP.SourceIP)
	assert.Equal(t, "HTTP/1.1", got.RequestContext.HTTP.Protocol)
	assert.NotEmpty(t, got.RequestContext.RequestID)
	require.NotNil(t, lc)
	assert.Equal(t, got.RequestContext.RequestID, lc.AwsRequestID)
	assert.InDelta(t, lambdawrap.LocalTimeout.Seconds(), deadline.Seconds(), 5)
}

// localRequest sends the request the event tests look at.
func localRequest(t *testing.T, url string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url+"/a%20b/c?x=1&x=2&y=z%21", strings.NewReader(`{"a":1}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "ev-1")
	req.Header.Add("X-Repeated", "one")
	req.Header.Add("X-Repeated", "two")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
}

// TestLocalHandlerRESTEvent checks the event the adapter builds for a REST API function,
// as a proxy integration on a {proxy+} resource sends it.
func TestLocalHandlerRESTEvent(t *testing.T) {
	t.Parallel()
	var (
		got      events.APIGatewayProxyRequest
		deadline time.Duration
		lc       *lambdacontext.LambdaContext
	)
	srv := httptest.NewServer(lambdawrap.LocalHandler(func(ctx context.Context, e events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		got = e
		dl, _ := ctx.Deadline()
		deadline = time.Until(dl)
		lc, _ = lambdacontext.FromContext(ctx)
		return events.APIGatewayProxyResponse{StatusCode: http.StatusAccepted}, nil
	}))
	t.Cleanup(srv.Close)
	localRequest(t, srv.URL)

	assert.Equal(t, http.MethodPost, got.HTTPMethod)
	assert.Equal(t, "/a b/c", got.Path)
	assert.Equal(t, "/{proxy+}", got.Resource)
	assert.Equal(t, map[string]string{"proxy": "a b/c"}, got.PathParameters)
	assert.Equal(t, map[string]string{"x": "2", "y": "z!"}, got.QueryStringParameters)
	assert.Equal(t, map[string][]string{"x": {"1", "2"}, "y": {"z!"}}, got.MultiValueQueryStringParameters)
	assert.Equal(t, "ev-1", got.Headers["Idempotency-Key"])
	assert.Equal(t, "two", got.Headers["X-Repeated"], "the last value")
	assert.Equal(t, []string{"one", "two"}, got.MultiValueHeaders["X-Repeated"])
	assert.Equal(t, strings.TrimPrefix(srv.URL, "http://"), got.Headers["Host"])
	assert.Equal(t, `{"a":1}`, got.Body)
	assert.False(t, got.IsBase64Encoded)
	assert.Equal(t, http.MethodPost, got.RequestContext.HTTPMethod)
	assert.Equal(t, "/{proxy+}", got.RequestContext.ResourcePath)
	assert.Equal(t, "127.0.0.1", got.RequestContext.Identity.SourceIP)
	assert.NotEmpty(t, got.RequestContext.RequestID)
	require.NotNil(t, lc)
	assert.Equal(t, got.RequestContext.RequestID, lc.AwsRequestID)
	assert.InDelta(t, lambdawrap.LocalTimeout.Seconds(), deadline.Seconds(), 5)
}

// TestLocalHandlerALBEvent checks the event the adapter builds for a load balancer target,
// as a target group without multi-value headers sends it: lower-case header names, the
// last of repeated values, and the query string as it was sent.
func TestLocalHandlerALBEvent(t *testing.T) {
	t.Parallel()
	var got events.ALBTargetGroupRequest
	srv := httptest.NewServer(lambdawrap.LocalHandler(func(_ context.Context, e events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		got = e
		return events.ALBTargetGroupResponse{StatusCode: http.StatusAccepted}, nil
	}))
	t.Cleanup(srv.Close)
	localRequest(t, srv.URL)

	assert.Equal(t, http.MethodPost, got.HTTPMethod)
	assert.Equal(t, "/a%20b/c", got.Path)
	assert.Equal(t, map[string]string{"x": "2", "y": "z%21"}, got.QueryStringParameters)
	assert.Nil(t, got.MultiValueHeaders)
	assert.Equal(t, "ev-1", got.Headers["idempotency-key"])
	assert.Equal(t, "two", got.Headers["x-repeated"])
	for k := range got.Headers {
		assert.Equal(t, strings.ToLower(k), k)
	}
	assert.Equal(t, `{"a":1}`, got.Body)
	assert.False(t, got.IsBase64Encoded)
	assert.NotEmpty(t, got.RequestContext.ELB.TargetGroupArn)
}

// TestLocalHandlerFailures: a failing function gets each integration's own answer.
func TestLocalHandlerFailures(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name    string
		h       http.Handler
		status  int
		body    string
		content string
	}{
		{name: "HTTP API", status: 500, body: `{"message":"Internal Server Error"}`, content: "application/json",
			h: lambdawrap.LocalHandler(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				return events.APIGatewayV2HTTPResponse{}, boom
			})},
		{name: "REST", status: 502, body: `{"message": "Internal server error"}`, content: "application/json",
			h: lambdawrap.LocalHandler(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				return events.APIGatewayProxyResponse{}, boom
			})},
		{name: "REST without a status", status: 502, body: `{"message": "Internal server error"}`, content: "application/json",
			h: lambdawrap.LocalHandler(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				return events.APIGatewayProxyResponse{Body: "ok"}, nil
			})},
		{name: "ALB", status: 502, body: albBadGateway, content: "text/html",
			h: lambdawrap.LocalHandler(func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
				return events.ALBTargetGroupResponse{}, boom
			})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(tc.h)
			t.Cleanup(srv.Close)
			resp, body := do(t, http.MethodPost, srv.URL+"/", "", "application/json", []byte(`{}`))
			assert.Equal(t, tc.status, resp.StatusCode)
			assert.Equal(t, tc.content, resp.Header.Get("Content-Type"))
			assert.Equal(t, tc.body, string(body))
		})
	}
}

// albBadGateway is the page a load balancer answers when its Lambda target fails.
const albBadGateway = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n"
