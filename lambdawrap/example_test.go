package lambdawrap_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/lambdawrap"
	"github.com/idemkit/idem/memstore"
)

// ordersAPI has an HTTP API handler that is not idempotent on its own: every call creates a
// new order.
type ordersAPI struct{ created int }

func (o *ordersAPI) createOrder(_ context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	o.created++
	return events.APIGatewayV2HTTPResponse{
		StatusCode: http.StatusCreated,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       fmt.Sprintf(`{"order_id":"ord-%d"}`, o.created),
	}, nil
}

// orderRequest is a POST /orders event; an empty key means no Idempotency-Key header.
func orderRequest(key, body string) events.APIGatewayV2HTTPRequest {
	headers := map[string]string{"content-type": "application/json"}
	if key != "" {
		headers["idempotency-key"] = key
	}
	return events.APIGatewayV2HTTPRequest{
		RawPath: "/orders",
		Headers: headers,
		Body:    body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPost, Path: "/orders"},
		},
	}
}

func newExampleGuard() *idem.Guard {
	guard, err := idem.New(memstore.New(), "create-order", idem.WithScope("orders-api"))
	if err != nil {
		panic(err)
	}
	return guard
}

// A retried POST gets the first response back, marked as a replay; the order is created
// once. In a function, the decorated handler goes to lambda.Start.
func Example() {
	api := &ordersAPI{}
	handler, err := lambdawrap.HTTPAPI(newExampleGuard(), api.createOrder)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 2 {
		resp, _ := handler(ctx, orderRequest("5f0c-checkout-1", `{"sku":"MUG-7"}`))
		fmt.Println(resp.StatusCode, resp.Body, "replayed:", resp.Headers[lambdawrap.ReplayedHeader] == "true")
	}
	resp, _ := handler(ctx, orderRequest("5f0c-checkout-1", `{"sku":"TEA-1"}`))
	fmt.Println(resp.StatusCode, resp.Headers["Content-Type"])
	fmt.Println("orders created:", api.created)
	// Output:
	// 201 {"order_id":"ord-1"} replayed: false
	// 201 {"order_id":"ord-1"} replayed: true
	// 422 application/problem+json
	// orders created: 1
}

// In a function, the guard keeps its records in DynamoDB and the decorated handler goes to
// lambda.Start. (This example needs AWS, so it only compiles.)
func Example_lambdaStart() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		panic(err)
	}
	store, err := dynamo.New(dynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
	if err != nil {
		panic(err)
	}
	guard, err := idem.New(store, "create-order")
	if err != nil {
		panic(err)
	}
	api := &ordersAPI{}
	handler, err := lambdawrap.HTTPAPI(guard, api.createOrder)
	if err != nil {
		panic(err)
	}
	lambda.Start(handler)
}

// Any handler can be made idempotent with a key function; a duplicate delivery gets the
// stored result.
func ExampleWrap() {
	type transfer struct {
		TransferID string `json:"transfer_id"`
		Cents      int    `json:"cents"`
	}
	runs := 0
	apply := func(_ context.Context, t transfer) (string, error) {
		runs++
		return fmt.Sprintf("applied %s (%d cents)", t.TransferID, t.Cents), nil
	}
	handler, err := lambdawrap.Wrap(newExampleGuard(), apply,
		func(t transfer) (string, error) { return t.TransferID, nil })
	if err != nil {
		panic(err)
	}
	for range 2 {
		out, err := handler(context.Background(), transfer{TransferID: "tr-9", Cents: 500})
		fmt.Println(out, err)
	}
	fmt.Println("runs:", runs)
	// Output:
	// applied tr-9 (500 cents) <nil>
	// applied tr-9 (500 cents) <nil>
	// runs: 1
}

// The key can come from the event's JSON, with the expressions the Powertools utilities
// use: here a field of an SQS message's JSON body.
func ExampleKeyFromJMESPath() {
	key, err := lambdawrap.KeyFromJMESPath[events.SQSMessage]("powertools_json(body).[customer_id, payment_id]")
	if err != nil {
		panic(err)
	}
	k, err := key(events.SQSMessage{Body: `{"customer_id":"c-7","payment_id":"p-42","amount":100}`})
	fmt.Println(k, err)
	// Output: ["c-7","p-42"] <nil>
}

