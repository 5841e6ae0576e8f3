package dynamo_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
)

// TestCompleteAttached checks the transactional completion: the business write lands with
// the record or not at all.
func TestCompleteAttached(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newLedger(t, e.client)
	ctx := context.Background()
	now := wallClock()

	cases := []struct {
		name        string
		token       string // token the completion presents; the record's is "tok"
		failCond    bool
		pointer     bool
		wantErr     error
		wantBalance int
		wantStatus  idemstore.Status
	}{
		{"Applied", "tok", false, false, nil, 7, idemstore.StatusCompleted},
		{"AppliedFromPointer", "tok", false, true, nil, 7, idemstore.StatusCompleted},
		{"StaleTokenAppliesNothing", "stale", false, false, idem.ErrLeaseLost, 0, idemstore.StatusInProgress},
		{"BusinessConditionFails", "tok", true, false, idem.ErrConditionFailed, 0, idemstore.StatusInProgress},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := record("attached/"+tc.name, now, "tok")
			seed(t, e.store, rec)
			account := "acct-" + tc.name
			var w any = l.add(account, 7, tc.failCond)
			if tc.pointer {
				item := l.add(account, 7, tc.failCond)
				w = &item
			}
			done := *rec
			done.Status, done.LeaseToken, done.Data, done.Encoding = idemstore.StatusCompleted, tc.token, []byte(`{"ok":true}`), "json"

			err := e.store.Complete(ctx, &done, []any{w})
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				var tce *types.TransactionCanceledException
				assert.ErrorAs(t, err, &tce, "the SDK error stays reachable")
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.wantBalance, l.balance(t, account))
			got, err := e.store.Get(ctx, rec.Key)
			require.NoError(t, err)
			assert.Equal(t, tc.wantStatus, got.Status)
			assert.Equal(t, "tok", got.LeaseToken, "the owner's record is intact")
		})
	}

	t.Run("BadAttachments", func(t *testing.T) {
		t.Parallel()
		rec := record("attached/bad", now, "tok")
		seed(t, e.store, rec)
		done := *rec
		done.Status = idemstore.StatusCompleted
		var nilItem *types.TransactWriteItem
		tooMany := make([]any, dynamo.MaxAttached+1)
		for i := range tooMany {
			tooMany[i] = l.add(fmt.Sprint("many-", i), 1, false)
		}
		for name, attached := range map[string][]any{
			"WrongType":  {"ADD balance 1"},
			"NilPointer": {nilItem},
			"TooMany":    tooMany,
		} {
			err := e.store.Complete(ctx, &done, attached)
			require.Error(t, err, name)
			assert.NotErrorIs(t, err, idem.ErrStore, name)
		}
	})
}

// TestAttach drives the helper through a guarded handler, up to DynamoDB's transaction
// limit.
func TestAttach(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newLedger(t, e.client)
	ctx := context.Background()
	g, err := idem.New(e.store, "test", idem.WithScope("attach"))
	require.NoError(t, err)

	require.Error(t, dynamo.Attach(ctx, l.add("x", 1, false)), "outside a guarded handler")

	items := make([]types.TransactWriteItem, dynamo.MaxAttached)
	for i := range items {
		items[i] = l.add(fmt.Sprint("acct-", i), 1, false)
	}
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "full"}, func(ctx context.Context) (int, error) {
		require.Error(t, dynamo.Attach(ctx, append(items, l.add("one-too-many", 1, false))...))
		return 0, dynamo.Attach(ctx, items...)
	})
	require.NoError(t, err, "the completion and %d attached writes fit one transaction", dynamo.MaxAttached)
	assert.Equal(t, 1, l.balance(t, "acct-0"))
	assert.Equal(t, 1, l.balance(t, fmt.Sprint("acct-", dynamo.MaxAttached-1)))
	assert.Equal(t, 0, l.balance(t, "one-too-many"))
}

