package lambdawrap_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/lambdawrap"
)

func gzipBase64(t *testing.T, s string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func TestKeyFromJMESPath(t *testing.T) {
	t.Parallel()
	event := json.RawMessage(`{
		"order_id": "o-17",
		"customer": {"id": 12345678901234567890, "tier": "gold"},
		"lines": [{"sku": "A"}, {"sku": "B"}],
		"empty": "",
		"body": "{\"payment_id\":\"pay-5\",\"amount\":10}",
		"b64": "` + base64.StdEncoding.EncodeToString([]byte(`{"id":"b-1"}`)) + `",
		"gz": "` + gzipBase64(t, `{"id":"g-1"}`) + `"
	}`)
	tests := []struct {
		expr string
		want string
	}{
		{expr: "order_id", want: "o-17"},
		{expr: "customer.id", want: "12345678901234567890"},
		{expr: "[order_id, customer.tier]", want: `["o-17","gold"]`},
		{expr: "customer", want: `{"id":12345678901234567890,"tier":"gold"}`},
		{expr: "lines[*].sku", want: `["A","B"]`},
		{expr: "powertools_json(body).payment_id", want: "pay-5"},
		{expr: "powertools_json(body).[payment_id, amount]", want: `["pay-5",10]`},
		{expr: "powertools_json(powertools_base64(b64)).id", want: "b-1"},
		{expr: "powertools_json(powertools_base64_gzip(gz)).id", want: "g-1"},
		{expr: "missing", want: ""},
		{expr: "empty", want: ""},
		{expr: "[missing, nothing]", want: ""},
		{expr: "powertools_json(`\"{}\"`)", want: ""},
		{expr: "`[]`", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			t.Parallel()
			key, err := lambdawrap.KeyFromJMESPath[json.RawMessage](tc.expr)
			require.NoError(t, err)
			got, err := key(event)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestKeyFromJMESPathErrors(t *testing.T) {
	t.Parallel()
	_, err := lambdawrap.KeyFromJMESPath[events.SQSMessage]("body[")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lambdawrap: KeyFromJMESPath: ")

	key, err := lambdawrap.KeyFromJMESPath[events.SQSMessage]("powertools_json(body).id")
	require.NoError(t, err)
	_, err = key(events.SQSMessage{Body: "not json"})
	require.Error(t, err, "a body that is not JSON")
	got, err := key(events.SQSMessage{Body: `{"id":"m-1"}`})
	require.NoError(t, err)
	assert.Equal(t, "m-1", got)

	b64, err := lambdawrap.KeyFromJMESPath[events.SQSMessage]("powertools_base64(body)")
	require.NoError(t, err)
	_, err = b64(events.SQSMessage{Body: "*"})
	require.Error(t, err)
}

// unencodable is an event whose JSON encoding fails with errUnencodable.
type unencodable struct{}

var errUnencodable = errors.New("app: cannot encode SECRET-body")

func (unencodable) MarshalJSON() ([]byte, error) { return nil, errUnencodable }

// TestJMESPathErrorsPrintNoValue: an expression that fails over an event fails with an
// error naming the expression and the kind of failure only, never the value it failed on
// (go-jmespath's own errors print the argument a function refused: the body, the raw key
// in it), while a typed cause stays reachable through errors.Is and errors.As.
func TestJMESPathErrorsPrintNoValue(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-4242"
	for _, tc := range []struct {
		name  string
		expr  string
		event any
		check func(t *testing.T, err error) // the cause that must stay reachable
	}{
		{name: "argument of the wrong type", expr: "powertools_json(body).id",
			event: map[string]any{"body": map[string]any{"id": secret}}},
		{name: "number function on a string", expr: "abs(id)", event: map[string]any{"id": secret}},
		{name: "powertools_json on no JSON", expr: "powertools_json(body).id", event: map[string]any{"body": "{" + secret},
			check: func(t *testing.T, err error) {
				var syntax *json.SyntaxError
				assert.ErrorAs(t, err, &syntax)
			}},
		{name: "powertools_base64 on no base64", expr: "powertools_base64(body)", event: map[string]any{"body": secret + "*"},
			check: func(t *testing.T, err error) {
				var corrupt base64.CorruptInputError
				assert.ErrorAs(t, err, &corrupt)
			}},
		{name: "powertools_base64_gzip on no gzip", expr: "powertools_base64_gzip(body)",
			event: map[string]any{"body": base64.StdEncoding.EncodeToString([]byte(secret))},
			check: func(t *testing.T, err error) { assert.ErrorIs(t, err, gzip.ErrHeader) }},
		{name: "an event that does not encode", expr: "id", event: map[string]any{"id": unencodable{}},
			check: func(t *testing.T, err error) { assert.ErrorIs(t, err, errUnencodable) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key, err := lambdawrap.KeyFromJMESPath[map[string]any](tc.expr)
			require.NoError(t, err)
			_, err = key(tc.event.(map[string]any))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.expr, "the expression is named")
			assert.NotContains(t, err.Error(), "SECRET")
			if tc.check != nil {
				tc.check(t, err)
			}

			fp := lambdawrap.WithFingerprintJMESPath[map[string]any](tc.expr)
			h, err := lambdawrap.Wrap(memGuard(t), func(context.Context, map[string]any) (string, error) { return "ok", nil },
				func(map[string]any) (string, error) { return "k-1", nil }, fp)
			require.NoError(t, err)
			_, err = h(invokeCtx(t), tc.event.(map[string]any))
			require.Error(t, err)
			assert.NotContains(t, err.Error(), "SECRET", "the fingerprint's error")
			if tc.check != nil {
				tc.check(t, err)
			}
		})
	}
}

// TestKeyFromJMESPathAPIGateway keys on a field of an API Gateway body, as the Powertools
// documentation's examples do.
func TestKeyFromJMESPathAPIGateway(t *testing.T) {
	t.Parallel()
	ev := loadEvent(t, "apigw-v2-jwt-authorizer")
	var req events.APIGatewayV2HTTPRequest
	require.NoError(t, json.Unmarshal(ev.payload(t), &req))
	key, err := lambdawrap.KeyFromJMESPath[events.APIGatewayV2HTTPRequest](`[requestContext.authorizer.jwt.claims.sub, powertools_json(body).[from, to, amount_cents]]`)
	require.NoError(t, err)
	got, err := key(req)
	require.NoError(t, err)
	assert.Equal(t, `["u_01H1ZQ3K9M2N4P6R8T0V",["acc_12","acc_88",50000]]`, got)
}

// TestKeyFromJMESPathNumbers: numbers work in filters and functions, and large integer ids
// keep every digit.
func TestKeyFromJMESPathNumbers(t *testing.T) {
	t.Parallel()
	event := json.RawMessage(`{"lines":[{"sku":"A","qty":1},{"sku":"B","qty":3}],"id":12345678901234567891,"small":9007199254740993,"body":"{\"n\":12345678901234567891}"}`)
	for expr, want := range map[string]string{
		"lines[?qty > `1`].sku":   `["B"]`,
		"sum(lines[*].qty)":       "4",
		"to_string(id)":           "12345678901234567891",
		"id":                      "12345678901234567891",
		"small":                   "9007199254740993",
		"powertools_json(body).n": "12345678901234567891",
		"[lines[0].qty, `2.5`]":   "[1,2.5]",
	} {
		t.Run(expr, func(t *testing.T) {
			t.Parallel()
			key, err := lambdawrap.KeyFromJMESPath[json.RawMessage](expr)
			require.NoError(t, err)
			got, err := key(event)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

// TestKeyFromJMESPathMissing: as in both Powertools runtimes, a selected null, "", [], {}
// or list of nulls is no key, so the event is refused with idem.ErrMissingKey rather than
// sharing one record with every other event that selects the same empty value. Zero and
// false are keys. Each case runs a REST API event through lambda.NewHandler.
func TestKeyFromJMESPathMissing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, expr, body string
		missing          bool
	}{
		{name: "empty body object", expr: "powertools_json(body)", body: `{}`, missing: true},
		{name: "empty object", expr: "powertools_json(body).order", body: `{"order":{}}`, missing: true},
		{name: "empty list", expr: "powertools_json(body).order", body: `{"order":[]}`, missing: true},
		{name: "null", expr: "powertools_json(body).order", body: `{"order":null}`, missing: true},
		{name: "absent", expr: "powertools_json(body).order", body: `{"sku":"A"}`, missing: true},
		{name: "empty string", expr: "powertools_json(body).order", body: `{"order":""}`, missing: true},
		{name: "list of nulls", expr: "powertools_json(body).[order, customer]", body: `{"sku":"A"}`, missing: true},
		{name: "zero", expr: "powertools_json(body).order", body: `{"order":0}`},
		{name: "false", expr: "powertools_json(body).order", body: `{"order":false}`},
		{name: "list of an empty string", expr: "powertools_json(body).order", body: `{"order":[""]}`},
		{name: "object", expr: "powertools_json(body).order", body: `{"order":{"id":"o-1"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev := loadEvent(t, "apigw-rest-post-with-key")
			ev.setBody(tc.body, false)
			key, err := lambdawrap.KeyFromJMESPath[events.APIGatewayProxyRequest](tc.expr)
			require.NoError(t, err)
			a := &app{}
			h, err := lambdawrap.Wrap(memGuard(t), a.rest, key)
			require.NoError(t, err)
			ctx := invokeCtx(t)
			for range 2 {
				_, err := invoker{h: h}.Invoke(ctx, ev.payload(t))
				if tc.missing {
					require.ErrorIs(t, err, idem.ErrMissingKey)
				} else {
					require.NoError(t, err)
				}
			}
			want := int64(1)
			if tc.missing {
				want = 0
			}
			assert.Equal(t, want, a.runs.Load())
		})
	}
}
