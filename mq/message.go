package mq

import (
	"encoding/base64"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
)

// ActiveMQMessageID returns the message's messageID, the default key of an ActiveMQ
// message; [ErrMissingMessageID] if it has none.
func ActiveMQMessageID(m events.ActiveMQMessage) (string, error) {
	if m.MessageID == "" {
		return "", ErrMissingMessageID
	}
	return m.MessageID, nil
}

// RabbitMQMessageID returns the message's basicProperties.messageId, the default key of a
// RabbitMQ message; [ErrMissingMessageID] if it has none, since RabbitMQ's messageId is
// optional.
func RabbitMQMessageID(m events.RabbitMQMessage) (string, error) {
	if m.BasicProperties.MessageID == nil || *m.BasicProperties.MessageID == "" {
		return "", ErrMissingMessageID
	}
	return *m.BasicProperties.MessageID, nil
}

// Data decodes a message's data, which Lambda sends in base64 for both brokers.
func Data(data string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, fmt.Errorf("mq: data: %w", err)
	}
	return b, nil
}
