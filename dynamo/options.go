package dynamo

import (
	"cmp"
	"fmt"

	"github.com/idemkit/idem"
)

// Attributes names the attributes of a record item. The defaults ([DefaultAttributes]) are
// those of the Powertools for AWS Lambda idempotency utilities, so a table can be shared
// with functions written in other languages.
type Attributes struct {
	// ID is the partition key: the record key, or with [WithSortKey] the static partition
	// value. Default "id".
	ID string
	// Status holds the record's [idemstore.Status]. Default "status".
	Status string
	// Expiration holds when the record stops counting, in epoch seconds; it should be the
	// table's TTL attribute. Default "expiration".
	Expiration string
	// InProgressExpiration holds when the current lease ends, in epoch milliseconds.
	// Default "in_progress_expiration".
	InProgressExpiration string
	// Validation holds the request fingerprint hash. Default "validation".
	Validation string
	// Data holds the stored result: a string for plain JSON, binary otherwise. Default
	// "data".
	Data string
	// DataRef holds, instead of Data, the key of the item that holds the result when the
	// result is too large for a record of 1 KB (see [Store.Complete]). Default "data_ref".
	DataRef string
	// LeaseToken holds the lease owner's token. Default "lease_token".
	LeaseToken string
	// Checkpoint holds the owner's last progress marker. Default "checkpoint".
	Checkpoint string
	// CheckpointSeq holds the number of the checkpoint ([idemstore.Record.CheckpointSeq]),
	// absent (read as 0) until the first numbered checkpoint. Default "checkpoint_seq".
	CheckpointSeq string
	// Version holds the record schema version. Default "v".
	Version string
	// Encoding holds the result encoding, such as "json" or "json+gzip". Default "enc".
	Encoding string
}

// DefaultAttributes returns the default attribute names.
func DefaultAttributes() Attributes {
	return Attributes{
		ID:                   "id",
		Status:               "status",
		Expiration:           "expiration",
		InProgressExpiration: "in_progress_expiration",
		Validation:           "validation",
		Data:                 "data",
		DataRef:              "data_ref",
		LeaseToken:           "lease_token",
		Checkpoint:           "checkpoint",
		CheckpointSeq:        "checkpoint_seq",
		Version:              "v",
		Encoding:             "enc",
	}
}

// fields lists the attribute names with the field names used in error messages.
func (a *Attributes) fields() []struct{ field, name string } {
	return []struct{ field, name string }{
		{"ID", a.ID}, {"Status", a.Status}, {"Expiration", a.Expiration},
		{"InProgressExpiration", a.InProgressExpiration}, {"Validation", a.Validation},
		{"Data", a.Data}, {"DataRef", a.DataRef}, {"LeaseToken", a.LeaseToken}, {"Checkpoint", a.Checkpoint},
		{"CheckpointSeq", a.CheckpointSeq},
		{"Version", a.Version}, {"Encoding", a.Encoding},
	}
}

// Option configures a [Store] or [CreateTable]. Options are applied in order.
type Option func(*config) error

type config struct {
	attrs Attributes
	// inlineLimit is the largest record item that keeps its result inline.
	inlineLimit int
	// sortKey, when set, names the sort key attribute that holds the record key; the
	// partition key then holds partitionValue.
	sortKey        string
	partitionValue string
	// outboxTable names the table outbox messages are put in; "": none (WithOutboxTable).
	outboxTable string
}

func newConfig(opts []Option) (config, error) {
	c := config{attrs: DefaultAttributes(), inlineLimit: DefaultInlineLimit}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&c); err != nil {
			return config{}, err
		}
	}
	if err := c.validate(); err != nil {
		return config{}, err
	}
	return c, nil
}

