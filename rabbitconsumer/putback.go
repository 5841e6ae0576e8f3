package rabbitconsumer

import (
	"context"
	"errors"
	"maps"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// putBackTimeout bounds how long a put-back copy waits for the broker's confirm before the
// original is nacked with requeue instead.
const putBackTimeout = 30 * time.Second

// Headers that carry, on a put-back copy, what the default exchange changes or the broker
// would refuse: the original's exchange and routing key, and its user-id property (the
// broker refuses a publish whose user-id is not the publishing connection's user). They are
// restored on delivery, before the key is chosen and the handler runs.
const (
	headerExchange   = "x-rabbitconsumer-exchange"
	headerRoutingKey = "x-rabbitconsumer-routing-key"
	headerUserID     = "x-rabbitconsumer-user-id"
)

// headerDeliveryCount is the header a quorum queue sets to the number of earlier deliveries:
// the broker's, not copied onto a put-back copy.
const headerDeliveryCount = "x-delivery-count"

// errPutBackNacked means the broker refused a put-back copy (a full queue with
// x-overflow reject-publish, say).
var errPutBackNacked = errors.New("rabbitconsumer: the broker nacked the put-back copy")

// afterPutBack, when set (by tests), runs after a put-back copy is confirmed and before the
// original is acknowledged: where a consumer that crashes leaves both.
var afterPutBack atomic.Pointer[func()]

// putBack puts d back on the queue without spending its delivery count: it publishes a copy
// on ch (in confirm mode) to the queue through the default exchange, and acknowledges d once
// the broker confirms the copy. When the copy cannot be had, d is nacked with requeue, which
// a quorum queue counts. A consumer that dies between the confirm and the acknowledgement
// leaves both, and the copy that comes second replays (or shares the first's outcome in a
// batch): one key.
func (c *Consumer) putBack(ctx context.Context, ch *amqp.Channel, d amqp.Delivery) error {
	err := c.publishCopy(ctx, ch, d)
	if err == nil {
		if f := afterPutBack.Load(); f != nil {
			(*f)()
		}
		return d.Ack(false)
	}
	// The channel closed (the broker requeues d then, and this nack fails), the broker
	// refused the copy, or no confirm came in time (the copy may yet land: a duplicate
	// that replays).
	if nerr := d.Nack(false, true); nerr != nil {
		return nerr
	}
	return nil
}

// publishCopy publishes a copy of d to the queue and waits for the broker's confirm.
func (c *Consumer) publishCopy(ctx context.Context, ch *amqp.Channel, d amqp.Delivery) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), putBackTimeout)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", c.queue, false, false, copyOf(d))
	if err != nil {
		return err
	}
	if dc == nil {
		return errors.New("rabbitconsumer: the channel is not in confirm mode")
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return errPutBackNacked
	}
	return nil
}

// copyOf returns the publishing that puts d back: its body, message ID, headers and
// properties, with its exchange, routing key and user-id kept in headers (see
// [restored]), and without the broker's delivery count.
func copyOf(d amqp.Delivery) amqp.Publishing {
	h := maps.Clone(d.Headers)
	if h == nil {
		h = amqp.Table{}
	}
	delete(h, headerDeliveryCount)
	if _, ok := h[headerExchange]; !ok { // a copy of a copy keeps the first
		h[headerExchange], h[headerRoutingKey] = d.Exchange, d.RoutingKey
	}
	if d.UserId != "" {
		h[headerUserID] = d.UserId
	}
	return amqp.Publishing{
		Headers: h, ContentType: d.ContentType, ContentEncoding: d.ContentEncoding,
		DeliveryMode: d.DeliveryMode, Priority: d.Priority, CorrelationId: d.CorrelationId,
		ReplyTo: d.ReplyTo, Expiration: d.Expiration, MessageId: d.MessageId,
		Timestamp: d.Timestamp, Type: d.Type, AppId: d.AppId, Body: d.Body,
	}
}

// restored returns d as it was first delivered when it is a put-back copy: its exchange,
// routing key and user-id back from the headers [copyOf] set, and those headers removed.
func restored(d amqp.Delivery) amqp.Delivery {
	ex, ok := d.Headers[headerExchange].(string)
	if !ok {
		return d
	}
	h := maps.Clone(d.Headers)
	d.Exchange = ex
	if rk, ok := h[headerRoutingKey].(string); ok {
		d.RoutingKey = rk
	}
	if uid, ok := h[headerUserID].(string); ok {
		d.UserId = uid
	}
	delete(h, headerExchange)
	delete(h, headerRoutingKey)
	delete(h, headerUserID)
	if len(h) == 0 {
		h = nil
	}
	d.Headers = h
	return d
}
