package lambdawrap_test

// The tests of review 2 (branch review2, lambdawrap/review2_test.go) for the holes fixed
// here, copied; where a fix answers otherwise than the reviewer's test assumed, the change
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
