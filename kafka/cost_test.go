package kafka_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/kafka"
)

// TestCostOnDynamoDB counts the DynamoDB calls (DynamoDB Local) of a batch of 100 new
// records over 4 partitions, each record with a key of its own: ⌈100/25⌉ claim calls and
// ⌈100/25⌉ completion calls, 8 in all, where a per-record idempotent handler makes 200. (A
// record followed in its partition by another of its key is recorded alone before that one
// starts: one UpdateItem each, see batch.Mode.RecordBeforeNext.) The same batch delivered again
// replays in its claim calls (4, and one read of the records they met): no completion,
// no single-item call.
func TestCostOnDynamoDB(t *testing.T) {
	t.Parallel()
	adaptertest.Cost(t, 100, map[string]int{"BatchExecuteStatement": 8}, func(t *testing.T, guard *idem.Guard) func(context.Context) (int, int) {
		h, err := kafka.New(guard, func(context.Context, events.KafkaRecord) error { return nil })
		require.NoError(t, err)
		ev := events.KafkaEvent{EventSource: "aws:kafka", Records: map[string][]events.KafkaRecord{}}
		for i := range 100 {
			p := int64(i % 4)
			tp := fmt.Sprintf("orders-%d", p)
			ev.Records[tp] = append(ev.Records[tp], events.KafkaRecord{
				Topic: "orders", Partition: p, Offset: int64(i / 4),
				Key:   base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "acct-%d", i)),
				Value: base64.StdEncoding.EncodeToString(fmt.Appendf(nil, `{"n":%d}`, i)),
			})
		}
		return func(ctx context.Context) (int, int) {
			rep, err := h.Process(ctx, ev)
			require.NoError(t, err)
			return rep.Ran, rep.Replayed
		}
	})
}
