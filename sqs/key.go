package sqs

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
)

// KeyAttribute is the message attribute that carries a producer's idempotency key. Its
// name matches the HTTP header of the same purpose, so one key can follow a request from an
// API into a queue; like a header name, it is matched in any case, because HTTP APIs
// deliver header names in lower case (idempotency-key) and a producer may copy what it
// received. It must carry a string value (data type String or Number, with or without a
// custom label), not a binary one.
const KeyAttribute = "Idempotency-Key"

// System attributes (events.SQSMessage.Attributes) this package reads.
const (
	attrDeduplicationID = "MessageDeduplicationId"
	attrGroupID         = "MessageGroupId"
)

// DefaultKey returns the idempotency key of m, from the first of these that is present:
//
//  1. the [KeyAttribute] message attribute, set by the producer: the right choice when one
//     logical request may be sent more than once (a retried send, a replayed upstream event);
//  2. the MessageDeduplicationId of a FIFO message, which SQS itself uses to drop duplicate
//     sends for five minutes; the key extends that window to the guard's expiry. With
//     content-based deduplication the ID is a hash of the body, so two sends of the same
//     body within the expiry count as one: if they are distinct requests, give them a
//     [KeyAttribute] or key by message ID with [WithKey];
//  3. the message ID, which stays the same across redeliveries of one message, so a message
//     redelivered after a timeout or a lost batch response is not processed twice.
//
// The [KeyAttribute] attribute is matched in any case. A producer that meant to set a key
// never has its messages silently keyed by message ID instead: an attribute that is present
// but empty yields [idem.ErrMissingKey]; one without a string value, or two spellings of
// the name carrying different values, yield [idem.ErrInvalidKey]. The [Handler] reports
// such a message as a batch item failure with [ReasonKey].
func DefaultKey(m events.SQSMessage) (string, error) {
	key, found, err := keyAttribute(m.MessageAttributes)
	if found || err != nil {
		return key, err
	}
	if id := m.Attributes[attrDeduplicationID]; id != "" {
		return id, nil
	}
	return m.MessageId, nil
}

// keyAttribute returns the value of the [KeyAttribute] attribute, whose name is matched in
// any case, and whether there is one.
func keyAttribute(attrs map[string]events.SQSMessageAttribute) (key string, found bool, err error) {
	var names []string
	for name := range attrs {
		if strings.EqualFold(name, KeyAttribute) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "", false, nil
	}
	slices.Sort(names) // the same error whatever the map's order
	for _, name := range names {
		if a := attrs[name]; a.StringValue == nil {
			return "", true, fmt.Errorf("%w: %s message attribute of data type %q has no string value", idem.ErrInvalidKey, name, a.DataType)
		}
	}
	key = *attrs[names[0]].StringValue
	for _, name := range names[1:] {
		if *attrs[name].StringValue != key {
			return "", true, fmt.Errorf("%w: message attributes %s and %s carry different values", idem.ErrInvalidKey, names[0], name)
		}
	}
	if key == "" {
		return "", true, fmt.Errorf("%w: %s message attribute is empty", idem.ErrMissingKey, names[0])
	}
	return key, true, nil
}

// BodyFingerprint returns the message body as the fingerprint: a key seen again with a
// different body fails with [idem.ErrPayloadMismatch]. It never fails.
func BodyFingerprint(m events.SQSMessage) ([]byte, error) {
	return []byte(m.Body), nil
}
