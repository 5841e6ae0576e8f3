package ebpub

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pubbatch"
	"github.com/idemkit/idem/outbox"
)

// DefaultSource is the events' source unless [WithSource] sets another.
const DefaultSource = "idem.outbox"

// SourceHeader is the message header whose value, when set, is the event's source
// instead of the publisher's.
const SourceHeader = "eventbridge-source"

// PutEvents' limits: entries per call, and bytes per call (as EventBridge counts them).
const (
	maxBatch = 10
	maxBytes = 256 * 1024
	// timeSize is what an entry's Time counts.
	timeSize = 14
)

// API is the EventBridge client operation the publisher calls; an *eventbridge.Client
// has it.
type API interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Option configures a [Publisher]. Options are applied in order by [New].
type Option func(*config) error

type config struct {
	source string
}

// WithSource sets the source of the events whose message has no [SourceHeader] header.
// Default [DefaultSource]. It must not be empty, and must not begin with "aws." (which
// EventBridge keeps for AWS's own events).
func WithSource(source string) Option {
	return func(c *config) error {
		if source == "" || strings.HasPrefix(source, "aws.") {
			return fmt.Errorf("%w: ebpub: WithSource: must not be empty or begin with \"aws.\"", idem.ErrInvalidOption)
		}
		c.source = source
		return nil
	}
}

// Publisher sends outbox messages to EventBridge. It is safe for concurrent use.
type Publisher struct {
	client API
	source string
	batch  pubbatch.Batcher
}

// New returns a Publisher sending through client. A bad option makes it return an error
// wrapping idem.ErrInvalidOption.
func New(client API, opts ...Option) (*Publisher, error) {
	cfg := config{source: DefaultSource}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	p := &Publisher{client: client, source: cfg.source}
	p.batch = pubbatch.Batcher{Name: "ebpub", MaxEntries: maxBatch, MaxBytes: maxBytes, Size: p.size, Send: p.send}
	return p, nil
}

// Publish implements [outbox.Publisher]: one PutEvents per bus and 10 messages, with at
// most one message per ordering key in a call (a key's next message goes in a later call,
// once its previous one was sent). A call that fails fails its messages (including a call
// whose answer was lost: they are sent again, and the consumer deduplicates on
// detail.idempotencyKey); an entry EventBridge answers with an error code fails alone,
// and its ordering key's later messages fail unsent.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	return p.batch.Publish(ctx, msgs)
}

// send puts msgs on bus in one call. PutEvents answers one result per entry, in the
// entries' order.
func (p *Publisher) send(ctx context.Context, _ string, msgs []outbox.Message) ([]error, error) {
	in := &eventbridge.PutEventsInput{}
	for _, m := range msgs {
		in.Entries = append(in.Entries, p.Entry(m))
	}
	out, err := p.client.PutEvents(ctx, in)
	if err != nil {
		return nil, err
	}
	return pubbatch.ByPosition(len(msgs), len(out.Entries), func(i int) (code, message *string) {
		return out.Entries[i].ErrorCode, out.Entries[i].ErrorMessage
	}), nil
}

// Entry returns the PutEvents entry for m, as the publisher sends it.
func (p *Publisher) Entry(m outbox.Message) types.PutEventsRequestEntry {
	e := types.PutEventsRequestEntry{
		EventBusName: aws.String(m.Destination),
		Source:       aws.String(p.sourceOf(m)),
		DetailType:   aws.String(m.Type),
		Detail:       aws.String(string(outbox.NewEnvelope(m).Bytes())),
	}
	if !m.RecordedAt.IsZero() {
		e.Time = aws.Time(m.RecordedAt)
	}
	return e
}

func (p *Publisher) sourceOf(m outbox.Message) string {
	if s := m.Headers[SourceHeader]; s != "" {
		return s
	}
	return p.source
}

// size is what m's entry counts against PutEvents' 256 KiB.
func (p *Publisher) size(m outbox.Message) int {
	return timeSize + len(p.sourceOf(m)) + len(m.Type) + len(outbox.NewEnvelope(m).Bytes())
}
