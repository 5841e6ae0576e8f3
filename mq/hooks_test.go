package mq_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/mq"
)

// TestOnBatchAndLogsNameMessageIDs: the guard's OnBatch hook and the log lines name the
// messages by their message IDs (or their place in the queue), never by a key from the
// data.
func TestOnBatchAndLogsNameMessageIDs(t *testing.T) {
	t.Parallel()
	const secret = "o-e2" // the order ID the key function reads from the data
	var (
		mu    sync.Mutex
		got   []idem.BatchEvent
		lines strings.Builder
	)
	hooks := idem.Hooks{OnBatch: func(_ context.Context, e idem.BatchEvent) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e)
	}}
	logger := slog.New(slog.NewJSONHandler(&lines, nil))
	g, err := idem.New(memstore.New(), "hooks", idem.WithHooks(hooks), idem.WithLogger(logger))
	require.NoError(t, err)
	l := &ledger{fail: map[string]bool{"e2": true}}
	orderID := func(m events.RabbitMQMessage) (string, error) {
		b, err := mq.Data(m.Data)
		if err != nil {
			return "", err
		}
		var v struct {
			OrderID string `json:"order_id"`
		}
		return v.OrderID, json.Unmarshal(b, &v)
	}
	h, err := mq.NewRabbitMQ(g, l.rabbit, mq.WithRabbitMQKey(orderID))
	require.NoError(t, err)
	var ev events.RabbitMQEvent
	load(t, "rabbitmq-three-messages", &ev)
	ev.MessagesByQueue["orders::/"][2].BasicProperties.MessageID = nil
	require.ErrorIs(t, h.Handle(lambdaContext(t), ev), mq.ErrBatchFailed)

	require.Len(t, got, 1)
	e := got[0]
	assert.True(t, e.FIFO, "processed in queue order")
	assert.Equal(t, "rabbitmq", e.System)
	assert.Equal(t, "orders", e.Destination, "the queue")
	var ids, sts []string
	for _, it := range e.Items {
		ids, sts = append(ids, it.ID), append(sts, it.Status+"/"+it.Reason)
	}
	assert.Equal(t, []string{"msg-e1", "msg-e2", "orders::/#2"}, ids)
	assert.Equal(t, []string{"ran/", "failed/handler", "failed/group_stopped"}, sts)
	dump, err := json.Marshal(e.Items)
	require.NoError(t, err)
	assert.NotContains(t, string(dump), secret)
	assert.NotContains(t, lines.String(), secret)
	assert.Contains(t, lines.String(), `"msg":"rabbitmq: message failed","message_id":"msg-e2","stored_key":"`)
	assert.Contains(t, lines.String(), `"msg":"rabbitmq: batch processed","messages":3,"ordered":true`)
}
