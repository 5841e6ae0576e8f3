package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
)

// API is the DynamoDB client idemctl uses: the store's calls, and Scan for listing. A
// *dynamodb.Client satisfies it.
type API interface {
	dynamo.API
	Scan(ctx context.Context, params *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// storeFlags names the table and its layout.
type storeFlags struct {
	table     string
	store     string
	endpoint  string
	sortKey   string
	partition string
}

// table is one idempotency table: its name, layout and attribute names (idem's defaults).
type table struct {
	api       API
	name      string
	attrs     dynamo.Attributes
	sortKey   string // with a composite key: the attribute holding the record key
	partition string // and the partition value every record has
}

// tableName returns the table the flags name: --store dynamodb://TABLE, else --table, else
// the default (IDEMPOTENCY_TABLE).
func (f *storeFlags) tableName(def string) (string, error) {
	if f.store != "" {
		if f.table != "" {
			return "", usageError("give --store or --table, not both")
		}
		u, err := url.Parse(f.store)
		switch {
		case err != nil:
			return "", usageError("--store: %v", err)
		case u.Scheme != "dynamodb":
			return "", usageError("--store %q: only dynamodb://TABLE is supported", f.store)
		case u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "":
			return "", usageError("--store %q: want dynamodb://TABLE", f.store)
		}
		return u.Host, nil
	}
	if f.table != "" {
		return f.table, nil
	}
	if def != "" {
		return def, nil
	}
	return "", usageError("name the table with --table, --store dynamodb://TABLE or IDEMPOTENCY_TABLE")
}

// options returns the store options of the table's layout.
func (t *table) options() []dynamo.Option {
	if t.sortKey == "" {
		return nil
	}
	return []dynamo.Option{dynamo.WithSortKey(t.sortKey, t.partition)}
}

// keyAttr is the attribute holding the record key.
func (t *table) keyAttr() string {
	if t.sortKey != "" {
		return t.sortKey
	}
	return t.attrs.ID
}

// read returns the record stored under key, decoded by the dynamo package, and the item as
// stored, whose values any change is conditional on. It returns nil, nil, nil when there
// is no record.
func (t *table) read(ctx context.Context, key string) (*idemstore.Record, map[string]types.AttributeValue, error) {
	return t.readCounted(ctx, key, nil)
}

// readCounted is read that, with f not nil, counts its GetItem calls and the read units
// they consumed in f.
func (t *table) readCounted(ctx context.Context, key string, f *finding) (*idemstore.Record, map[string]types.AttributeValue, error) {
	c := &capture{API: t.api, count: f}
	store, err := dynamo.New(c, t.name, t.options()...)
	if err != nil {
		return nil, nil, err
	}
	rec, err := store.Get(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	if rec == nil {
		return nil, nil, nil
	}
	return rec, c.item, nil
}

// decode reads an item returned by a Scan with the dynamo package's own decoding, so that
// a listed record reads exactly as [dynamo.Store.Get] would read it.
func (t *table) decode(ctx context.Context, item map[string]types.AttributeValue) (*idemstore.Record, error) {
	key, ok := item[t.keyAttr()].(*types.AttributeValueMemberS)
	if !ok {
		return nil, fmt.Errorf("item without a string %q attribute", t.keyAttr())
	}
	store, err := dynamo.New(&capture{item: item}, t.name, t.options()...)
	if err != nil {
		return nil, err
	}
	rec, err := store.Get(ctx, key.Value)
	if err == nil && rec == nil {
		err = errors.New("empty item")
	}
	return rec, err
}

// capture is a [dynamo.API] that keeps the item of the first GetItem: the record's. (A
// record whose result is too large for its item names another item that holds the result,
// which the store reads next.) With a nil API it answers the first GetItem with item
// itself, and any other with no item: [table.decode] uses it to decode an item it already
// has, without its result.
type capture struct {
	dynamo.API
	item  map[string]types.AttributeValue
	read  bool     // the first GetItem was made
	count *finding // if not nil, where the GetItem calls and their read units are counted
}

// GetItem calls the API (if any) and keeps the item the first call returns.
func (c *capture) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	first := !c.read
	c.read = true
	if c.API == nil {
		if !first {
			return &dynamodb.GetItemOutput{}, nil
		}
		return &dynamodb.GetItemOutput{Item: c.item}, nil
	}
	if c.count != nil {
		counted := *in
		counted.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		in = &counted
		c.count.Reads++
	}
	out, err := c.API.GetItem(ctx, in, optFns...)
	if err != nil {
		return out, err
	}
	if first {
		c.item = out.Item
	}
	if cc := out.ConsumedCapacity; c.count != nil && cc != nil && cc.CapacityUnits != nil {
		c.count.ReadUnits = aws.Float64(aws.ToFloat64(c.count.ReadUnits) + *cc.CapacityUnits)
	}
	return out, nil
}

// primaryKey returns the primary key attributes of item.
func (t *table) primaryKey(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	key := map[string]types.AttributeValue{t.attrs.ID: item[t.attrs.ID]}
	if t.sortKey != "" {
		key[t.sortKey] = item[t.sortKey]
	}
	return key
}

// unchanged returns a condition expression, with its names and values, that holds only
// while the item still has the status, lease token, lease end, checkpoint and expiry that
// shown has: the attributes idemctl showed. An attribute shown as absent must still be
// absent. A change conditional on it fails if anyone (the owner's heartbeat, checkpoint or
// completion, a new claim) wrote the record since.
func (t *table) unchanged(shown map[string]types.AttributeValue) (string, map[string]string, map[string]types.AttributeValue) {
	a := &t.attrs
	attrs := []string{a.Status, a.LeaseToken, a.InProgressExpiration, a.Checkpoint, a.Expiration}
	names := map[string]string{}
	values := map[string]types.AttributeValue{}
	var conds []string
	for i, name := range attrs {
		ph := fmt.Sprintf("#a%d", i)
		names[ph] = name
		vph := fmt.Sprintf(":v%d", i)
		switch v := shown[name].(type) {
		case nil:
			conds = append(conds, "attribute_not_exists("+ph+")")
		case *types.AttributeValueMemberNULL:
			// Read as absent, but present: NULL has no equality, so its type is tested.
			values[vph] = &types.AttributeValueMemberS{Value: "NULL"}
			conds = append(conds, "attribute_type("+ph+", "+vph+")")
		default:
			values[vph] = v
			conds = append(conds, ph+" = "+vph)
		}
	}
	return strings.Join(conds, " AND "), names, values
}
