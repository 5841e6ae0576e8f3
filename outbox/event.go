package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// IDAttribute is the message attribute (SQS, SNS) or header (Kafka) that carries an
// event's [Message.ID] to the consumer. It is the name package sqs reads a message's
// idempotency key from by default, so a consumer wrapped with sqs.New deduplicates on the
// event id without configuration. Where a broker has no attributes (EventBridge,
// Kinesis) the id travels in the message's [Envelope], under [EnvelopeKey].
const IDAttribute = "Idempotency-Key"

// TypeAttribute is the message attribute (SQS), header (Kafka) or field that carries an
// event's Type to the consumer, as publishers set it.
const TypeAttribute = "Event-Type"

// ReservedHeader reports whether name, compared without regard to case, is one that
// publishers set themselves ([IDAttribute], [TypeAttribute]): [Record] refuses an event
// with a header so named, so that no header replaces the id or type a consumer reads.
// Publishers set their own attributes after an event's headers, so that even a stored
// event that escaped Record's check cannot replace them; a publisher that sets another
// attribute of its own should have its name reserved here.
func ReservedHeader(name string) bool {
	return strings.EqualFold(name, IDAttribute) || strings.EqualFold(name, TypeAttribute)
}

// Event is what a handler records: where it goes (Destination, required), what orders it
// (OrderingKey: the events of one ordering key are published in the order they committed;
// empty means unordered, and the event's ID becomes its ordering key), what it is (Type,
// required), its body (Payload, passed through unchanged) and extra attributes (Headers;
// none may have a name [ReservedHeader] reports, such as [IDAttribute] or [TypeAttribute],
// which publishers set; a header with an empty value is kept, but sqspub and snspub leave
// it out of the message attributes, which SQS and SNS refuse empty).
type Event = idemstore.OutboxEvent

// Message is an event as recorded: the [Event] with its ID (a UUID of version 7, drawn
// when the event was recorded and stored with it, so every relay and every retry of a
// publish sends the same id; the consumer's idempotency key), the StoredKey of the request
// whose run recorded it (see idem.StoredKey) and RecordedAt, the producer's clock at
// [Record]. Stores commit it; relays hand it to a [Publisher].
type Message = idemstore.OutboxMessage

// Errors [Record] returns for an event it refuses, wrapped with the field at fault.
var (
	// ErrInvalidEvent is wrapped by the error of an event without a destination or type,
	// or with a header whose name is reserved ([ReservedHeader]).
	ErrInvalidEvent = errors.New("outbox: invalid event")
)

// Record records e in the outbox of the guarded run ctx belongs to, and returns its id:
// the event commits with the run's completion, in the same transaction, or not at all (a
// handler error, a crash, a lost lease). It attaches a [Message] with idem.Attach, so the
// guard's store decides how it commits (see the package documentation); a store that
// cannot commit it with the record refuses here, with an error wrapping
// idemstore.ErrInvalidAttach (Redis: redisstore.ErrAttachUnsupported).
//
// Outside a guarded handler, or after it returned, the error wraps [idem.ErrNoLease].
// An event without a destination or type, or with a header whose name is reserved
// ([ReservedHeader]: [IDAttribute], [TypeAttribute], in any case), is refused with
// [ErrInvalidEvent]. Record is safe for concurrent use; events of one run
// commit in the order of their Record calls.
func Record(ctx context.Context, e Event) (string, error) {
	if err := check(e); err != nil {
		return "", err
	}
	id, err := newID(time.Now())
	if err != nil {
		return "", fmt.Errorf("outbox: Record: %w", err)
	}
	m := Message{OutboxEvent: e, ID: id, StoredKey: idem.StoredKey(ctx), RecordedAt: time.Now()}
	if m.OrderingKey == "" {
		m.OrderingKey = id
	}
	if len(e.Headers) > 0 {
		m.Headers = make(map[string]string, len(e.Headers))
		for k, v := range e.Headers {
			m.Headers[k] = v
		}
	}
	if err := idem.Attach(ctx, m); err != nil {
		return "", fmt.Errorf("outbox: Record: %w", err)
	}
	return id, nil
}

func check(e Event) error {
	switch {
	case e.Destination == "":
		return fmt.Errorf("%w: no Destination", ErrInvalidEvent)
	case e.Type == "":
		return fmt.Errorf("%w: no Type", ErrInvalidEvent)
	}
	for k := range e.Headers {
		if ReservedHeader(k) {
			return fmt.Errorf("%w: header %s is the publisher's", ErrInvalidEvent, k)
		}
	}
	return nil
}