// REST APIs (Lambda proxy integration) take the same decorator; the key is scoped by the
// authorizer's principal.
func ExampleREST() {
	runs := 0
	handler, err := lambdawrap.REST(newExampleGuard(), func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		runs++
		return events.APIGatewayProxyResponse{StatusCode: http.StatusAccepted, Body: "queued"}, nil
	})
	if err != nil {
		panic(err)
	}
	req := events.APIGatewayProxyRequest{
		HTTPMethod:        http.MethodPost,
		Path:              "/jobs",
		MultiValueHeaders: map[string][]string{"Idempotency-Key": {"job-1"}},
		RequestContext: events.APIGatewayProxyRequestContext{
			Authorizer: map[string]any{"principalId": "user-1"},
		},
	}
	for _, principal := range []string{"user-1", "user-1", "user-2"} {
		req.RequestContext.Authorizer["principalId"] = principal
		resp, _ := handler(context.Background(), req)
		fmt.Println(principal, resp.StatusCode, resp.Headers[lambdawrap.ReplayedHeader] == "true")
	}
	fmt.Println("runs:", runs)
	// Output:
	// user-1 202 false
	// user-1 202 true
	// user-2 202 false
	// runs: 2
}

// A function URL handler is decorated the same way.
func ExampleFunctionURL() {
	handler, err := lambdawrap.FunctionURL(newExampleGuard(), func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		return events.LambdaFunctionURLResponse{StatusCode: http.StatusOK, Body: "done"}, nil
	})
	if err != nil {
		panic(err)
	}
	req := events.LambdaFunctionURLRequest{
		RawPath: "/webhook",
		Headers: map[string]string{"idempotency-key": `"evt_1"`}, // a structured-field string
		RequestContext: events.LambdaFunctionURLRequestContext{
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: http.MethodPost},
		},
	}
	for range 2 {
		resp, _ := handler(context.Background(), req)
		fmt.Println(resp.StatusCode, resp.Body, "replayed:", resp.Headers[lambdawrap.ReplayedHeader] == "true")
	}
	// Output:
	// 200 done replayed: false
	// 200 done replayed: true
}

// A load balancer with multi-value headers on reads only MultiValueHeaders, so answers go
// there.
func ExampleALB() {
	handler, err := lambdawrap.ALB(newExampleGuard(), func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		return events.ALBTargetGroupResponse{StatusCode: http.StatusOK}, nil
	})
	if err != nil {
		panic(err)
	}
	resp, _ := handler(context.Background(), events.ALBTargetGroupRequest{
		HTTPMethod:        http.MethodPost,
		Path:              "/orders",
		MultiValueHeaders: map[string][]string{"idempotency-key": {"a", "b"}},
	})
	fmt.Println(resp.StatusCode, resp.MultiValueHeaders["Content-Type"], resp.Headers == nil)
	// Output: 400 [application/problem+json] true
}

// HTTPAPI answers a duplicate in flight with 409 and Retry-After, and bad keys with 400;
// the errors are RFC 9457 problem details.
func ExampleHTTPAPI() {
	api := &ordersAPI{}
	handler, err := lambdawrap.HTTPAPI(newExampleGuard(), api.createOrder)
	if err != nil {
		panic(err)
	}
	resp, _ := handler(context.Background(), orderRequest(strings.Repeat("k", 256), `{}`))
	var problem map[string]any
	_ = json.Unmarshal([]byte(resp.Body), &problem)
	fmt.Println(resp.StatusCode, resp.Headers["Content-Type"])
	fmt.Println(problem["type"])
	fmt.Println(problem["detail"])
	// Output:
	// 400 application/problem+json
	// https://pkg.go.dev/github.com/idemkit/idem/lambdawrap#ProblemInvalidKey
	// the idempotency key is longer than 255 characters
}

