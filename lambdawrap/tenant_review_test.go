package lambdawrap_test

// The tests of review 2 (branch review2, lambdawrap/review2_test.go) for holes 4, 5 and 8,
// copied here; where a fix answers otherwise than the reviewer's test assumed, the change
// is said beside it.

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/capture"
	"github.com/idemkit/idem/lambdawrap"
	"github.com/idemkit/idem/memstore"
)

// TestReviewMutualTLSCallersShareATenant: API Gateway's mutual TLS (a custom domain with a
// truststore) authenticates each caller by its client certificate, and the event says who
// the caller is: requestContext.authentication.clientCert (HTTP API) or
// requestContext.identity.clientCert (REST API), subject DN and serial number. No
// authorizer block is involved, so the default tenant found nothing and every mTLS client
// shared the empty tenant: partner B, sending the key partner A used (same body: a common
// "create the daily settlement" call), was replayed A's stored response.
//
// Changed from the reviewer's test: the REST fixture carries a Lambda authorizer whose
// principalId ("customer-4711") is the same for both partners, and an authorizer's
// identity comes before the certificate's (TestClientCertificateTenant), so here the REST
// event has no authorizer, as a REST API with mutual TLS alone sends it.
func TestReviewMutualTLSCallersShareATenant(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fixture string
		k       kind
		cert    []string // where the event carries the client certificate
	}{
		{fixture: "apigw-v2-post-with-key", k: kindHTTPAPI, cert: []string{"requestContext", "authentication", "clientCert"}},
		{fixture: "apigw-rest-post-with-key", k: kindREST, cert: []string{"requestContext", "identity", "clientCert"}},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			t.Parallel()
			a := &app{}
			h := a.handler(t, tc.k, memGuard(t))
			ctx := invokeCtx(t)
			ev := loadEvent(t, tc.fixture)
			ev.obj("requestContext")["authorizer"] = nil
			as := func(subject, serial string) response {
				c := ev.obj(tc.cert...)
				c["clientCertPem"] = "-----BEGIN CERTIFICATE-----\nMIIC...\n-----END CERTIFICATE-----"
				c["subjectDN"] = subject
				c["issuerDN"] = "C=US,O=Example Corp,CN=Example Partner CA"
				c["serialNumber"] = serial
				c["validity"] = map[string]any{"notBefore": "Jan 1 00:00:00 2026 GMT", "notAfter": "Jan 1 00:00:00 2027 GMT"}
				r := invoke(ctx, t, h, ev)
				require.NoError(t, r.err)
				return r
			}
			first := as("C=US,O=Partner A,CN=settlement.partner-a.example", "1a:2b:3c")
			second := as("C=DE,O=Partner B,CN=settlement.partner-b.example", "9f:8e:7d")
			t.Logf("partner A: %d %s", first.code, first.body(t))
			t.Logf("partner B: %d %s replayed=%q", second.code, second.body(t), second.header("Idempotent-Replayed"))
			assert.Empty(t, second.header("Idempotent-Replayed"), "partner B is not replayed partner A's response")
			assert.NotEqual(t, first.body(t), second.body(t), "partner B is not replayed partner A's response")
		})
	}
}

