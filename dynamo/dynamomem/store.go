package dynamomem

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// Store is an in-memory stand-in for [dynamo.Store]: records as in [memstore.Store], and
// attached types.TransactWriteItem values applied to tables made with [Store.CreateTable],
// in one transaction with the completion. The package documentation lists what it
// evaluates and what it refuses.
//
// The zero value is ready to use. A Store must not be copied after first use. It is safe
// for concurrent use.
type Store struct {
	memstore.Store // the records; its Complete runs the attached writes under its lock
	tables         tables
}

// New returns an empty Store; new(Store) and a Store's zero value do as well.
func New() *Store { return new(Store) }

// CreateTable creates an in-memory table from the same input that creates it in DynamoDB
// (a *dynamodb.Client's method has this signature, so test setup can take either): its
// name, its key schema and the key attributes' types. Other settings are ignored. A table
// that exists already is an error wrapping a types.ResourceInUseException.
func (m *Store) CreateTable(_ context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	name := aws.ToString(in.TableName)
	if !validTableName(name) {
		return nil, fmt.Errorf("dynamomem: CreateTable: invalid table name %q: table names are 3 to 255 characters of a-z, A-Z, 0-9, '_', '-' and '.'", name)
	}
	attrTypes := map[string]string{}
	for _, d := range in.AttributeDefinitions {
		attrTypes[aws.ToString(d.AttributeName)] = string(d.AttributeType)
	}
	var keys []keyAttr
	for _, want := range []string{"HASH", "RANGE"} {
		for _, k := range in.KeySchema {
			if string(k.KeyType) != want {
				continue
			}
			attr := aws.ToString(k.AttributeName)
			typ, ok := attrTypes[attr]
			if !ok {
				return nil, fmt.Errorf("dynamomem: CreateTable %s: key attribute %s has no AttributeDefinition", name, attr)
			}
			keys = append(keys, keyAttr{name: attr, typ: typ})
		}
	}
	if len(keys) == 0 || len(keys) != len(in.KeySchema) {
		return nil, fmt.Errorf("dynamomem: CreateTable %s: the KeySchema needs one HASH key and at most one RANGE key", name)
	}
	m.tables.mu.Lock()
	defer m.tables.mu.Unlock()
	if m.tables.m == nil {
		m.tables.m = map[string]*table{}
	}
	if _, ok := m.tables.m[name]; ok {
		return nil, fmt.Errorf("dynamomem: CreateTable: %w", &types.ResourceInUseException{Message: aws.String("Table already exists: " + name)})
	}
	m.tables.m[name] = &table{name: name, keys: keys, items: map[string]map[string]types.AttributeValue{}}
	return &dynamodb.CreateTableOutput{}, nil
}

func validTableName(name string) bool {
	if len(name) < 3 || len(name) > 255 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// GetItem reads an item of an in-memory table, as a *dynamodb.Client's method of the same
// signature reads it from DynamoDB: the output's Item is nil when there is none. Only
// TableName and Key are read.
func (m *Store) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	m.tables.mu.Lock()
	defer m.tables.mu.Unlock()
	tbl, err := m.tables.get(aws.ToString(in.TableName))
	if err != nil {
		return nil, fmt.Errorf("dynamomem: GetItem: %w", err)
	}
	key, err := tbl.itemKey(in.Key, true)
	if err != nil {
		return nil, fmt.Errorf("dynamomem: GetItem: %w", err)
	}
	return &dynamodb.GetItemOutput{Item: normalizeItem(tbl.items[key])}, nil
}

// PutItem writes an item into an in-memory table, for a test to set the stage, as a
// *dynamodb.Client's method of the same signature writes it into DynamoDB, with the same
// subset of conditions as attached writes: a failed condition is an error wrapping a
// *types.ConditionalCheckFailedException.
func (m *Store) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	ws, err := m.prepare([]any{types.TransactWriteItem{Put: &types.Put{
		TableName:                 in.TableName,
		Item:                      in.Item,
		ConditionExpression:       in.ConditionExpression,
		ExpressionAttributeNames:  in.ExpressionAttributeNames,
		ExpressionAttributeValues: in.ExpressionAttributeValues,
	}}})
	if err != nil {
		return nil, fmt.Errorf("dynamomem: PutItem: %w", err)
	}
	if cerr := m.tables.commit(ws); cerr != nil {
		return nil, fmt.Errorf("dynamomem: PutItem: %w", &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")})
	}
	return &dynamodb.PutItemOutput{}, nil
}

// prepare is tables.prepare under the tables' lock.
func (m *Store) prepare(attached []any) ([]write, error) {
	m.tables.mu.Lock()
	defer m.tables.mu.Unlock()
	return m.tables.prepare(attached)
}

// CheckAttached implements [idemstore.AttachChecker]: idem.Attach refuses at once a value
// that is not a types.TransactWriteItem (or a pointer to one) that this store can apply,
// as the package documentation describes.
func (m *Store) CheckAttached(attached []any) error {
	_, err := m.prepare(attached)
	return err
}

// Complete implements [idemstore.Store]: the record completes as in [memstore.Store], and
// the attached writes apply with it, in one transaction, or nothing does.
func (m *Store) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	if len(attached) == 0 {
		return m.Store.Complete(ctx, rec, nil)
	}
	ws, err := m.prepare(attached)
	if err != nil {
		return err
	}
	// The function runs under the record store's lock, only if the lease still holds and
	// the record is not completed yet (a resent completion applies nothing twice).
	return m.Store.Complete(ctx, rec, []any{func() error {
		cerr := m.tables.commit(ws)
		if cerr == nil {
			return nil
		}
		return cerr.asError(len(ws))
	}})
}

// CompleteManyAttached implements [idemstore.BatchAttachStore] by completing each record
// with its attached writes in turn, as [Store.Complete]: one record's failure leaves the
// others as they are, as dynamo.Store's batched transactions do.
func (m *Store) CompleteManyAttached(ctx context.Context, recs []*idemstore.Record, attached [][]any) []error {
	out := make([]error, len(recs))
	for i, r := range recs {
		var a []any
		if i < len(attached) {
			a = attached[i]
		}
		out[i] = m.Complete(ctx, r, a)
	}
	return out
}

// asError returns the error DynamoDB's refusal would have become through [dynamo.Store].
func (e *commitError) asError(n int) error {
	reasons := make([]types.CancellationReason, 1+n)
	for i := range reasons {
		reasons[i].Code = aws.String("None")
	}
	if e.cond {
		reasons[1+e.index] = types.CancellationReason{Code: aws.String("ConditionalCheckFailed"), Message: aws.String("The conditional request failed")}
		tce := &types.TransactionCanceledException{
			Message:             aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons"),
			CancellationReasons: reasons,
		}
		return &dynamo.AttachedWriteError{Index: e.index, Table: e.table, Code: "ConditionalCheckFailed", Err: fmt.Errorf("%w: %w", idem.ErrConditionFailed, tce)}
	}
	apiErr := &smithy.GenericAPIError{Code: "ValidationException", Message: e.err.Error()}
	return &dynamo.AttachedWriteError{Index: e.index, Table: e.table, Code: "ValidationError", Err: fmt.Errorf("%w: %w", idemstore.ErrNotCommitted, apiErr)}
}

// The stand-in must keep the interfaces the guard and tests rely on.
var (
	_ idemstore.BatchStore    = (*Store)(nil)
	_ idemstore.AttachChecker = (*Store)(nil)
)
