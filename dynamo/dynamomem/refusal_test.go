package dynamomem_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
)

// lockedBuffer is a log destination safe for the guard's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestInsufficientFundsIsAPermanentRefusal: a debit attached to the completion, conditional
// on the account's balance, meets an account without the funds, in memory and on DynamoDB.
// It is a permanent refusal (idem.IsRefused): errors.As reaches DynamoDB's
// TransactionCanceledException and the *dynamo.AttachedWriteError from Do's error and from
// OnReleased's event; the guard logs it once at WARN with the reason code and the stored
// key, never the raw key; and a handler that chose an answer with idem.OnRefused has it
// stored and replayed, the account untouched.
func TestInsufficientFundsIsAPermanentRefusal(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		_, err := b.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(b.table),
			Item: map[string]types.AttributeValue{"pk": s("acct-1"), "balance": n("50")}})
		require.NoError(t, err)
		var logs lockedBuffer
		var mu sync.Mutex
		var released []idem.Event
		g, err := idem.New(b.store, "pay",
			idem.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
			idem.WithHooks(idem.Hooks{OnReleased: func(_ context.Context, e idem.Event) {
				mu.Lock()
				released = append(released, e)
				mu.Unlock()
			}}))
		require.NoError(t, err)
		debit := types.TransactWriteItem{Update: &types.Update{
			TableName:                 aws.String(b.table),
			Key:                       map[string]types.AttributeValue{"pk": s("acct-1")},
			UpdateExpression:          aws.String("SET balance = balance - :amt"),
			ConditionExpression:       aws.String("balance >= :amt"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":amt": n("100")},
		}}
		runs := 0
		pay := func(key string, answer bool) (string, bool, error) {
			return idem.Do(ctx, g, idem.Request{Key: key}, func(ctx context.Context) (string, error) {
				runs++
				if err := dynamo.Attach(ctx, debit); err != nil {
					return "", err
				}
				if !answer {
					return "paid", nil
				}
				return "paid", idem.OnRefused(ctx, func(context.Context, error) (any, bool) { return "declined", true })
			})
		}

		_, _, err = pay("raw-key-secret", false)
		require.ErrorIs(t, err, idem.ErrConditionFailed)
		assert.True(t, idem.IsRefused(err))
		mu.Lock()
		require.Len(t, released, 1)
		events := []error{err, released[0].Err}
		mu.Unlock()
		for i, e := range events {
			var awe *dynamo.AttachedWriteError
			require.ErrorAs(t, e, &awe, "error %d", i)
			assert.True(t, awe.Permanent())
			assert.Equal(t, "ConditionalCheckFailed", awe.Code)
			assert.Contains(t, awe.Reason(), "ConditionalCheckFailed")
			var tce *types.TransactionCanceledException
			assert.ErrorAs(t, e, &tce, "error %d", i)
		}
		var warns []string
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "level=WARN") {
				warns = append(warns, line)
			}
		}
		stored, err := g.StoredKey(idem.Request{Key: "raw-key-secret"})
		require.NoError(t, err)
		require.Len(t, warns, 1, logs.String())
		assert.Contains(t, warns[0], "ConditionalCheckFailed")
		assert.Contains(t, warns[0], stored)
		assert.NotContains(t, logs.String(), "raw-key-secret")

		for i := range 2 {
			v, replayed, err := pay("k-2", true)
			require.NoError(t, err)
			assert.Equal(t, "declined", v)
			assert.Equal(t, i == 1, replayed)
		}
		assert.Equal(t, 2, runs, "the retry replays the answer chosen")
		assert.Equal(t, "balance=N:50 pk=S:acct-1", b.item(t, "acct-1"), "nothing debited")
	})
}
