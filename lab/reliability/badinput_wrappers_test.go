package reliability_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/lambdawrap"
	"github.com/idemkit/idem/sqs"
)

// httpIn is one request, whatever the event shape; zero means the zero-value event.
type httpIn struct {
	zero    bool
	key     *string
	headers map[string]string
	body    string
	b64     bool
}

// httpShape builds an event of one wrapper from an httpIn and calls the wrapped handler.
type httpShape struct {
	name string
	call func(ctx context.Context, g *idem.Guard, runs *atomic.Int32, in httpIn) (status int, err error)
}

func headersOf(in httpIn) map[string]string {
	h := map[string]string{"content-type": "application/json"}
	for k, v := range in.headers {
		h[k] = v
	}
	if in.key != nil {
		h["idempotency-key"] = *in.key
	}
	return h
}

func httpShapes() []httpShape {
	ok := func(runs *atomic.Int32) (int, string) { runs.Add(1); return 201, `{"id":1}` }
	return []httpShape{
		{name: "HTTP API", call: func(ctx context.Context, g *idem.Guard, runs *atomic.Int32, in httpIn) (int, error) {
			h, err := lambdawrap.HTTPAPI(g, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				s, b := ok(runs)
				return events.APIGatewayV2HTTPResponse{StatusCode: s, Body: b}, nil
			})
			if err != nil {
				return 0, err
			}
			var e events.APIGatewayV2HTTPRequest
			if !in.zero {
				e = events.APIGatewayV2HTTPRequest{RawPath: "/orders", Headers: headersOf(in), Body: in.body, IsBase64Encoded: in.b64,
					RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/orders"}}}
			}
			r, err := h(ctx, e)
			return r.StatusCode, err
		}},
		{name: "REST", call: func(ctx context.Context, g *idem.Guard, runs *atomic.Int32, in httpIn) (int, error) {
			h, err := lambdawrap.REST(g, func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				s, b := ok(runs)
				return events.APIGatewayProxyResponse{StatusCode: s, Body: b}, nil
			})
			if err != nil {
				return 0, err
			}
			var e events.APIGatewayProxyRequest
			if !in.zero {
				e = events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/orders", Headers: headersOf(in), Body: in.body, IsBase64Encoded: in.b64}
			}
			r, err := h(ctx, e)
			return r.StatusCode, err
		}},
		{name: "function URL", call: func(ctx context.Context, g *idem.Guard, runs *atomic.Int32, in httpIn) (int, error) {
			h, err := lambdawrap.FunctionURL(g, func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
				s, b := ok(runs)
				return events.LambdaFunctionURLResponse{StatusCode: s, Body: b}, nil
			})
			if err != nil {
				return 0, err
			}
			var e events.LambdaFunctionURLRequest
			if !in.zero {
				e = events.LambdaFunctionURLRequest{RawPath: "/orders", Headers: headersOf(in), Body: in.body, IsBase64Encoded: in.b64,
					RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/orders"}}}
			}
			r, err := h(ctx, e)
			return r.StatusCode, err
		}},
		{name: "ALB", call: func(ctx context.Context, g *idem.Guard, runs *atomic.Int32, in httpIn) (int, error) {
			h, err := lambdawrap.ALB(g, func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
				s, b := ok(runs)
				return events.ALBTargetGroupResponse{StatusCode: s, Body: b}, nil
			})
			if err != nil {
				return 0, err
			}
			var e events.ALBTargetGroupRequest
			if !in.zero {
				e = events.ALBTargetGroupRequest{HTTPMethod: "POST", Path: "/orders", Headers: headersOf(in), Body: in.body, IsBase64Encoded: in.b64}
			}
			r, err := h(ctx, e)
			return r.StatusCode, err
		}},
	}
}

