package dynamo_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
)

// TestOnRefusedStoresALargeChosenResult: a handler whose result is over 1 KB (kept in its
// own item, "<key>#result#<token>") attaches a write DynamoDB refuses for good, and
// chooses with idem.OnRefused another result over 1 KB. Complete writes the handler's
// result's item before the transaction, which is refused; the item stays. The guard's
// completion with the chosen result, under the SAME token, finds that item holding another
// result, and keeps the chosen one in an item of its own, named by the token and a hash of
// the result, which the completed record names: Do returns the chosen result, and the
// retry replays it without running the handler again. (Before, the chosen completion
// failed on the handler's item: outcome unknown, and the chosen result was never stored.)
func TestOnRefusedStoresALargeChosenResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newLedger(t, e.client)
	ctx := context.Background()
	g, err := idem.New(e.store, "refusedresult")
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

// TestSecondResultUnderATokenHasItsOwnItem: at the store, two completions under one token
// with two results over 1 KB (the handler's, whose transaction was refused, and the one
// the guard chose). Whichever lands first is the record's, and its result is the one read
// back: the other, sent or resent later, commits nothing and changes no item the record
// names. A resend of the chosen completion writes its own item again (no error), and a late
// first attempt of the refused transaction, landing after, names the handler's item, never
// the chosen one's data.
func TestSecondResultUnderATokenHasItsOwnItem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newLedger(t, e.client)
	ctx := context.Background()
	now := wallClock()
	const token = "0123456789abcdef0123456789abcdef"
	handler, chosen := bigData(8<<10), bigData(9<<10)
	for _, chosenFirst := range []bool{true, false} {
		name := "LateFirstAttemptAfter"
		if !chosenFirst {
			name = "LateFirstAttemptBefore"
		}
		t.Run(name, func(t *testing.T) {
			rec := record("second-result/"+name, now, token)
			seed(t, e.store, rec)
			err := e.store.Complete(ctx, completedWith(rec, handler), []any{l.add("acct-"+name, 1, true)})
			require.ErrorIs(t, err, idem.ErrConditionFailed, "the handler's transaction is refused")
			assert.NotNil(t, e.rawItem(t, itemKey(bodyKey(rec.Key, token))), "the handler's result's item stays")

			want := chosen
			if chosenFirst {
				require.NoError(t, e.store.Complete(ctx, completedWith(rec, chosen), nil))
				require.NoError(t, e.store.Complete(ctx, completedWith(rec, chosen), nil), "a resend")
				// The first attempt of the refused transaction, landing late, without its
				// refused write: the record is completed, nothing commits.
				require.NoError(t, e.store.Complete(ctx, completedWith(rec, handler), nil))
			} else {
				require.NoError(t, e.store.Complete(ctx, completedWith(rec, handler), nil))
				require.NoError(t, e.store.Complete(ctx, completedWith(rec, chosen), nil))
				want = handler
			}
			got, err := e.store.Get(ctx, rec.Key)
			require.NoError(t, err)
			assert.Equal(t, idemstore.StatusCompleted, got.Status)
			assert.Equal(t, string(want), string(got.Data))
			ref, _ := attrS(e.rawItem(t, itemKey(rec.Key)), "data_ref")
			if chosenFirst {
				assert.Regexp(t, `^`+regexp.QuoteMeta(bodyKey(rec.Key, token))+`\.[0-9a-f]{32}$`, ref)
			} else {
				assert.Equal(t, bodyKey(rec.Key, token), ref)
			}
		})
	}
}
