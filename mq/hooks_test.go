package mq_test

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/mq"
)

// TestOnBatchAndLogsNameMessageIDs: the guard's OnBatch hook and the log lines name the
// messages by their message IDs (or their place in the queue), never by a key from the
// data.
func TestOnBatchAndLogsNameMessageIDs(t *testing.T) {
	t.Parallel()
	const secret = "o-e2" // the order ID the key function reads from the data
	obs := adaptertest.Observe(t, "hooks")
	g := obs.Guard
	l := newLedger("e2")
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
	require.ErrorIs(t, h.Handle(adaptertest.Context(t), ev), mq.ErrBatchFailed)

	got := obs.Events()
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
	obs.NoSecret(t, secret)
	assert.Contains(t, obs.Lines(), `"msg":"rabbitmq: message failed","message_id":"msg-e2","stored_key":"`)
	assert.Contains(t, obs.Lines(), `"msg":"rabbitmq: batch processed","messages":3,"ordered":true`)
}
