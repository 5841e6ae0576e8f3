// Package ebpub publishes outbox messages (package outbox) to Amazon EventBridge: an
// [outbox.Publisher] for the relays.
//
// Each message's Destination is an event bus name or ARN ("default" for the account's
// default bus). The event's detail is the message's [outbox.Envelope]: a JSON object with
// the event id under "idempotencyKey" ([outbox.EnvelopeKey]), the type, ordering key and
// headers, and the payload under "payload" (or "payloadBase64" when it is not JSON). The
// detail type is the event type; the source is the message's [SourceHeader] header when
// it has one, else the publisher's ([WithSource], default [DefaultSource]); the time is
// when the event was recorded.
//
// EventBridge gives every PutEvents entry a new event id, so a message the relay
// publishes twice (its first answer lost) arrives as two events with two ids: the
// consumer deduplicates on detail.idempotencyKey instead. A rule's pattern matches the
// payload's fields under detail.payload.
//
// Messages go out with PutEvents, up to 10 entries and 256 KiB per call (source, detail
// type, detail and time, as EventBridge counts an entry's size), calls to distinct buses
// one after another, at most one message per ordering key in a call (see
// [Publisher.Publish]). EventBridge keeps no order: a rule's targets may see a key's
// events in another order than they were published in, so a consumer that needs order
// must get it elsewhere (an SQS FIFO target with the ordering key as its message group).
//
// See https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html and
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevent-size.html.
package ebpub
