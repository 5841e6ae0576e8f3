package dynamo

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// The attribute names of an outbox item (see [OutboxItem]), which a relay reads from the
// outbox table's stream (NEW_IMAGE).
const (
	OutboxOrderingKeyAttr = "ordering_key" // S, partition key: the event's ordering key
	OutboxIDAttr          = "id"           // S, sort key: the event id (UUIDv7, time-ordered)
	OutboxDestinationAttr = "destination"  // S
	OutboxTypeAttr        = "type"         // S
	OutboxPayloadAttr     = "payload"      // B, absent when empty
	OutboxHeadersAttr     = "headers"      // M of S, absent when empty
	OutboxStoredKeyAttr   = "stored_key"   // S, absent when empty
	OutboxRecordedAtAttr  = "recorded_at"  // N, epoch milliseconds
	// N, the event's place among its completion's events, from 0.
	OutboxPositionAttr = "position"
	// S, the run (one completion) that recorded the event: the id of its first event.
	// Absent on items written before it existed.
	OutboxRunAttr        = "run"
	OutboxExpirationAttr = "expiration" // N, epoch seconds: the table's TTL attribute
)

// DefaultOutboxRetention is how long an outbox item stays in its table before its TTL
// (attribute [OutboxExpirationAttr]) lets DynamoDB delete it: 7 days. The relay reads the
// item from the stream, whose records last 24 hours; the item outlives them for audits and
// replays. DynamoDB's TTL deletion is a REMOVE stream record, which relays skip.
const DefaultOutboxRetention = 7 * 24 * time.Hour

// WithOutboxTable names the outbox table the store puts events in (see package outbox):
// each event recorded with outbox.Record becomes a Put of an [OutboxItem] in the
// completion's TransactWriteItems, so it commits with the record or not at all, and counts
// towards [MaxAttached]. Create the table with [OutboxTableInput] (a stream with new
// images; the relay consumes it). By default there is none, and outbox.Record is refused
// with an error wrapping idemstore.ErrInvalidAttach. The name must not be empty.
func WithOutboxTable(table string) Option {
	return func(c *config) error {
		if table == "" {
			return fmt.Errorf("%w: dynamo: WithOutboxTable: table name must not be empty", idem.ErrInvalidOption)
		}
		c.outboxTable = table
		return nil
	}
}

// OutboxItem returns the Put of m, the position-th event (from 0) of its completion, into
// the outbox table, without a run ([OutboxRunItem] with run ""): the item a writer that
// predates [OutboxRunAttr] put, whose events a relay publishes in stream order.
func OutboxItem(table string, m idemstore.OutboxMessage, position int) types.TransactWriteItem {
	return OutboxRunItem(table, m, "", position)
}

// OutboxRunItem returns the Put of m, the position-th event (from 0) of the completion run
// (the id of its first event; "" writes no [OutboxRunAttr]), into the outbox table:
// partition key the ordering key (DynamoDB Streams keeps one partition key's changes in
// one shard, so a relay reading each shard in order publishes one ordering key's events
// in commit order), sort key the event id, and the attributes the Outbox*Attr constants
// name; the TTL attribute is RecordedAt plus [DefaultOutboxRetention]. The events of one
// completion commit in one transaction, whose stream records DynamoDB does not order
// among themselves: a relay orders those of one run by [OutboxPositionAttr], the order of
// their outbox.Record calls. The run tells two runs of one stored key apart (a request
// run again after its record expired). The Put is conditional on the item being new, so
// an event is never overwritten.
func OutboxRunItem(table string, m idemstore.OutboxMessage, run string, position int) types.TransactWriteItem {
	item := map[string]types.AttributeValue{
		OutboxOrderingKeyAttr: &types.AttributeValueMemberS{Value: m.OrderingKey},
		OutboxIDAttr:          &types.AttributeValueMemberS{Value: m.ID},
		OutboxDestinationAttr: &types.AttributeValueMemberS{Value: m.Destination},
		OutboxTypeAttr:        &types.AttributeValueMemberS{Value: m.Type},
		OutboxRecordedAtAttr:  &types.AttributeValueMemberN{Value: strconv.FormatInt(m.RecordedAt.UnixMilli(), 10)},
		OutboxPositionAttr:    &types.AttributeValueMemberN{Value: strconv.Itoa(position)},
		OutboxExpirationAttr:  &types.AttributeValueMemberN{Value: strconv.FormatInt(m.RecordedAt.Add(DefaultOutboxRetention).Unix(), 10)},
	}
	if len(m.Payload) > 0 {
		item[OutboxPayloadAttr] = &types.AttributeValueMemberB{Value: m.Payload}
	}
	if run != "" {
		item[OutboxRunAttr] = &types.AttributeValueMemberS{Value: run}
	}
	if m.StoredKey != "" {
		item[OutboxStoredKeyAttr] = &types.AttributeValueMemberS{Value: m.StoredKey}
	}
	if len(m.Headers) > 0 {
		h := make(map[string]types.AttributeValue, len(m.Headers))
		for k, v := range m.Headers {
			h[k] = &types.AttributeValueMemberS{Value: v}
		}
		item[OutboxHeadersAttr] = &types.AttributeValueMemberM{Value: h}
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName:                aws.String(table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#id)"),
		ExpressionAttributeNames: map[string]string{"#id": OutboxIDAttr},
	}}
}

