package outbox

import (
	"encoding/json"
)

// EnvelopeKey is the field of an [Envelope] that holds the event id: the JMESPath a
// consumer keys on, as kinesis.WithKeyJMESPath(outbox.EnvelopeKey) does for a Kinesis
// record's data, or "detail."+EnvelopeKey for an EventBridge event.
const EnvelopeKey = "idempotencyKey"

// Envelope is how a message travels to a broker that has no message attributes: it is
// the detail of an EventBridge event (outbox/ebpub) and the data of a Kinesis record
// (outbox/kinesispub). It is a JSON object that carries the event id beside the payload,
// so the consumer deduplicates on it:
//
//	{"idempotencyKey":"0193b6f0-…","type":"OrderPlaced","orderingKey":"customer-42",
//	 "headers":{"tenant":"t1"},"payload":{"order":"ord-1"}}
//
// Payload holds the payload as it is when it is JSON; otherwise PayloadBase64 holds its
// bytes (base64 in the JSON) and Payload is absent. An empty payload leaves out both. A
// message's envelope is the same bytes on every publish, so a fingerprint of it (such as
// kinesis.DataFingerprint) matches across the relay's retries.
type Envelope struct {
	IdempotencyKey string            `json:"idempotencyKey"`
	Type           string            `json:"type"`
	OrderingKey    string            `json:"orderingKey,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	Payload        json.RawMessage   `json:"payload,omitempty"`
	PayloadBase64  []byte            `json:"payloadBase64,omitempty"`
}

// NewEnvelope returns m's envelope.
func NewEnvelope(m Message) Envelope {
	e := Envelope{IdempotencyKey: m.ID, Type: m.Type, OrderingKey: m.OrderingKey, Headers: m.Headers}
	switch {
	case len(m.Payload) == 0:
	case json.Valid(m.Payload):
		e.Payload = m.Payload
	default:
		e.PayloadBase64 = m.Payload
	}
	return e
}

// Bytes returns e encoded as compact JSON, its keys in a fixed order.
func (e Envelope) Bytes() []byte {
	b, err := json.Marshal(e)
	if err != nil {
		// Only an invalid Payload can fail, and NewEnvelope keeps invalid JSON out of it;
		// a hand-built Envelope with one goes out with its payload as bytes.
		e.PayloadBase64, e.Payload = e.Payload, nil
		b, _ = json.Marshal(e)
	}
	return b
}

// Data returns the payload e carries, from Payload or PayloadBase64.
func (e Envelope) Data() []byte {
	if e.Payload != nil {
		return e.Payload
	}
	return e.PayloadBase64
}