// TestAttachedWriteTooLarge attaches a Put of an item over DynamoDB's 400 KB limit, which
// DynamoDB refuses for the whole request without naming the item. The completed record
// fits, so the attached write is to blame: nothing committed, the key is released, and the
// error names the write rather than saying the result was too large.
func TestAttachedWriteTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newLedger(t, e.client)
	ctx := context.Background()
	g, err := idem.New(e.store, "test", idem.WithScope("attached-too-large"))
	require.NoError(t, err)
	put := func(size int) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(l.table),
			Item: map[string]types.AttributeValue{
				"id":   &types.AttributeValueMemberS{Value: "doc"},
				"body": &types.AttributeValueMemberS{Value: strings.Repeat("x", size)},
			},
		}}
	}
	runs := 0
	handler := func(size int) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			runs++
			return "stored", dynamo.Attach(ctx, l.add("acct", 1, false), put(size))
		}
	}

	_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, handler(410*1024))
	require.ErrorIs(t, err, idemstore.ErrNotCommitted)
	require.ErrorIs(t, err, idem.ErrStore)
	assert.NotErrorIs(t, err, idemstore.ErrTooLarge, "the result was not too large")
	var awe *dynamo.AttachedWriteError
	require.ErrorAs(t, err, &awe)
	assert.Equal(t, 1, awe.Index, "the second attached write")
	assert.Equal(t, l.table, awe.Table)
	var apiErr smithy.APIError
	assert.ErrorAs(t, err, &apiErr, "DynamoDB's error stays reachable")
	assert.Equal(t, 0, l.balance(t, "acct"), "nothing committed")

	v, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, handler(1024))
	require.NoError(t, err, "the key was released")
	assert.False(t, replayed)
	assert.Equal(t, "stored", v)
	assert.Equal(t, 2, runs)
	assert.Equal(t, 1, l.balance(t, "acct"))
}

// TestAttachRefusesWhatTheStoreCannotCommit: idem.Attach and dynamo.Attach refuse at once,
// naming the problem, a value the DynamoDB store could not commit: another type, a nil
// pointer, an item without exactly one action or without its table, and a write past
// DynamoDB's transaction limit counted over every call. Nothing of the refused call is
// attached; the handler returns the error, and the key is released for the next request.
func TestAttachRefusesWhatTheStoreCannotCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newLedger(t, e.client)
	ctx := context.Background()
	g, err := idem.New(e.store, "test", idem.WithScope("attach-refused"))
	require.NoError(t, err)
	var nilItem *types.TransactWriteItem
	full := make([]types.TransactWriteItem, dynamo.MaxAttached)
	for i := range full {
		full[i] = l.add(fmt.Sprint("full-", i), 1, false)
	}
	add := l.add("acct", 1, false)
	for _, tc := range []struct {
		name   string
		attach func(ctx context.Context) error // the last call must be refused
		named  string                          // what the error names
	}{
		{"MemStoreFunc", func(ctx context.Context) error { return idem.Attach(ctx, func() error { return nil }) }, "func() error"},
		{"NilPointer", func(ctx context.Context) error { return idem.Attach(ctx, nilItem) }, "nil *types.TransactWriteItem"},
		{"NoAction", func(ctx context.Context) error { return dynamo.Attach(ctx, types.TransactWriteItem{}) }, "no action"},
		{"TwoActions", func(ctx context.Context) error {
			w := add
			w.Delete = &types.Delete{TableName: aws.String(l.table), Key: add.Update.Key}
			return dynamo.Attach(ctx, w)
		}, "2 actions"},
		{"NoTable", func(ctx context.Context) error {
			w := l.add("acct", 1, false)
			w.Update.TableName = nil
			return dynamo.Attach(ctx, w)
		}, "TableName"},
		{"PastTheLimitOverCalls", func(ctx context.Context) error {
			require.NoError(t, dynamo.Attach(ctx, full...))
			return dynamo.Attach(ctx, add)
		}, fmt.Sprint(dynamo.MaxAttached)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := idem.Request{Key: tc.name}
			_, _, err := idem.Do(ctx, g, req, func(ctx context.Context) (int, error) { return 0, tc.attach(ctx) })
			require.ErrorIs(t, err, idemstore.ErrInvalidAttach, "refused by Attach")
			assert.ErrorContains(t, err, tc.named)
			v, replayed, err := idem.Do(ctx, g, req, func(context.Context) (int, error) { return 1, nil })
			require.NoError(t, err, "the key was released")
			assert.False(t, replayed)
			assert.Equal(t, 1, v)
		})
	}
	assert.Equal(t, 0, l.balance(t, "full-0"), "a refused handler's writes never commit")
}