// TestBadInputHTTP sends each hostile request twice through each of the four HTTP
// wrappers on DynamoDB Local: refused requests get the same 4xx both times and never run.
func TestBadInputHTTP(t *testing.T) {
	t.Parallel()
	raw := ddblocal.Client(t)
	store := newStore(t, raw, ddblocal.NewTable(t, raw))
	key := func(s string) *string { return &s }
	tests := []struct {
		name   string
		in     httpIn
		status int   // of both calls
		runs   int32 // after both
	}{
		{name: "zero-value event", in: httpIn{zero: true}, status: 201, runs: 2}, // no method: not guarded, passed through
		{name: "no key", in: httpIn{body: `{}`}, status: 400},
		{name: "empty key", in: httpIn{key: key(""), body: `{}`}, status: 400},
		{name: "64 KB key", in: httpIn{key: key(strings.Repeat("k", 64<<10)), body: `{}`}, status: 400},
		{name: "NUL in key", in: httpIn{key: key("order\x00-1"), body: `{}`}, status: 400},
		{name: "invalid UTF-8 key", in: httpIn{key: key("order-\xff\xfe"), body: `{}`}, status: 400},
		{name: "unterminated quoted key", in: httpIn{key: key(`"order-1`), body: `{}`}, status: 400},
		{name: "invalid base64 body", in: httpIn{key: key("b64"), body: "!!!not base64!!!", b64: true}, status: 400},
		{name: "truncated JSON body", in: httpIn{key: key("truncated"), body: `{"amount": 12`}, status: 201, runs: 1},
		{name: "wrong JSON types", in: httpIn{key: key("types"), body: `{"amount": "twelve", "items": {}}`}, status: 201, runs: 1},
		{name: "NUL and invalid UTF-8 in body", in: httpIn{key: key("binary"), body: "a\x00b\xff"}, status: 201, runs: 1},
		{name: "1 MB header", in: httpIn{key: key("big-header"), headers: map[string]string{"x-filler": strings.Repeat("h", 1<<20)}, body: `{}`}, status: 201, runs: 1},
		{name: "6 MB body", in: httpIn{key: key("big-body"), body: `"` + strings.Repeat("b", 6<<20) + `"`}, status: 201, runs: 1},
	}
	for _, sh := range httpShapes() {
		for _, tc := range tests {
			t.Run(sh.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				g, err := idem.New(store, "test", idem.WithScope("bad-http-"+strings.ReplaceAll(sh.name, " ", "-")))
				require.NoError(t, err)
				var runs atomic.Int32
				for range 2 {
					status, err := sh.call(t.Context(), g, &runs, tc.in)
					require.NoError(t, err)
					assert.Equal(t, tc.status, status)
				}
				assert.Equal(t, tc.runs, runs.Load())
			})
		}
	}
}

// TestBadInputSQS sends malformed messages through the SQS wrapper on DynamoDB Local.
func TestBadInputSQS(t *testing.T) {
	t.Parallel()
	raw := ddblocal.Client(t)
	store := newStore(t, raw, ddblocal.NewTable(t, raw))
	const arn = "arn:aws:sqs:us-east-1:123456789012:q"
	withKey := func(id, k string) events.SQSMessage {
		return events.SQSMessage{MessageId: id, Body: "{}", EventSourceARN: arn,
			MessageAttributes: map[string]events.SQSMessageAttribute{"Idempotency-Key": {DataType: "String", StringValue: aws.String(k)}}}
	}
	tests := []struct {
		name    string
		event   events.SQSEvent
		wantErr bool     // the event as a whole is refused
		failed  []string // message IDs reported failed, both times
		runs    int32    // after both deliveries
	}{
		{name: "no records", event: events.SQSEvent{}},
		{name: "64 KB key", event: events.SQSEvent{Records: []events.SQSMessage{withKey("m1", strings.Repeat("k", 64<<10))}}, failed: []string{"m1"}},
		{name: "no key and no message id", event: events.SQSEvent{Records: []events.SQSMessage{{Body: "{}", EventSourceARN: arn}}}, wantErr: true},
		{name: "truncated JSON body", event: events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m2", Body: `{"amount_cents": 1`, EventSourceARN: arn}}}, runs: 1},
		{name: "NUL and invalid UTF-8 body", event: events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m3", Body: "\x00\xff", EventSourceARN: arn}}}, runs: 1},
		{name: "NUL in key", event: events.SQSEvent{Records: []events.SQSMessage{withKey("m4", "k\x00")}}, runs: 1},
		{name: "duplicate in one batch", event: events.SQSEvent{Records: []events.SQSMessage{withKey("m5", "dup"), withKey("m6", "dup")}}, runs: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := idem.New(store, "test", idem.WithScope("bad-sqs"))
			require.NoError(t, err)
			var runs atomic.Int32
			h, err := sqs.New(g, func(context.Context, events.SQSMessage) error { runs.Add(1); return nil })
			require.NoError(t, err)
			for range 2 {
				resp, err := h.Handle(t.Context(), tc.event)
				if tc.wantErr {
					require.ErrorIs(t, err, sqs.ErrInvalidEvent)
					continue
				}
				require.NoError(t, err)
				var failed []string
				for _, f := range resp.BatchItemFailures {
					failed = append(failed, f.ItemIdentifier)
				}
				assert.Equal(t, tc.failed, failed)
			}
			assert.Equal(t, tc.runs, runs.Load())
		})
	}
}
