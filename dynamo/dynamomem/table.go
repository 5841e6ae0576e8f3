package dynamomem

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/dynamo/internal/attrcheck"
)

// tables are Store's in-memory DynamoDB tables, each a map from encoded key to item.
type tables struct {
	mu sync.Mutex
	m  map[string]*table
}

// table is one table: its key schema and its items.
type table struct {
	name  string
	keys  []keyAttr // the partition key, then the sort key if any
	items map[string]map[string]types.AttributeValue
}

// keyAttr is a key attribute and its scalar type (S, N or B).
type keyAttr struct {
	name string
	typ  string
}

// get returns the table called name. The caller holds t.mu.
func (t *tables) get(name string) (*table, error) {
	tbl, ok := t.m[name]
	if !ok {
		return nil, fmt.Errorf("table %q was not created in memory (Store.CreateTable)", name)
	}
	return tbl, nil
}

// itemKey returns the encoded key of item (a full item, or only its key attributes):
// every key attribute must be there, of its declared type, not empty, and a key map
// (exact true) may hold nothing else.
func (tbl *table) itemKey(item map[string]types.AttributeValue, exact bool) (string, error) {
	var b strings.Builder
	for _, k := range tbl.keys {
		v, ok := item[k.name]
		if !ok {
			return "", fmt.Errorf("one of the required keys was not given a value: %s (table %q)", k.name, tbl.name)
		}
		if attrcheck.TypeName(v) != k.typ {
			return "", fmt.Errorf("type mismatch for key %s: expected %s, got %s (table %q)", k.name, k.typ, attrcheck.TypeName(v), tbl.name)
		}
		if err := attrcheck.KeyValue(k.name, v); err != nil {
			return "", fmt.Errorf("%w (table %q)", err, tbl.name)
		}
		s := ""
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			s = v.Value
		case *types.AttributeValueMemberN:
			n, ok := number(v.Value)
			if !ok {
				return "", fmt.Errorf("key %s: %q is not a number", k.name, v.Value)
			}
			s = formatNumber(n)
		case *types.AttributeValueMemberB:
			s = string(v.Value)
		}
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	if exact && len(item) != len(tbl.keys) {
		return "", fmt.Errorf("the provided key element does not match the schema of table %q", tbl.name)
	}
	return b.String(), nil
}

// keyOf returns the key attributes of item.
func (tbl *table) keyOf(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	key := make(map[string]types.AttributeValue, len(tbl.keys))
	for _, k := range tbl.keys {
		key[k.name] = item[k.name]
	}
	return key
}

// isKey reports whether attr is one of tbl's key attributes.
func (tbl *table) isKey(attr string) bool {
	for _, k := range tbl.keys {
		if k.name == attr {
			return true
		}
	}
	return false
}

// write is one attached write, parsed and checked against its table.
type write struct {
	table *table
	key   string // encoded
	item  map[string]types.AttributeValue
	put   bool // item replaces the stored one
	del   bool // the stored item is deleted
	upd   *update
	cond  cond // nil: none
}

// prepare parses and checks the attached writes as DynamoDB would before running them,
// against the tables that exist now. The caller holds t.mu.
func (t *tables) prepare(attached []any) ([]write, error) {
	items, err := attrcheck.AppendAttached(nil, attached, dynamo.MaxAttached)
	if err != nil {
		return nil, fmt.Errorf("dynamomem: %w", err)
	}
	ws := make([]write, len(items))
	seen := map[string]int{}
	for i, item := range items {
		w, err := t.prepareOne(item)
		if err != nil {
			return nil, fmt.Errorf("dynamomem: attached write %d: %w", i, err)
		}
		id := w.table.name + "\x00" + w.key
		if j, ok := seen[id]; ok {
			return nil, fmt.Errorf("dynamomem: attached writes %d and %d: transaction request cannot include multiple operations on one item", j, i)
		}
		seen[id] = i
		ws[i] = w
	}
	return ws, nil
}

