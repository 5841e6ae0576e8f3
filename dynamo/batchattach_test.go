package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
)

// seedBatch claims n keys with tokens of their own and returns their completions, each
// with one attached write of 1 to its own account of l; fail names the records whose write's
// condition fails.
func seedBatch(t *testing.T, e *env, l *ledger, n int, data []byte, fail map[int]bool) (recs []*idemstore.Record, attached [][]any) {
	t.Helper()
	now := wallClock()
	for i := range n {
		rec := record(fmt.Sprintf("%s/k%d", t.Name(), i), now, fmt.Sprintf("tok-%d", i))
		seed(t, e.store, rec)
		recs = append(recs, completedWith(rec, data))
		attached = append(attached, []any{l.add(fmt.Sprintf("acct-%d", i), 1, fail[i])})
	}
	e.api.Take()
	return recs, attached
}

// TestCompleteManyAttached counts the TransactWriteItems calls of a batch completion with
// attached writes on DynamoDB Local, and what each record's answer and write came to.
func TestCompleteManyAttached(t *testing.T) {
	t.Parallel()
	t.Run("ten records, one transaction", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		l := newLedger(t, e.client)
		recs, attached := seedBatch(t, e, l, 10, []byte(`{"ok":true}`), nil)
		for i, err := range e.store.CompleteManyAttached(context.Background(), recs, attached) {
			require.NoError(t, err, "record %d", i)
		}
		assert.Equal(t, map[string]int{"TransactWriteItems": 1}, e.api.Take())
		for i, rec := range recs {
			got, err := e.store.Get(context.Background(), rec.Key)
			require.NoError(t, err)
			assert.Equal(t, idemstore.StatusCompleted, got.Status)
			assert.Equal(t, 1, l.balance(t, fmt.Sprintf("acct-%d", i)))
		}
	})
	t.Run("sixty records, two transactions", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		l := newLedger(t, e.client)
		recs, attached := seedBatch(t, e, l, 60, []byte(`{}`), nil) // 120 actions
		for i, err := range e.store.CompleteManyAttached(context.Background(), recs, attached) {
			require.NoError(t, err, "record %d", i)
		}
		assert.Equal(t, map[string]int{"TransactWriteItems": 2}, e.api.Take())
		for i := range recs {
			assert.Equal(t, 1, l.balance(t, fmt.Sprintf("acct-%d", i)))
		}
	})
	t.Run("two writes to one item: two transactions", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		l := newLedger(t, e.client)
		recs, attached := seedBatch(t, e, l, 4, []byte(`{}`), nil)
		attached[2] = []any{l.add("acct-0", 1, false)} // records 0 and 2 credit one account
		for i, err := range e.store.CompleteManyAttached(context.Background(), recs, attached) {
			require.NoError(t, err, "record %d", i)
		}
		assert.Equal(t, map[string]int{"TransactWriteItems": 2}, e.api.Take())
		assert.Equal(t, 2, l.balance(t, "acct-0"))
		assert.Equal(t, 1, l.balance(t, "acct-1"))
		assert.Equal(t, 1, l.balance(t, "acct-3"))
	})
	t.Run("results kept apart", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		l := newLedger(t, e.client)
		data := []byte(`"` + randomJSONText(4000) + `"`)
		recs, attached := seedBatch(t, e, l, 3, data, nil)
		for i, err := range e.store.CompleteManyAttached(context.Background(), recs, attached) {
			require.NoError(t, err, "record %d", i)
		}
		assert.Equal(t, map[string]int{"TransactWriteItems": 1}, e.api.Take(), "the results' items in the same transaction")
		for _, rec := range recs {
			got, err := e.store.Get(context.Background(), rec.Key)
			require.NoError(t, err)
			assert.Equal(t, data, got.Data)
			assert.NotNil(t, e.rawItem(t, itemKey(bodyKey(rec.Key, rec.LeaseToken))), "the result's item")
		}
	})
	t.Run("lease lost and a failed condition: one retry without them", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		l := newLedger(t, e.client)
		recs, attached := seedBatch(t, e, l, 5, []byte(`{}`), map[int]bool{3: true})
		// Record 1's lease was taken over: another owner's token.
		require.NoError(t, e.store.Release(context.Background(), recs[1].Key, recs[1].LeaseToken, time.Unix(0, 0))) // seed claims at the epoch
		seed(t, e.store, record(recs[1].Key, wallClock(), "other"))
		e.api.Take()

		errs := e.store.CompleteManyAttached(context.Background(), recs, attached)
		assert.Equal(t, map[string]int{"TransactWriteItems": 2}, e.api.Take(), "the cancelled one and its retry")
		require.ErrorIs(t, errs[1], idem.ErrLeaseLost)
		require.ErrorIs(t, errs[3], idem.ErrConditionFailed)
		var awe *dynamo.AttachedWriteError
		require.ErrorAs(t, errs[3], &awe)
		assert.Equal(t, 0, awe.Index)
		for _, i := range []int{0, 2, 4} {
			require.NoError(t, errs[i], "record %d", i)
			assert.Equal(t, 1, l.balance(t, fmt.Sprintf("acct-%d", i)))
		}
		assert.Zero(t, l.balance(t, "acct-1"))
		assert.Zero(t, l.balance(t, "acct-3"))
		got, err := e.store.Get(context.Background(), recs[1].Key)
		require.NoError(t, err)
		assert.Equal(t, "other", got.LeaseToken, "the new owner's record untouched")
	})
	t.Run("resent after it landed", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		l := newLedger(t, e.client)
		recs, attached := seedBatch(t, e, l, 4, []byte(`{}`), nil)
		for _, err := range e.store.CompleteManyAttached(context.Background(), recs, attached) {
			require.NoError(t, err)
		}
		e.api.Take()
		for i, err := range e.store.CompleteManyAttached(context.Background(), recs, attached) {
			require.NoError(t, err, "record %d: completed under its token already", i)
		}
		assert.Equal(t, map[string]int{"TransactWriteItems": 1}, e.api.Take())
		for i := range recs {
			assert.Equal(t, 1, l.balance(t, fmt.Sprintf("acct-%d", i)), "committed once")
		}
	})
	t.Run("answer lost", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		l := newLedger(t, e.client)
		lost := &loseTransact{API: e.api}
		store, err := dynamo.New(lost, e.table)
		require.NoError(t, err)
		recs, attached := seedBatch(t, e, l, 3, []byte(`{}`), nil)
		lost.lose = 1
		for i, err := range store.CompleteManyAttached(context.Background(), recs, attached) {
			require.ErrorIs(t, err, idem.ErrStore, "record %d: outcome unknown", i)
		}
		for i, rec := range recs { // what the guard then does: each alone, with Complete
			require.NoError(t, store.Complete(context.Background(), rec, attached[i]))
			assert.Equal(t, 1, l.balance(t, fmt.Sprintf("acct-%d", i)), "committed once")
		}
	})
}

// loseTransact lets the next lose TransactWriteItems calls land, then answers with an
// error, as a response lost on the way back.
type loseTransact struct {
	dynamo.API
	lose int
}

func (l *loseTransact) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := l.API.TransactWriteItems(ctx, in, opts...)
	if err == nil && l.lose > 0 {
		l.lose--
		return nil, errors.New("read tcp: connection reset by peer")
	}
	return out, err
}
