package dynamo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
)

// TestReview11_OnRefusedLargeResultsNeverStored: a handler whose result is over 1 KB (kept
// in its own item, "<key>#result#<token>") attaches a write DynamoDB refuses for good, and
// chooses with idem.OnRefused another result over 1 KB. Complete writes the handler's
// result's item before the transaction, which is refused; the item stays. The guard's
// completion with the chosen result, under the SAME token, then puts its result's item
// under the same key, conditional on there being none: errResultTaken, the record is still
// in progress (not completed under the token), so Complete fails with a store error. Do
// answers outcome unknown, the key stays in progress until its lease ends, and every later
// owner meets the same collision: the chosen result is never stored, nor replayed.
//
// OnRefused's doc promises: "Stored: Do returns f's result and no error, and retries
// replay it."
func TestReview11_OnRefusedLargeResultsNeverStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newLedger(t, e.client)
	ctx := context.Background()
	g, err := idem.New(e.store, "review11")
	require.NoError(t, err)

	handlerResult := string(bigData(8 << 10))
	chosen := string(bigData(9 << 10)) // bigData is deterministic: another size, another result
	runs := 0
	v, _, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (string, error) {
		runs++
		if err := idem.OnRefused(ctx, func(context.Context, error) (any, bool) { return chosen, true }); err != nil {
			return "", err
		}
		// attribute_exists(closed) on an account that has none: refused for good.
		return handlerResult, dynamoAttach(ctx, l.add("acct", 1, true))
	})
	require.NoError(t, err, "the chosen result is stored under the same lease")
	assert.Equal(t, chosen, v)

	v, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (string, error) {
		runs++
		return "ran again", nil
	})
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, chosen, v, "the retry replays the chosen result")
	assert.Equal(t, 1, runs)
	assert.Equal(t, 0, l.balance(t, "acct"), "nothing debited")
}

func dynamoAttach(ctx context.Context, w types.TransactWriteItem) error { return dynamo.Attach(ctx, w) }
