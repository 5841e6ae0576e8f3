package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CreateTable creates an idempotency table for tests and local runs: on-demand capacity, a
// string partition key named [Attributes.ID] (plus a string sort key with [WithSortKey]),
// and TTL on [Attributes.Expiration], so DynamoDB deletes records some time after they
// expire. It waits until the table is ACTIVE, polling with ctx. Pass the options given to
// [New] so the names match.
//
// It is idempotent: an existing table is waited for and has TTL enabled if it lacks it, but
// an existing table whose key schema differs from the options is an error. Production
// tables belong in infrastructure as code; this helper is not meant to replace that.
func CreateTable(ctx context.Context, client TableAPI, table string, opts ...Option) error {
	cfg, err := newConfig(opts)
	if err != nil {
		return err
	}
	keys := []types.KeySchemaElement{{AttributeName: aws.String(cfg.attrs.ID), KeyType: types.KeyTypeHash}}
	defs := []types.AttributeDefinition{{AttributeName: aws.String(cfg.attrs.ID), AttributeType: types.ScalarAttributeTypeS}}
	if cfg.sortKey != "" {
		keys = append(keys, types.KeySchemaElement{AttributeName: aws.String(cfg.sortKey), KeyType: types.KeyTypeRange})
		defs = append(defs, types.AttributeDefinition{AttributeName: aws.String(cfg.sortKey), AttributeType: types.ScalarAttributeTypeS})
	}
	_, err = client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		KeySchema:            keys,
		AttributeDefinitions: defs,
		BillingMode:          types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("dynamo: create table %s: %w", table, err)
	}
	desc, err := waitActive(ctx, client, table)
	if err != nil {
		return err
	}
	if !sameKeys(desc.KeySchema, keys) {
		return fmt.Errorf("dynamo: create table %s: it exists with another key schema than the options give", table)
	}
	return enableTTL(ctx, client, table, cfg.attrs.Expiration)
}

// waitActive polls DescribeTable until the table is ACTIVE. A table just created may not
// be visible yet, so "not found" is polled through too.
func waitActive(ctx context.Context, client TableAPI, table string) (*types.TableDescription, error) {
	delay := 50 * time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dynamo: create table %s: waiting for ACTIVE: %w", table, ctx.Err())
		case <-timer.C:
		}
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		var notFound *types.ResourceNotFoundException
		switch {
		case err == nil && out.Table != nil && out.Table.TableStatus == types.TableStatusActive:
			return out.Table, nil
		case err != nil && !errors.As(err, &notFound):
			return nil, fmt.Errorf("dynamo: create table %s: describe: %w", table, err)
		}
		delay = min(2*delay, 2*time.Second)
		timer.Reset(delay)
	}
}

func sameKeys(got, want []types.KeySchemaElement) bool {
	if len(got) != len(want) {
		return false
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || (aws.ToString(g.AttributeName) == aws.ToString(w.AttributeName) && g.KeyType == w.KeyType)
		}
		if !found {
			return false
		}
	}
	return true
}

// enableTTL turns TTL on for attr unless it already is. UpdateTimeToLive refuses to enable
// TTL twice, hence the look first.
func enableTTL(ctx context.Context, client TableAPI, table, attr string) error {
	out, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("dynamo: create table %s: describe TTL: %w", table, err)
	}
	if d := out.TimeToLiveDescription; d != nil {
		switch d.TimeToLiveStatus {
		case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
			if aws.ToString(d.AttributeName) != attr {
				return fmt.Errorf("dynamo: create table %s: TTL is on attribute %q, not %q", table, aws.ToString(d.AttributeName), attr)
			}
			return nil
		}
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attr), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("dynamo: create table %s: enable TTL: %w", table, err)
	}
	return nil
}