// validate checks what single options cannot: that no two attributes share a name.
func (c *config) validate() error {
	seen := make(map[string]string)
	for _, f := range c.attrs.fields() {
		if prev, ok := seen[f.name]; ok {
			return fmt.Errorf("%w: dynamo: WithAttributes: %s and %s both name attribute %q", idem.ErrInvalidOption, prev, f.field, f.name)
		}
		seen[f.name] = f.field
	}
	if prev, ok := seen[c.sortKey]; ok && c.sortKey != "" {
		return fmt.Errorf("%w: dynamo: WithSortKey: attribute %q is already used for %s", idem.ErrInvalidOption, c.sortKey, prev)
	}
	return nil
}

// WithAttributes sets the attribute names of record items. Fields left empty keep their
// defaults (see [DefaultAttributes]); no two attributes may share a name. Pass the same
// option to [CreateTable] so the table's key and TTL attribute match.
func WithAttributes(a Attributes) Option {
	return func(c *config) error {
		d := DefaultAttributes()
		c.attrs = Attributes{
			ID:                   cmp.Or(a.ID, d.ID),
			Status:               cmp.Or(a.Status, d.Status),
			Expiration:           cmp.Or(a.Expiration, d.Expiration),
			InProgressExpiration: cmp.Or(a.InProgressExpiration, d.InProgressExpiration),
			Validation:           cmp.Or(a.Validation, d.Validation),
			Data:                 cmp.Or(a.Data, d.Data),
			DataRef:              cmp.Or(a.DataRef, d.DataRef),
			LeaseToken:           cmp.Or(a.LeaseToken, d.LeaseToken),
			Checkpoint:           cmp.Or(a.Checkpoint, d.Checkpoint),
			CheckpointSeq:        cmp.Or(a.CheckpointSeq, d.CheckpointSeq),
			Version:              cmp.Or(a.Version, d.Version),
			Encoding:             cmp.Or(a.Encoding, d.Encoding),
		}
		return nil
	}
}

// WithSortKey stores records in a table with a composite primary key, as in a single-table
// design: every record's partition key ([Attributes.ID], default "id") holds
// partitionValue, and the sort key attribute sortKeyAttr holds the record key. The
// Powertools utilities use the same layout with a partition value such as
// "idempotency#<function name>". By default there is no sort key and the partition key holds
// the record key. Both arguments must be non-empty. Pass the same option to [CreateTable].
func WithSortKey(sortKeyAttr, partitionValue string) Option {
	return func(c *config) error {
		if sortKeyAttr == "" {
			return fmt.Errorf("%w: dynamo: WithSortKey: sort key attribute must not be empty", idem.ErrInvalidOption)
		}
		if partitionValue == "" {
			return fmt.Errorf("%w: dynamo: WithSortKey: partition value must not be empty", idem.ErrInvalidOption)
		}
		c.sortKey, c.partitionValue = sortKeyAttr, partitionValue
		return nil
	}
}

// DefaultInlineLimit is the default of [WithInlineLimit]: 1 KB, one write unit.
const DefaultInlineLimit = 1024

// WithInlineLimit sets the size in bytes, as DynamoDB counts it, up to which a completed
// record's item holds its result; a result that would make it larger is kept in an item
// of its own (see [Store.Complete]). Default [DefaultInlineLimit], 1 KB: a replay, whose
// claim fails on the record and is billed one write unit per KB of it, then costs one
// write unit plus the read of the result, at one round trip more to store and to replay
// such results. A higher limit keeps more results inline, at two round trips for a new
// key and one for a replay, and makes replays of results up to the limit cost one write
// unit per KB; 409600 (DynamoDB's item size limit) keeps every result inline. It must be
// between 1024 and 409600.
func WithInlineLimit(bytes int) Option {
	return func(c *config) error {
		if bytes < DefaultInlineLimit || bytes > maxItemSize {
			return fmt.Errorf("%w: dynamo: WithInlineLimit: %d bytes, must be between %d and %d", idem.ErrInvalidOption, bytes, DefaultInlineLimit, maxItemSize)
		}
		c.inlineLimit = bytes
		return nil
	}
}