// The local adapter serves an HTTP API handler over plain HTTP, for development and tests.
func ExampleLocalHandler() {
	api := &ordersAPI{}
	handler, err := lambdawrap.HTTPAPI(newExampleGuard(), api.createOrder)
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(lambdawrap.LocalHandler(handler))
	defer srv.Close()
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{"sku":"MUG-7"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "b7e1-checkout")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body), "replayed:", resp.Header.Get("Idempotent-Replayed") == "true")
	}
	// Output:
	// 201 {"order_id":"ord-1"} replayed: false
	// 201 {"order_id":"ord-1"} replayed: true
}

// A REST API function (or a load balancer's) runs locally the same way: the adapter sends
// it the event its integration would.
func ExampleLocalHandler_rest() {
	runs := 0
	handler, err := lambdawrap.REST(newExampleGuard(), func(_ context.Context, e events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		runs++
		return events.APIGatewayProxyResponse{StatusCode: http.StatusAccepted, Body: e.HTTPMethod + " " + e.Path}, nil
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(lambdawrap.LocalHandler(handler))
	defer srv.Close()
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/jobs", strings.NewReader(`{"job":"resize"}`))
		req.Header.Set("Idempotency-Key", "job-7")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body), "replayed:", resp.Header.Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("runs:", runs)
	// Output:
	// 202 POST /jobs replayed: false
	// 202 POST /jobs replayed: true
	// runs: 1
}

// Without a required key, requests that carry none run unguarded.
func ExampleWithKeyRequired() {
	api := &ordersAPI{}
	handler, _ := lambdawrap.HTTPAPI(newExampleGuard(), api.createOrder, lambdawrap.WithKeyRequired(false))
	for range 2 {
		resp, _ := handler(context.Background(), orderRequest("", `{}`))
		fmt.Println(resp.StatusCode, resp.Body)
	}
	// Output:
	// 201 {"order_id":"ord-1"}
	// 201 {"order_id":"ord-2"}
}

// PUT is idempotent by definition, but an API whose PUT creates resources may guard it too.
func ExampleWithMethods() {
	api := &ordersAPI{}
	handler, _ := lambdawrap.HTTPAPI(newExampleGuard(), api.createOrder, lambdawrap.WithMethods("POST", "PUT"))
	req := orderRequest("put-1", `{}`)
	req.RequestContext.HTTP.Method = http.MethodPut
	for range 2 {
		resp, _ := handler(context.Background(), req)
		fmt.Println(resp.Body, "replayed:", resp.Headers[lambdawrap.ReplayedHeader] == "true")
	}
	// Output:
	// {"order_id":"ord-1"} replayed: false
	// {"order_id":"ord-1"} replayed: true
}

// Store only successes: a 4xx answer is then retried too.
func ExampleWithCacheable() {
	runs := 0
	reject := func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs++
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusBadRequest}, nil
	}
	handler, _ := lambdawrap.HTTPAPI(newExampleGuard(), reject,
		lambdawrap.WithCacheable(func(status int) bool { return status < 400 }))
	for range 2 {
		resp, _ := handler(context.Background(), orderRequest("k-400", `{}`))
		fmt.Println(resp.StatusCode, resp.Headers[lambdawrap.ReplayedHeader] == "true")
	}
	fmt.Println("runs:", runs)
	// Output:
	// 400 false
	// 400 false
	// runs: 2
}

// An API that already used another header name keeps it.
func ExampleWithHeader() {
	api := &ordersAPI{}
	handler, _ := lambdawrap.HTTPAPI(newExampleGuard(), api.createOrder, lambdawrap.WithHeader("X-Request-Id"))
	resp, _ := handler(context.Background(), orderRequest("ignored", `{}`))
	fmt.Println(resp.StatusCode)
	// Output: 400
}

