package dynamostream_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamostream"
	"github.com/idemkit/idem/internal/adaptertest"
)

// TestCostOnDynamoDB counts the DynamoDB calls (DynamoDB Local) of a batch of 100 new
// records, and of the same batch delivered again.
//
//   - 100 items, one record each: ⌈100/25⌉ claim calls and ⌈100/25⌉ completion
//     calls, 8 in all, where a per-record idempotent handler makes 200.
//   - 10 items, 10 records each: a record followed by another of its ordering key is
//     recorded on its own before that one starts (one UpdateItem each, 90); the last
//     record of each key is recorded with the batch. 4 claim calls, 90 single completions
//     and 1 batch completion of the 10 last records: 95.
//
// Delivered again, the batch replays in its claim calls (4, and one read of the records
// they met): no completion, no single-item call.
//
// The calls are counted as adaptertest.CountingGuard says, under adaptertest.Context's
// deadline.
func TestCostOnDynamoDB(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		keys  int
		calls map[string]int
	}{
		{"distinct keys", 100, map[string]int{"BatchExecuteStatement": 8}},
		{"repeated keys", 10, map[string]int{"BatchExecuteStatement": 5, "UpdateItem": 90}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			adaptertest.Cost(t, 100, tc.calls, func(t *testing.T, guard *idem.Guard) func(context.Context) (int, int) {
				h, err := dynamostream.New(guard, func(context.Context, events.DynamoDBEventRecord) error { return nil })
				require.NoError(t, err)
				var ev events.DynamoDBEvent
				for i := range 100 {
					pk := fmt.Sprintf("o-%d", i%tc.keys)
					ev.Records = append(ev.Records, change(fmt.Sprint(1000+i), pk, fmt.Sprint(i)))
				}
				return func(ctx context.Context) (int, int) {
					rep, err := h.Process(ctx, ev)
					require.NoError(t, err)
					return rep.Ran, rep.Replayed
				}
			})
		})
	}
}
