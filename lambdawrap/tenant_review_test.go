package lambdawrap_test

// The tests of review 2 (branch review2, lambdawrap/review2_test.go) for the holes fixed
// here, copied; where a fix answers otherwise than the reviewer's test assumed, the change
// is said beside it.

import (
	"context"
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