// Scope keys by a tenant the event carries in a way the defaults do not know, here a
// header that an authenticating load balancer sets.
func ExampleWithTenant() {
	runs := 0
	h := func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		runs++
		return events.ALBTargetGroupResponse{StatusCode: http.StatusOK}, nil
	}
	handler, _ := lambdawrap.ALB(newExampleGuard(), h, lambdawrap.WithTenant(func(e events.ALBTargetGroupRequest) string {
		return e.Headers["x-amzn-oidc-identity"]
	}))
	for _, user := range []string{"alice", "bob", "alice"} {
		_, _ = handler(context.Background(), events.ALBTargetGroupRequest{
			HTTPMethod: http.MethodPost,
			Headers:    map[string]string{"idempotency-key": "k-1", "x-amzn-oidc-identity": user},
		})
	}
	fmt.Println("runs:", runs)
	// Output: runs: 2
}

// An HTTP API Lambda authorizer with simple responses passes the user in its context, under
// a name of its own: the decorator cannot tell its callers apart, so it refuses their
// requests (500 ProblemUnknownCaller) rather than let one be replayed another's response,
// until WithTenant says who the caller is.
func ExampleWithTenant_lambdaAuthorizer() {
	userID := func(e events.APIGatewayV2HTTPRequest) string {
		if a := e.RequestContext.Authorizer; a != nil {
			if id, _ := a.Lambda["userId"].(string); id != "" {
				return "user:" + id
			}
		}
		return ""
	}
	as := func(user string) events.APIGatewayV2HTTPRequest {
		e := orderRequest("k-1", `{"sku":"MUG-7"}`)
		e.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			Lambda: map[string]any{"userId": user},
		}
		return e
	}
	api := &ordersAPI{}
	refusing, _ := lambdawrap.HTTPAPI(newExampleGuard(), api.createOrder)
	resp, _ := refusing(context.Background(), as("alice"))
	fmt.Println("default:", resp.StatusCode)

	guard, createOrder := newExampleGuard(), api.createOrder
	handler, err := lambdawrap.HTTPAPI(guard, createOrder, lambdawrap.WithTenant(userID))
	if err != nil {
		panic(err)
	}
	for _, user := range []string{"alice", "bob", "alice"} {
		resp, _ := handler(context.Background(), as(user))
		fmt.Println(user+":", resp.StatusCode, resp.Body, "replayed:", resp.Headers[lambdawrap.ReplayedHeader] == "true")
	}
	// Output:
	// default: 500
	// alice: 201 {"order_id":"ord-1"} replayed: false
	// bob: 201 {"order_id":"ord-2"} replayed: false
	// alice: 201 {"order_id":"ord-1"} replayed: true
}

// Fingerprint only what matters: here the reused key with a different "note" is still the
// same request.
func ExampleWithFingerprint() {
	api := &ordersAPI{}
	handler, _ := lambdawrap.HTTPAPI(newExampleGuard(), api.createOrder,
		lambdawrap.WithFingerprint(func(e events.APIGatewayV2HTTPRequest) ([]byte, error) {
			var body struct {
				SKU string `json:"sku"`
			}
			err := json.Unmarshal([]byte(e.Body), &body)
			return []byte(body.SKU), err
		}))
	for _, body := range []string{`{"sku":"A","note":"x"}`, `{"sku":"A","note":"y"}`, `{"sku":"B"}`} {
		resp, _ := handler(context.Background(), orderRequest("fp-1", body))
		fmt.Println(resp.StatusCode)
	}
	// Output:
	// 201
	// 201
	// 422
}

// Payload validation for any event, as the Powertools utilities' payload_validation_jmespath.
func ExampleWithFingerprintJMESPath() {
	type charge struct {
		ID     string `json:"id"`
		Amount int    `json:"amount"`
	}
	handler, _ := lambdawrap.Wrap(newExampleGuard(),
		func(_ context.Context, c charge) (string, error) { return "charged " + c.ID, nil },
		func(c charge) (string, error) { return c.ID, nil },
		lambdawrap.WithFingerprintJMESPath[charge]("amount"))
	_, err := handler(context.Background(), charge{ID: "ch-1", Amount: 100})
	fmt.Println(err)
	_, err = handler(context.Background(), charge{ID: "ch-1", Amount: 200})
	fmt.Println(err)
	// Output:
	// <nil>
	// idem: idempotency key reused with a different request
}