// OutboxMessage decodes an outbox item (an [OutboxItem]'s, as a stream's NEW_IMAGE holds
// it) back into the message: what a relay on the outbox table's stream publishes. It
// returns an error for an item without an id, ordering key, destination or type. See
// [OutboxPosition] for the event's place in its completion.
func OutboxMessage(item map[string]types.AttributeValue) (idemstore.OutboxMessage, error) {
	var m idemstore.OutboxMessage
	str := func(attr string) string {
		v, _ := item[attr].(*types.AttributeValueMemberS)
		if v == nil {
			return ""
		}
		return v.Value
	}
	m.ID, m.OrderingKey = str(OutboxIDAttr), str(OutboxOrderingKeyAttr)
	m.Destination, m.Type, m.StoredKey = str(OutboxDestinationAttr), str(OutboxTypeAttr), str(OutboxStoredKeyAttr)
	if m.ID == "" || m.OrderingKey == "" || m.Destination == "" || m.Type == "" {
		return m, fmt.Errorf("dynamo: outbox item: missing %s, %s, %s or %s", OutboxIDAttr, OutboxOrderingKeyAttr, OutboxDestinationAttr, OutboxTypeAttr)
	}
	if b, ok := item[OutboxPayloadAttr].(*types.AttributeValueMemberB); ok {
		m.Payload = b.Value
	}
	if n, ok := item[OutboxRecordedAtAttr].(*types.AttributeValueMemberN); ok {
		ms, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			return m, fmt.Errorf("dynamo: outbox item: %s: %w", OutboxRecordedAtAttr, err)
		}
		m.RecordedAt = time.UnixMilli(ms).UTC()
	}
	if h, ok := item[OutboxHeadersAttr].(*types.AttributeValueMemberM); ok && len(h.Value) > 0 {
		m.Headers = make(map[string]string, len(h.Value))
		for k, v := range h.Value {
			if s, ok := v.(*types.AttributeValueMemberS); ok {
				m.Headers[k] = s.Value
			}
		}
	}
	return m, nil
}

// OutboxPosition returns an outbox item's [OutboxPositionAttr]: the event's place among its
// completion's events, from 0; 0 when the item has none.
func OutboxPosition(item map[string]types.AttributeValue) int {
	n, ok := item[OutboxPositionAttr].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	p, err := strconv.Atoi(n.Value)
	if err != nil {
		return 0
	}
	return p
}

// OutboxRun returns an outbox item's [OutboxRunAttr]: the run that recorded the event;
// "" when the item has none.
func OutboxRun(item map[string]types.AttributeValue) string {
	s, ok := item[OutboxRunAttr].(*types.AttributeValueMemberS)
	if !ok {
		return ""
	}
	return s.Value
}

// OutboxTableInput returns the input that creates an outbox table named table: key
// [OutboxOrderingKeyAttr] (hash) and [OutboxIDAttr] (range), on-demand billing, and a
// stream of new images for the relay. Pass it to a *dynamodb.Client's CreateTable (or
// dynamomem's); then enable TTL on [OutboxExpirationAttr] (see [EnableOutboxTTL]).
func OutboxTableInput(table string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName: aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(OutboxOrderingKeyAttr), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(OutboxIDAttr), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(OutboxOrderingKeyAttr), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(OutboxIDAttr), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
		StreamSpecification: &types.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: types.StreamViewTypeNewImage,
		},
	}
}

// OutboxTTLAPI is the client operation [EnableOutboxTTL] calls; a *dynamodb.Client has it.
type OutboxTTLAPI interface {
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// EnableOutboxTTL turns on TTL deletion of the outbox table's items on
// [OutboxExpirationAttr], so that published events leave the table after
// [DefaultOutboxRetention].
func EnableOutboxTTL(ctx context.Context, client OutboxTTLAPI, table string) error {
	_, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(OutboxExpirationAttr),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		return fmt.Errorf("dynamo: EnableOutboxTTL: %w", err)
	}
	return nil
}

// errNoOutbox is the refusal of an outbox message by a store without an outbox table.
var errNoOutbox = fmt.Errorf("an outbox event (outbox.Record) needs the store's outbox table: use dynamo.WithOutboxTable")

// withOutbox returns attached with each outbox message replaced by its Put into the
// store's outbox table ([OutboxItem]).
func (s *Store) withOutbox(attached []any) ([]any, error) {
	return OutboxWrites(s.cfg.outboxTable, attached)
}

// OutboxWrites returns attached, one completion's writes, with each outbox message (an
// idemstore.OutboxMessage, as outbox.Record attaches) replaced by its Put into the outbox
// table ([OutboxRunItem], the run named by the first message's id); other writes are
// kept as they are. It returns attached itself when there is no message, and an
// error for a message when table is empty. Package dynamomem uses it.
func OutboxWrites(table string, attached []any) ([]any, error) {
	n := -1
	for i, a := range attached {
		if _, ok := a.(idemstore.OutboxMessage); ok {
			n = i
			break
		}
	}
	if n < 0 {
		return attached, nil
	}
	out := make([]any, len(attached))
	run := attached[n].(idemstore.OutboxMessage).ID
	position := 0
	for i, a := range attached {
		m, ok := a.(idemstore.OutboxMessage)
		if !ok {
			out[i] = a
			continue
		}
		if table == "" {
			return nil, fmt.Errorf("attached write %d: %w", i, errNoOutbox)
		}
		out[i] = OutboxRunItem(table, m, run, position)
		position++
	}
	return out, nil
}
