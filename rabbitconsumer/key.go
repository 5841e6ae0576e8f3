package rabbitconsumer

import (
	"fmt"
	"strconv"

	amqp "github.com/rabbitmq/amqp091-go"
)

// keyOf returns d's idempotency key: the key function's if set, else its message ID, else
// the key header's value; [ErrMissingKey] if none. A key function that panics returns an
// error wrapping [ErrKeyPanic] instead, so the message is dead-lettered like one whose
// key function failed, rather than crash the process at each redelivery.
func (c *Consumer) keyOf(d amqp.Delivery) (key string, err error) {
	if c.cfg.key != nil {
		defer func() {
			if p := recover(); p != nil {
				key, err = "", fmt.Errorf("%w: %v", ErrKeyPanic, p)
			}
		}()
		return c.cfg.key(d)
	}
	if d.MessageId != "" {
		return d.MessageId, nil
	}
	if c.cfg.keyHeader == "" {
		return "", ErrMissingKey
	}
	switch v := d.Headers[c.cfg.keyHeader].(type) {
	case nil:
		return "", fmt.Errorf("%w: header %q is absent", ErrMissingKey, c.cfg.keyHeader)
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	default:
		return "", fmt.Errorf("%w: header %q holds a %T, want a string", ErrMissingKey, c.cfg.keyHeader, v)
	}
}

// itemID names d in logs and hooks: its message ID, or "delivery-tag-<n>" without one.
func itemID(d amqp.Delivery) string {
	if d.MessageId != "" {
		return d.MessageId
	}
	return "delivery-tag-" + strconv.FormatUint(d.DeliveryTag, 10)
}
