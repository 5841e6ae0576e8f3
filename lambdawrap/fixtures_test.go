package lambdawrap_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/lambdawrap"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the current output")

// kind is one of the four event shapes.
type kind int

const (
	kindREST kind = iota
	kindHTTPAPI
	kindFunctionURL
	kindALB
)

// kindOf tells a fixture's event shape from its name, <source>-<case>.json.
func kindOf(t testing.TB, name string) kind {
	t.Helper()
	switch {
	case strings.HasPrefix(name, "apigw-rest-"):
		return kindREST
	case strings.HasPrefix(name, "apigw-v2-"):
		return kindHTTPAPI
	case strings.HasPrefix(name, "function-url-"):
		return kindFunctionURL
	case strings.HasPrefix(name, "alb-"):
		return kindALB
	}
	t.Fatalf("fixture %s: unknown source", name)
	return 0
}

// fixtures lists the event fixtures (not the golden files) in testdata.
func fixtures(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	require.NoError(t, err)
	var names []string
	for _, p := range paths {
		if !strings.HasSuffix(p, ".golden.json") {
			names = append(names, strings.TrimSuffix(filepath.Base(p), ".json"))
		}
	}
	require.NotEmpty(t, names)
	return names
}

// event is a fixture decoded as generic JSON, so tests can edit it as API Gateway, a
// function URL or a load balancer would have sent it.
type event struct {
	kind kind
	m    map[string]any
}

func loadEvent(t testing.TB, name string) *event {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	require.NoError(t, err)
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	require.NoError(t, d.Decode(&m))
	return &event{kind: kindOf(t, name), m: m}
}

func (e *event) payload(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(e.m)
	require.NoError(t, err)
	return b
}

