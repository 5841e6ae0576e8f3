package samtables

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Table is the definition of an AWS::DynamoDB::Table resource: the properties the
// examples use.
type Table struct {
	// LogicalID is the table's logical ID in the template.
	LogicalID string `json:"-"`
	// BillingMode is "PAY_PER_REQUEST" or "PROVISIONED".
	BillingMode string
	// AttributeDefinitions lists the key attributes and their types ("S", "N", "B").
	AttributeDefinitions []AttributeDefinition
	// KeySchema lists the key attributes and their roles ("HASH", "RANGE").
	KeySchema []KeyElement
	// TimeToLiveSpecification configures TTL; nil when the template has none.
	TimeToLiveSpecification *TimeToLive
	// PointInTimeRecoverySpecification configures continuous backups; nil when absent.
	PointInTimeRecoverySpecification *struct{ PointInTimeRecoveryEnabled bool }
	// SSESpecification configures encryption with a KMS key; nil when absent.
	SSESpecification *struct{ SSEEnabled bool }
	// StreamSpecification turns the table's stream on, with what each record carries
	// (StreamViewType: "KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"); nil
	// for no stream.
	StreamSpecification *struct{ StreamViewType string }
	// GlobalSecondaryIndexes and LocalSecondaryIndexes are kept only to refuse them:
	// CreateTableInput does not translate indexes.
	GlobalSecondaryIndexes []any `json:",omitempty"`
	LocalSecondaryIndexes  []any `json:",omitempty"`
}

// AttributeDefinition is one entry of a table's AttributeDefinitions.
type AttributeDefinition struct {
	AttributeName string
	AttributeType string
}

// KeyElement is one entry of a table's KeySchema.
type KeyElement struct {
	AttributeName string
	KeyType       string
}

// TimeToLive is a table's TimeToLiveSpecification.
type TimeToLive struct {
	AttributeName string
	Enabled       bool
}

// HashKey returns the name of the table's partition key attribute, or "" if it has none.
func (tb *Table) HashKey() string {
	for _, k := range tb.KeySchema {
		if k.KeyType == string(types.KeyTypeHash) {
			return k.AttributeName
		}
	}
	return ""
}

// TTLAttribute returns the table's TTL attribute, or "" when TTL is not enabled.
func (tb *Table) TTLAttribute() string {
	if tb.TimeToLiveSpecification == nil || !tb.TimeToLiveSpecification.Enabled {
		return ""
	}
	return tb.TimeToLiveSpecification.AttributeName
}

// CreateTableInput returns the request that creates the table under the given name with
// the template's key schema, attribute definitions, billing mode and stream. TTL needs a
// separate UpdateTimeToLive (see [CreateTables]). Point-in-time recovery and encryption are
// left out: DynamoDB Local does not model them, and they do not change what the code sees.
func (tb *Table) CreateTableInput(name string) (*dynamodb.CreateTableInput, error) {
	if len(tb.GlobalSecondaryIndexes) > 0 || len(tb.LocalSecondaryIndexes) > 0 {
		return nil, fmt.Errorf("samtables: table %s: secondary indexes are not supported", tb.LogicalID)
	}
	if tb.HashKey() == "" {
		return nil, fmt.Errorf("samtables: table %s: no HASH key", tb.LogicalID)
	}
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingMode(tb.BillingMode),
	}
	if in.BillingMode == "" {
		in.BillingMode = types.BillingModeProvisioned
	}
	if in.BillingMode == types.BillingModeProvisioned {
		return nil, fmt.Errorf("samtables: table %s: only PAY_PER_REQUEST is supported", tb.LogicalID)
	}
	if spec := tb.StreamSpecification; spec != nil {
		if spec.StreamViewType == "" {
			return nil, fmt.Errorf("samtables: table %s: StreamSpecification without StreamViewType", tb.LogicalID)
		}
		in.StreamSpecification = &types.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: types.StreamViewType(spec.StreamViewType),
		}
	}
	for _, a := range tb.AttributeDefinitions {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{
			AttributeName: aws.String(a.AttributeName),
			AttributeType: types.ScalarAttributeType(a.AttributeType),
		})
	}
	for _, k := range tb.KeySchema {
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{
			AttributeName: aws.String(k.AttributeName),
			KeyType:       types.KeyType(k.KeyType),
		})
	}
	return in, nil
}

// TableAPI is the part of the DynamoDB client that [CreateTables] calls. A
// *dynamodb.Client satisfies it.
type TableAPI interface {
	CreateTable(ctx context.Context, params *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, params *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// tableWait bounds how long CreateTables waits for a table to become ACTIVE.
const tableWait = 2 * time.Minute

// CreateTables creates the tables given in names (logical ID → table name) through
// client, waits until each is ACTIVE and enables its TTL as the template says.
// It is meant for DynamoDB Local in tests and `make run`; deployed tables come from the
// template itself. An existing table is an error.
func CreateTables(ctx context.Context, client TableAPI, names map[string]string) error {
	if len(names) == 0 {
		return errors.New("samtables: no tables to create")
	}
	for id, name := range names {
		tb, err := Lookup(id)
		if err != nil {
			return err
		}
		in, err := tb.CreateTableInput(name)
		if err != nil {
			return err
		}
		if _, err := client.CreateTable(ctx, in); err != nil {
			return fmt.Errorf("samtables: create table %s (%s): %w", name, id, err)
		}
		waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
			o.MinDelay = 100 * time.Millisecond
			o.MaxDelay = 2 * time.Second
		})
		if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, tableWait); err != nil {
			return fmt.Errorf("samtables: wait for table %s: %w", name, err)
		}
		if attr := tb.TTLAttribute(); attr != "" {
			_, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
				TableName: aws.String(name),
				TimeToLiveSpecification: &types.TimeToLiveSpecification{
					AttributeName: aws.String(attr),
					Enabled:       aws.Bool(true),
				},
			})
			if err != nil {
				return fmt.Errorf("samtables: enable TTL on %s: %w", name, err)
			}
		}
	}
	return nil
}

// NewTables creates the tables with the given logical IDs under fresh unique
// names through client, deletes them when tb ends, and returns the names by logical ID.
// It fails tb on error.
func NewTables(tb testing.TB, client *dynamodb.Client, logicalIDs ...string) map[string]string {
	tb.Helper()
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	names := make(map[string]string, len(logicalIDs))
	for _, id := range logicalIDs {
		names[id] = strings.ToLower(id) + "-" + hex.EncodeToString(suffix[:])
	}
	ctx, cancel := context.WithTimeout(context.Background(), tableWait)
	defer cancel()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, name := range names {
			_, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
			var notFound *types.ResourceNotFoundException
			if err != nil && !errors.As(err, &notFound) {
				tb.Errorf("samtables: delete table %s: %v", name, err)
			}
		}
	})
	if err := CreateTables(ctx, client, names); err != nil {
		tb.Fatal(err)
	}
	return names
}
