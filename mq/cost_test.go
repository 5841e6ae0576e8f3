package mq_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/mq"
)

// TestCostOnDynamoDB counts the DynamoDB calls (DynamoDB Local) of an ActiveMQ batch of
// 100 new messages of one queue: ⌈100/25⌉ claim calls; each message but the last is
// recorded (one UpdateItem) before the next starts, so a failure found when recording stops
// the queue there (batch.Mode.RecordBeforeNext); the last is recorded in one batch
// completion: 104 calls, where a per-message idempotent handler makes 200. The same batch delivered again (the broker's
// redelivery after a failure) replays in its claim calls: 4, and one read of the records
// they met.
func TestCostOnDynamoDB(t *testing.T) {
	t.Parallel()
	// 4 batch claims, 99 messages recorded before the next starts, the last in one batch
	// completion.
	adaptertest.Cost(t, 100, map[string]int{"BatchExecuteStatement": 5, "UpdateItem": 99}, func(t *testing.T, guard *idem.Guard) func(context.Context) (int, int) {
		h, err := mq.NewActiveMQ(guard, func(context.Context, events.ActiveMQMessage) error { return nil })
		require.NoError(t, err)
		var ev events.ActiveMQEvent
		for i := range 100 {
			ev.Messages = append(ev.Messages, events.ActiveMQMessage{
				MessageID: fmt.Sprintf("ID:m-%03d", i), Destination: events.ActiveMQDestination{PhysicalName: "orders"},
				Data: base64.StdEncoding.EncodeToString(fmt.Appendf(nil, `{"n":%d}`, i)),
			})
		}
		return func(ctx context.Context) (int, int) {
			rep := h.Process(ctx, ev)
			require.NoError(t, rep.Err())
			return rep.Ran, rep.Replayed
		}
	})
}