// obj returns the object at path, creating it (and replacing a null) as needed.
func (e *event) obj(path ...string) map[string]any {
	m := e.m
	for _, p := range path {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	return m
}

// multiValueMode reports whether the event carries headers in multiValueHeaders only, as a
// load balancer with multi-value headers on sends them.
func (e *event) multiValueMode() bool {
	_, hasSingle := e.m["headers"].(map[string]any)
	return e.kind == kindALB && !hasSingle
}

func (e *event) setMethod(method string) {
	if e.kind == kindHTTPAPI || e.kind == kindFunctionURL {
		e.obj("requestContext", "http")["method"] = method
		return
	}
	e.m["httpMethod"] = method
}

// removeHeader deletes every spelling of name from the header maps.
func (e *event) removeHeader(name string) {
	for _, field := range []string{"headers", "multiValueHeaders"} {
		if m, ok := e.m[field].(map[string]any); ok {
			for k := range m {
				if strings.EqualFold(k, name) {
					delete(m, k)
				}
			}
		}
	}
}

// setHeader replaces header name (spelled as given) with values, as each source delivers
// a repeated header: HTTP APIs and function URLs join them with commas, REST APIs fill
// both maps (the single one with the last value), and a load balancer keeps the last value
// unless multi-value headers are on.
func (e *event) setHeader(name string, values ...string) {
	e.removeHeader(name)
	if len(values) == 0 {
		return
	}
	last := values[len(values)-1]
	switch {
	case e.kind == kindHTTPAPI || e.kind == kindFunctionURL:
		e.obj("headers")[name] = strings.Join(values, ",")
	case e.kind == kindREST:
		e.obj("headers")[name] = last
		e.obj("multiValueHeaders")[name] = values
	case e.multiValueMode():
		e.obj("multiValueHeaders")[name] = values
	default:
		e.obj("headers")[name] = last
	}
}

func (e *event) setKey(values ...string) { e.setHeader("Idempotency-Key", values...) }

func (e *event) setBody(body string, base64Encoded bool) {
	e.m["body"] = body
	e.m["isBase64Encoded"] = base64Encoded
}

// setTenant makes the event carry caller identity id, where each source carries it.
func (e *event) setTenant(id string) {
	switch e.kind {
	case kindREST:
		e.obj("requestContext")["authorizer"] = map[string]any{"principalId": id}
	case kindHTTPAPI:
		e.obj("requestContext")["authorizer"] = map[string]any{"jwt": map[string]any{"claims": map[string]any{"sub": id}}}
	case kindFunctionURL:
		e.obj("requestContext", "authorizer", "iam")["userArn"] = "arn:aws:iam::111122223333:user/" + id
	case kindALB:
		e.setHeader(oidcIdentityHeader, id)
	}
}

// oidcIdentityHeader carries the user a load balancer authenticated; the tests scope ALB
// requests by it through WithTenant.
const oidcIdentityHeader = "x-amzn-oidc-identity"

func albTenant(e events.ALBTargetGroupRequest) string {
	for k, v := range e.Headers {
		if strings.EqualFold(k, oidcIdentityHeader) {
			return "oidc:" + v
		}
	}
	for k, vs := range e.MultiValueHeaders {
		if strings.EqualFold(k, oidcIdentityHeader) && len(vs) > 0 {
			return "oidc:" + vs[0]
		}
	}
	return ""
}

// defaultTenant is the tenant the decorator for e derives by default (for ALB, the tests'
// WithTenant).
func (e *event) defaultTenant(t testing.TB) string {
	t.Helper()
	b := e.payload(t)
	switch e.kind {
	case kindREST:
		var ev events.APIGatewayProxyRequest
		require.NoError(t, json.Unmarshal(b, &ev))
		return lambdawrap.TenantREST(ev)
	case kindHTTPAPI:
		var ev events.APIGatewayV2HTTPRequest
		require.NoError(t, json.Unmarshal(b, &ev))
		return lambdawrap.TenantHTTPAPI(ev)
	case kindFunctionURL:
		var ev events.LambdaFunctionURLRequest
		require.NoError(t, json.Unmarshal(b, &ev))
		return lambdawrap.TenantFunctionURL(ev)
	default:
		var ev events.ALBTargetGroupRequest
		require.NoError(t, json.Unmarshal(b, &ev))
		return albTenant(ev)
	}
}

// response is a decoded Lambda response of any shape.
type response struct {
	raw  []byte
	err  error
	m    map[string]any
	code int
}

func invoke(ctx context.Context, t testing.TB, h lambda.Handler, e *event) response {
	t.Helper()
	out, err := h.Invoke(ctx, e.payload(t))
	if err != nil {
		return response{err: err}
	}
	return decodeResponse(t, out)
}

func decodeResponse(t testing.TB, out []byte) response {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(out, &m), "response %s", out)
	code, _ := m["statusCode"].(float64)
	return response{raw: out, m: m, code: int(code)}
}

// header returns the response header name from whichever map holds it.
func (r response) header(name string) string {
	if h, ok := r.m["headers"].(map[string]any); ok {
		for k, v := range h {
			if strings.EqualFold(k, name) {
				return v.(string)
			}
		}
	}
	if h, ok := r.m["multiValueHeaders"].(map[string]any); ok {
		for k, v := range h {
			if vs, _ := v.([]any); strings.EqualFold(k, name) && len(vs) > 0 {
				return vs[0].(string)
			}
		}
	}
	return ""
}

// body returns the response body, decoded from base64 when flagged.
func (r response) body(t testing.TB) string {
	t.Helper()
	s, _ := r.m["body"].(string)
	if b, _ := r.m["isBase64Encoded"].(bool); b {
		d, err := base64.StdEncoding.DecodeString(s)
		require.NoError(t, err)
		return string(d)
	}
	return s
}

// problem decodes an RFC 9457 body.
func (r response) problem(t testing.TB) map[string]any {
	t.Helper()
	var p map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.body(t)), &p), "body %q", r.body(t))
	return p
}

// withoutReplayHeader returns the response minus the replay header, to compare a replay
// with the first response.
func (r response) withoutReplayHeader() map[string]any {
	b, _ := json.Marshal(r.m)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, field := range []string{"headers", "multiValueHeaders"} {
		if h, ok := m[field].(map[string]any); ok {
			delete(h, lambdawrap.ReplayedHeader)
		}
	}
	return m
}
