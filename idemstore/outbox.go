package idemstore

import "time"

// OutboxEvent is an event a guarded handler records for the transactional outbox (package
// outbox, which names it outbox.Event): where it goes, what orders it, and what it says.
type OutboxEvent struct {
	// Destination names where a relay publishes the event: a queue URL, a topic ARN, an
	// event bus; the publisher gives it meaning.
	Destination string
	// OrderingKey orders events: a relay publishes the events of one ordering key in the
	// order they committed (an aggregate id, an account id).
	OrderingKey string
	// Type names the event for consumers ("OrderPlaced").
	Type string
	// Payload is the event's body, passed through unchanged.
	Payload []byte
	// Headers are extra attributes passed with the message.
	Headers map[string]string
}

// OutboxMessage is an event as recorded: the [OutboxEvent] with its id and origin (package
// outbox names it outbox.Message). It is an attached write: a store that supports the
// outbox commits it in the completion's transaction, conditional on the lease token like
// every attached write, and a store that does not refuses it in CheckAttached. A resent
// completion commits it once; a run whose lease was lost commits none.
type OutboxMessage struct {
	OutboxEvent
	// ID is the event's id, unique and stable: stores keep it as recorded, relays publish
	// it with the message, consumers deduplicate on it.
	ID string
	// StoredKey is the stored key of the request whose run recorded the event.
	StoredKey string
	// RecordedAt is when the event was recorded, by the producer's clock.
	RecordedAt time.Time
}

// SplitOutbox returns the outbox messages among a completion's attached writes (values of
// type [OutboxMessage]) and the other writes, each in their order: for a store that
// commits messages its own way.
func SplitOutbox(attached []any) (msgs []OutboxMessage, others []any) {
	for _, a := range attached {
		if m, ok := a.(OutboxMessage); ok {
			msgs = append(msgs, m)
			continue
		}
		others = append(others, a)
	}
	return msgs, others
}