// TestReviewJMESPathTypeErrorLogsTheKey: a key expression whose function meets an argument
// of the wrong type fails with go-jmespath's error "invalid type for: %v, expected: ...",
// which prints the argument: here the whole request body, the raw key in it. A REST API
// non-proxy integration whose mapping template passes the body parsed
// ({"body": $input.json('$')}) makes the Powertools idiom powertools_json(body).order_id
// meet an object instead of a string. With OptionalKey the wrapper logs that error at
// WARN ("no idempotency key; running the handler unguarded") and passes it to OnUnguarded;
// without it, the error is returned to the Lambda runtime, which logs it. Either way the
// raw key (and the body) reached a log line.
func TestReviewJMESPathTypeErrorLogsTheKey(t *testing.T) {
	t.Parallel()
	const rawKey = "RAWKEY-jane.doe@example.com-order-77"
	event := map[string]any{
		"body":   map[string]any{"order_id": rawKey, "card_last4": "4242", "amount_cents": 1999},
		"method": "POST",
	}
	key, err := lambdawrap.KeyFromJMESPath[map[string]any]("powertools_json(body).order_id")
	require.NoError(t, err)
	h := func(context.Context, map[string]any) (string, error) { return "ok", nil }

	t.Run("OptionalKey: logged at WARN and given to OnUnguarded", func(t *testing.T) {
		t.Parallel()
		var out capture.Output
		g, err := idem.New(memstore.New(), "orders", out.Options()...)
		require.NoError(t, err)
		fn, err := lambdawrap.Wrap(g, h, lambdawrap.OptionalKey(key))
		require.NoError(t, err)
		_, err = fn(invokeCtx(t), event)
		out.Error(err)
		t.Logf("captured:\n%s", out.String())
		assert.NotContains(t, out.String(), rawKey, "the raw key never reaches a log line or a hook")
	})

	t.Run("required key: the error returned to Lambda", func(t *testing.T) {
		t.Parallel()
		var out capture.Output
		g, err := idem.New(memstore.New(), "orders", out.Options()...)
		require.NoError(t, err)
		fn, err := lambdawrap.Wrap(g, h, key)
		require.NoError(t, err)
		_, err = fn(invokeCtx(t), event)
		require.Error(t, err)
		out.Error(err)
		t.Logf("captured:\n%s", out.String())
		assert.NotContains(t, out.String(), rawKey, "the raw key is not in the error the runtime logs")
	})

	t.Run("WithFingerprintJMESPath: the error returned to Lambda", func(t *testing.T) {
		t.Parallel()
		var out capture.Output
		g, err := idem.New(memstore.New(), "orders", out.Options()...)
		require.NoError(t, err)
		byID := func(e map[string]any) (string, error) { return "evt-1", nil }
		fn, err := lambdawrap.Wrap(g, h, byID, lambdawrap.WithFingerprintJMESPath[map[string]any]("powertools_json(body)"))
		require.NoError(t, err)
		_, err = fn(invokeCtx(t), event)
		require.Error(t, err)
		out.Error(err)
		t.Logf("captured:\n%s", out.String())
		assert.NotContains(t, out.String(), rawKey, "the body is not in the error the runtime logs")
	})
}

// TestReviewLargeNumericPrincipalsShareATenant: a Lambda authorizer's context may carry
// numbers, and an HTTP API event carries them as JSON numbers
// (requestContext.authorizer.lambda). aws-lambda-go decodes that map into interface{}, so a
// number is a float64, and the default tenant was fmt.Sprint of it: two 64-bit user ids
// (snowflake ids, database bigints) above 2^53 that round to the same float64 were one
// tenant, "principal:1.2345678901234568e+18", and the second user, sending the first
// one's key, was replayed the first user's response.
//
// Changed from the reviewer's test, which wanted two runs: the digits are lost before
// lambdawrap sees the event, so no tenant can tell the two users apart; both requests are
// refused as authenticated without an identity (500 ProblemUnknownCaller, reported through
// OnUnguarded with ErrUnknownCaller), and the handler never runs.
func TestReviewLargeNumericPrincipalsShareATenant(t *testing.T) {
	t.Parallel()
	for _, field := range []string{"principalId", "sub"} {
		t.Run(field, func(t *testing.T) {
			t.Parallel()
			a := &app{}
			var u unguardedHooks
			h := a.handler(t, kindHTTPAPI, memGuard(t, idem.WithHooks(u.hooks())))
			ctx := invokeCtx(t)
			ev := loadEvent(t, "apigw-v2-lambda-authorizer")
			as := func(id string) response {
				l := ev.obj("requestContext", "authorizer", "lambda")
				delete(l, "principalId")
				l[field] = json.Number(id) // sent as the number it is
				r := invoke(ctx, t, h, ev)
				require.NoError(t, r.err)
				return r
			}
			first := as("1234567890123456789")
			second := as("1234567890123456700")
			t.Logf("user 1234567890123456789: %d %s", first.code, first.body(t))
			t.Logf("user 1234567890123456700: %d %s replayed=%q", second.code, second.body(t), second.header("Idempotent-Replayed"))
			assert.Empty(t, second.header("Idempotent-Replayed"), "another user is not replayed the first one's response")
			for _, r := range []response{first, second} {
				checkProblem(t, r, 500, lambdawrap.ProblemUnknownCaller)
			}
			assert.Equal(t, int64(0), a.runs.Load(), "the handler never runs")
			events := u.seen()
			require.Len(t, events, 2, "OnUnguarded calls")
			for _, e := range events {
				require.ErrorIs(t, e.Err, lambdawrap.ErrUnknownCaller)
			}
		})
	}
}
