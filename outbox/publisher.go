package outbox

import "context"

// Publisher sends committed messages to a broker; relays call it. A relay hands it at
// most one message per ordering key per call, so a publisher may send a call's messages
// in any order or concurrently, and per-key order holds as long as it reports each
// message's outcome truly.
//
// Publish returns one error per message, nil for each one the broker accepted, in the
// order of msgs, or nil when every message was published; a slice of another length
// counts every message as failed. A message reported failed is sent again
// later, with its ordering key's later messages after it; a message reported published
// is never sent again by this relay. A message the broker took whose answer was lost
// must be reported failed: it is sent again, and the consumer deduplicates on its ID.
type Publisher interface {
	Publish(ctx context.Context, msgs []Message) []error
}

// PublisherFunc adapts a function to a [Publisher].
type PublisherFunc func(ctx context.Context, msgs []Message) []error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, msgs []Message) []error { return f(ctx, msgs) }
