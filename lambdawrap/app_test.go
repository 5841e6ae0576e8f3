package lambdawrap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/lambdawrap"
)

// app is a deterministic handler for all four shapes. Its response says which run made it,
// so a replay is told apart from a second run.
type app struct {
	runs    atomic.Int64
	status  atomic.Int64  // response status; 0 means 201
	fail    atomic.Bool   // return an error instead of a response
	started chan struct{} // when non-nil, each run announces itself on it
	release chan struct{} // when non-nil, held runs wait for it (or for their context)
	hold    int64         // the runs held: the first hold runs, or all when 0
	// checkpoint makes each run record a checkpoint before answering, and return the
	// error of a failed one, as a handler that checkpoints its progress does.
	checkpoint bool
}

var errHandler = errors.New("app: handler failed")

// result is what every shape's response is built from.
type result struct {
	status int
	body   string
	b64    bool
	run    int64
}

func (a *app) serve(ctx context.Context, path, body string, b64 bool) (result, error) {
	n := a.runs.Add(1)
	if a.started != nil {
		a.started <- struct{}{}
	}
	if a.release != nil && (a.hold == 0 || n <= a.hold) {
		select {
		case <-a.release:
		case <-ctx.Done():
			return result{}, ctx.Err()
		}
	}
	if a.fail.Load() {
		return result{}, errHandler
	}
	if a.checkpoint {
		if err := idem.Checkpoint(ctx, "charged"); err != nil {
			return result{}, err
		}
	}
	status := int(a.status.Load())
	if status == 0 {
		status = 201
	}
	if b64 {
		// Binary in, binary out: echo the upload so base64 replays are exercised.
		return result{status: status, body: body, b64: true, run: n}, nil
	}
	return result{status: status, body: fmt.Sprintf(`{"order":"ord-%04d","path":%q}`, n, path), run: n}, nil
}

func (r result) headers() map[string]string {
	ct := "application/json"
	if r.b64 {
		ct = "application/octet-stream"
	}
	return map[string]string{"Content-Type": ct, "Location": fmt.Sprintf("/orders/ord-%04d", r.run), "X-Run": fmt.Sprint(r.run)}
}

func (a *app) httpAPI(ctx context.Context, e events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	r, err := a.serve(ctx, e.RawPath, e.Body, e.IsBase64Encoded)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: r.status, Headers: r.headers(), Body: r.body, IsBase64Encoded: r.b64,
		Cookies: []string{fmt.Sprintf("session=s%d; HttpOnly; Secure", r.run)}}, nil
}

func (a *app) rest(ctx context.Context, e events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	r, err := a.serve(ctx, e.Path, e.Body, e.IsBase64Encoded)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	return events.APIGatewayProxyResponse{StatusCode: r.status, Headers: r.headers(), Body: r.body, IsBase64Encoded: r.b64,
		MultiValueHeaders: map[string][]string{"Set-Cookie": {"a=1; Path=/", "b=2; Path=/"}}}, nil
}

func (a *app) functionURL(ctx context.Context, e events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	r, err := a.serve(ctx, e.RawPath, e.Body, e.IsBase64Encoded)
	if err != nil {
		return events.LambdaFunctionURLResponse{}, err
	}
	return events.LambdaFunctionURLResponse{StatusCode: r.status, Headers: r.headers(), Body: r.body, IsBase64Encoded: r.b64,
		Cookies: []string{"session=fu; Secure"}}, nil
}

func (a *app) alb(ctx context.Context, e events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
	r, err := a.serve(ctx, e.Path, e.Body, e.IsBase64Encoded)
	if err != nil {
		return events.ALBTargetGroupResponse{}, err
	}
	resp := events.ALBTargetGroupResponse{StatusCode: r.status, StatusDescription: fmt.Sprintf("%d Created", r.status),
		Body: r.body, IsBase64Encoded: r.b64}
	if e.MultiValueHeaders != nil {
		// With multi-value headers on, the load balancer reads only multiValueHeaders.
		resp.MultiValueHeaders = map[string][]string{}
		for k, v := range r.headers() {
			resp.MultiValueHeaders[k] = []string{v}
		}
	} else {
		resp.Headers = r.headers()
	}
	return resp, nil
}

// invoker runs a decorated handler through lambda.NewHandler(h).Invoke, as the Lambda
// runtime does. aws-lambda-go v1.54.0 returns Invoke's output in a pooled buffer that the
// handler's next Invoke overwrites (aws/aws-lambda-go#639), so each call gets its own
// lambda.Handler, and the output is copied.
type invoker struct{ h any }

func (i invoker) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	out, err := lambda.NewHandler(i.h).Invoke(ctx, payload)
	return bytes.Clone(out), err
}

// handler decorates the app for kind k and returns it as the Lambda runtime would run it.
// ALB requests are scoped by albTenant.
func (a *app) handler(t testing.TB, k kind, g *idem.Guard, opts ...lambdawrap.HTTPOption) lambda.Handler {
	t.Helper()
	var (
		h   any
		err error
	)
	switch k {
	case kindREST:
		h, err = lambdawrap.REST(g, a.rest, asOptions[lambdawrap.RESTOption](opts)...)
	case kindHTTPAPI:
		h, err = lambdawrap.HTTPAPI(g, a.httpAPI, asOptions[lambdawrap.HTTPAPIOption](opts)...)
	case kindFunctionURL:
		h, err = lambdawrap.FunctionURL(g, a.functionURL, asOptions[lambdawrap.FunctionURLOption](opts)...)
	case kindALB:
		h, err = lambdawrap.ALB(g, a.alb, append([]lambdawrap.ALBOption{lambdawrap.WithTenant(albTenant)},
			asOptions[lambdawrap.ALBOption](opts)...)...)
	}
	require.NoError(t, err)
	return invoker{h: h}
}

// asOptions converts HTTP options, which every HTTP decorator takes, to the option type of
// one decorator, for a variadic call.
func asOptions[O any](opts []lambdawrap.HTTPOption) []O {
	out := make([]O, len(opts))
	for i, o := range opts {
		out[i] = any(o).(O) // an HTTPOption is every decorator's option
	}
	return out
}

// logRecords collects what a slog.Logger writes, as JSON objects.
type logRecords struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logRecords) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logRecords) logger() *slog.Logger { return slog.New(slog.NewJSONHandler(l, nil)) }

// levels returns the level of every record written.
func (l *logRecords) levels(t testing.TB) []string {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	d := json.NewDecoder(bytes.NewReader(l.buf.Bytes()))
	for d.More() {
		var rec map[string]any
		require.NoError(t, d.Decode(&rec))
		out = append(out, fmt.Sprint(rec[slog.LevelKey]))
	}
	return out
}