// The decorators log through the guard's logger: store failures become 503 answers,
// which Lambda does not log, so the guard's logger records them; and every refused
// request gets one INFO line with its stored key (never the raw key) and the reason.
func Example_logging() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	guard, _ := idem.New(failingStore{}, "create-order", idem.WithLogger(logger))
	api := &ordersAPI{}
	handler, _ := lambdawrap.HTTPAPI(guard, api.createOrder)
	resp, _ := handler(context.Background(), orderRequest("k-1", `{}`))
	fmt.Println(resp.StatusCode, resp.Headers["Retry-After"])
	// Output:
	// level=ERROR msg="lambdawrap: idempotency store failed" error="idem: store: claim: store: connection refused"
	// level=INFO msg="lambdawrap: request refused" stored_key=default.create-order#2ec7010d70b2bb6b7f9017995206a4d0277254a42d84e5207b735e5ef9368fc3 reason=store status=503
	// 503 1
}

// An optional key lets events without one run unguarded, as the Powertools utilities do
// by default. Each such run is reported through the guard's OnUnguarded hook (and logged
// at WARN), so a key that is never found does not go unnoticed.
func ExampleOptionalKey() {
	type webhook struct {
		DeliveryID string `json:"delivery_id"`
	}
	key, err := lambdawrap.KeyFromJMESPath[webhook]("delivery_id")
	if err != nil {
		panic(err)
	}
	guard, err := idem.New(memstore.New(), "webhook", idem.WithHooks(idem.Hooks{
		OnUnguarded: func(_ context.Context, e idem.Event) {
			fmt.Println("unguarded:", errors.Is(e.Err, idem.ErrMissingKey))
		},
	}))
	if err != nil {
		panic(err)
	}
	runs := 0
	handle := func(context.Context, webhook) (int, error) { runs++; return runs, nil }
	handler, err := lambdawrap.Wrap(guard, handle, lambdawrap.OptionalKey(key))
	if err != nil {
		panic(err)
	}
	for _, delivery := range []string{"d-1", "d-1", "", ""} {
		run, err := handler(context.Background(), webhook{DeliveryID: delivery})
		fmt.Println(run, err)
	}
	// Output:
	// 1 <nil>
	// 1 <nil>
	// unguarded: true
	// 2 <nil>
	// unguarded: true
	// 3 <nil>
}

// An Option reads the event, so its type names the event, and a decorator takes only the
// options of its own event type: handing ALB a tenant function of API Gateway events, or
// Wrap an HTTPOption such as WithMethods, does not compile. HTTP options go to any HTTP
// decorator.
func ExampleOption() {
	tenant := func(e events.ALBTargetGroupRequest) string { return e.Headers["x-amzn-oidc-identity"] }
	handler, err := lambdawrap.ALB(newExampleGuard(),
		func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
			return events.ALBTargetGroupResponse{StatusCode: http.StatusCreated}, nil
		},
		lambdawrap.WithTenant(tenant),              // an Option[events.ALBTargetGroupRequest]
		lambdawrap.WithMethods(http.MethodPut),     // an HTTPOption
		lambdawrap.WithHeader("X-Idempotency-Key"), // an HTTPOption
	)
	// lambdawrap.ALB(guard, h, lambdawrap.WithTenant(lambdawrap.TenantREST)) does not compile:
	// Option[events.APIGatewayProxyRequest] does not implement ALBOption.
	fmt.Println(err)
	resp, _ := handler(context.Background(), events.ALBTargetGroupRequest{
		HTTPMethod: http.MethodPut,
		Headers:    map[string]string{"x-idempotency-key": "k-1", "x-amzn-oidc-identity": "alice"},
	})
	fmt.Println(resp.StatusCode)
	// Output:
	// <nil>
	// 201
}

func ExampleTenantHTTPAPI() {
	e := events.APIGatewayV2HTTPRequest{RequestContext: events.APIGatewayV2HTTPRequestContext{
		Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "u-123"}},
		},
	}}
	fmt.Println(lambdawrap.TenantHTTPAPI(e))
	// Output: sub:u-123
}
