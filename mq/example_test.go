package mq_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/mq"
)

// message returns a RabbitMQ message as Lambda sends it: data in base64, with a messageId.
func message(id, data string) events.RabbitMQMessage {
	return events.RabbitMQMessage{
		BasicProperties: events.RabbitMQBasicProperties{MessageID: &id},
		Data:            base64.StdEncoding.EncodeToString([]byte(data)),
	}
}

// A RabbitMQ consumer: Amazon MQ takes no partial response, so a failure stops the batch
// and fails it, after recording what finished; the redelivery replays that and runs the
// rest.
func ExampleNewRabbitMQ() {
	guard, _ := idem.New(memstore.New(), "apply-order") // dynamo.New(client, table) in production
	down := true
	var applied []string
	h, _ := mq.NewRabbitMQ(guard, func(ctx context.Context, m events.RabbitMQMessage) error {
		data, err := mq.Data(m.Data)
		if err != nil {
			return err
		}
		if string(data) == "o-2" && down {
			return errors.New("downstream unavailable")
		}
		applied = append(applied, string(data))
		return nil
	})
	ev := events.RabbitMQEvent{MessagesByQueue: map[string][]events.RabbitMQMessage{
		"orders::/": {message("m1", "o-1"), message("m2", "o-2"), message("m3", "o-3")},
	}}
	err := h.Handle(context.Background(), ev)
	fmt.Println(errors.Is(err, mq.ErrBatchFailed), applied)
	down = false
	err = h.Handle(context.Background(), ev) // the broker redelivers the batch
	fmt.Println(err, applied)
	// Output:
	// true [o-1]
	// <nil> [o-1 o-2 o-3]
}

// An ActiveMQ consumer keyed by messageID, the default.
func ExampleNewActiveMQ() {
	guard, _ := idem.New(memstore.New(), "apply-order")
	runs := 0
	h, _ := mq.NewActiveMQ(guard, func(context.Context, events.ActiveMQMessage) error {
		runs++
		return nil
	})
	m := events.ActiveMQMessage{MessageID: "ID:b-1-1:1:1:1:1", Data: base64.StdEncoding.EncodeToString([]byte("o-1"))}
	ev := events.ActiveMQEvent{Messages: []events.ActiveMQMessage{m}}
	_ = h.Handle(context.Background(), ev)
	m.Redelivered = true
	rep := h.Process(context.Background(), events.ActiveMQEvent{Messages: []events.ActiveMQMessage{m}})
	fmt.Println(runs, rep.Outcomes[0].Status)
	// Output:
	// 1 replayed
}