func (t *tables) prepareOne(item types.TransactWriteItem) (write, error) {
	if err := attrcheck.Action(item); err != nil {
		return write{}, err
	}
	if err := attrcheck.Write(item); err != nil {
		return write{}, err
	}
	var (
		tableName, condExpr, updExpr *string
		names                        map[string]string
		values                       map[string]types.AttributeValue
		key                          map[string]types.AttributeValue
		w                            write
	)
	switch {
	case item.Put != nil:
		x := item.Put
		tableName, condExpr, names, values = x.TableName, x.ConditionExpression, x.ExpressionAttributeNames, x.ExpressionAttributeValues
		w.put, w.item = true, x.Item
	case item.Update != nil:
		x := item.Update
		tableName, condExpr, updExpr, names, values, key = x.TableName, x.ConditionExpression, x.UpdateExpression, x.ExpressionAttributeNames, x.ExpressionAttributeValues, x.Key
		if updExpr == nil {
			return write{}, errors.New("an Update needs an UpdateExpression")
		}
	case item.Delete != nil:
		x := item.Delete
		tableName, condExpr, names, values, key = x.TableName, x.ConditionExpression, x.ExpressionAttributeNames, x.ExpressionAttributeValues, x.Key
		w.del = true
	default:
		x := item.ConditionCheck
		tableName, condExpr, names, values, key = x.TableName, x.ConditionExpression, x.ExpressionAttributeNames, x.ExpressionAttributeValues, x.Key
		if aws.ToString(condExpr) == "" {
			return write{}, errors.New("a ConditionCheck needs a ConditionExpression")
		}
	}
	tbl, err := t.get(*tableName)
	if err != nil {
		return write{}, err
	}
	w.table = tbl
	if w.put {
		w.key, err = tbl.itemKey(w.item, false)
	} else {
		w.key, err = tbl.itemKey(key, true)
		w.item = key
	}
	if err != nil {
		return write{}, err
	}
	if condExpr == nil && updExpr == nil && (names != nil || values != nil) {
		return write{}, errors.New("ExpressionAttributeNames and ExpressionAttributeValues can only be given with expressions")
	}
	p := newParser(names, values)
	if condExpr != nil {
		if w.cond, err = p.parseCondition(*condExpr); err != nil {
			return write{}, fmt.Errorf("invalid ConditionExpression %q: %w", *condExpr, err)
		}
	}
	if updExpr != nil {
		if w.upd, err = p.parseUpdate(*updExpr); err != nil {
			return write{}, fmt.Errorf("invalid UpdateExpression %q: %w", *updExpr, err)
		}
		for _, a := range w.upd.actions {
			if tbl.isKey(a.path) {
				return write{}, fmt.Errorf("cannot update attribute %s: it is part of the key of table %q", a.path, tbl.name)
			}
		}
	}
	if err := p.unused(); err != nil {
		return write{}, err
	}
	return w, nil
}

// commitError is why a transaction of attached writes did not commit: write index's
// condition failed (cond), or DynamoDB would have refused it as a whole.
type commitError struct {
	index int
	table string
	cond  bool
	err   error
}

// commit applies ws as one transaction: every condition is checked and every new item
// computed against the items as they are, and only then is anything written.
func (t *tables) commit(ws []write) *commitError {
	t.mu.Lock()
	defer t.mu.Unlock()
	next := make([]map[string]types.AttributeValue, len(ws))
	for i, w := range ws {
		old := w.table.items[w.key]
		if w.cond != nil && !w.cond.eval(old) {
			return &commitError{index: i, table: w.table.name, cond: true}
		}
		switch {
		case w.put:
			next[i] = normalizeItem(w.item)
		case w.upd != nil:
			base := old
			if base == nil {
				base = w.table.keyOf(w.item) // an update of an absent item creates it
			}
			n, err := w.upd.apply(base)
			if err != nil {
				return &commitError{index: i, table: w.table.name, err: err}
			}
			next[i] = normalizeItem(n)
		}
	}
	for i, w := range ws {
		switch {
		case w.del:
			delete(w.table.items, w.key)
		case next[i] != nil:
			w.table.items[w.key] = next[i]
		}
	}
	return nil
}
