package dynamo_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/outbox"
)

// TestReview12_OutboxEventsTheTransactionCannotHoldAreRefusedAtRecord: outbox.Record
// promises that "a store that cannot commit it with the record refuses here", at the call,
// with an error wrapping idemstore.ErrInvalidAttach, before the handler does the rest of
// its work; dynamo.Store refuses at Record only the count (MaxAttached). DynamoDB cannot
// commit an outbox item over 400 KB, nor a TransactWriteItems over 4 MB. Schedule: the
// handler records the event(s) (Record answers ids, no error), does its work, returns;
// the completion's transaction is refused for its size; the guard resends it (same
// refusal), reads the record back in progress and releases the key: the caller gets an
// error, and every retry runs the handler again to the same end (a poison key whose
// handler runs at every retry). On main Record accepts both.
func TestReview12_OutboxEventsTheTransactionCannotHoldAreRefusedAtRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	table := fmt.Sprintf("outbox-r12-%d", time.Now().UnixNano())
	_, err := e.client.CreateTable(ctx, dynamo.OutboxTableInput(table))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = e.client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	store, err := dynamo.New(e.client, e.table, dynamo.WithOutboxTable(table))
	require.NoError(t, err)
	g, err := idem.New(store, "r12-outbox-size")
	require.NoError(t, err)

	for name, payloads := range map[string][][]byte{
		"OneEventOverTheItemLimit": {bytes.Repeat([]byte("x"), 450<<10)},
		"EventsOverTheTransactionLimit": func() [][]byte {
			var p [][]byte
			for range 12 { // 12 items of 380 KB: each fits an item, together over 4 MB
				p = append(p, bytes.Repeat([]byte("y"), 380<<10))
			}
			return p
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			runs := 0
			var recErr error
			_, _, doErr := idem.Do(ctx, g, idem.Request{Key: name}, func(ctx context.Context) (string, error) {
				runs++
				for i, p := range payloads {
					if _, recErr = outbox.Record(ctx, outbox.Event{Destination: "q", OrderingKey: fmt.Sprintf("k-%d", i), Type: "Big", Payload: p}); recErr != nil {
						return "", recErr
					}
				}
				return "ok", nil
			})
			if recErr != nil {
				assert.ErrorIs(t, recErr, idemstore.ErrInvalidAttach, "refused at the call, as Record documents")
				return
			}
			assert.NoError(t, doErr, "Record accepted the events: the completion must commit them")
			assert.Equal(t, 1, runs)
		})
	}
}
