package kinesis_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/internal/ddbcount"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/samtables"
	"github.com/idemkit/idem/kinesis"
)

// TestCostOnDynamoDB counts the DynamoDB calls (DynamoDB Local) of a batch of 100 new
// records over 10 partition keys: ⌈100/25⌉ claim calls and ⌈100/25⌉ completion calls, 8
// in all, where a per-record idempotent handler makes 200. The same batch delivered again
// replays in its claim calls (4, and one read of the records they met): no completion,
// no single-item call.
func TestCostOnDynamoDB(t *testing.T) {
	t.Parallel()
	client := ddblocal.Client(t)
	table := samtables.NewTables(t, client, "IdempotencyTable")["IdempotencyTable"]
	api := ddbcount.New(client)
	store, err := dynamo.New(api, table)
	require.NoError(t, err)
	guard, err := idem.New(store, "cost")
	require.NoError(t, err)
	h, err := kinesis.New(guard, func(context.Context, events.KinesisEventRecord) error { return nil })
	require.NoError(t, err)
	var ev events.KinesisEvent
	for i := range 100 {
		ev.Records = append(ev.Records, record(fmt.Sprintf("%04d", i), fmt.Sprintf("pk-%d", i%10), fmt.Sprintf(`{"n":%d}`, i)))
	}

	rep, err := h.Process(lambdaContext(t), ev)
	require.NoError(t, err)
	require.Equal(t, 100, rep.Ran)
	calls := api.Take()
	t.Logf("new: %v", calls)
	assert.Equal(t, map[string]int{"BatchExecuteStatement": 8}, calls, "4 batch claims and 4 batch completions")

	rep, err = h.Process(lambdaContext(t), ev)
	require.NoError(t, err)
	require.Equal(t, 100, rep.Replayed)
	calls = api.Take()
	t.Logf("redelivered: %v", calls)
	// 4 batch claims, refused, and one BatchGetItem (up to 100 keys) reading back the
	// finished records they met.
	assert.Equal(t, map[string]int{"BatchExecuteStatement": 4, "BatchGetItem": 1}, calls)
}
