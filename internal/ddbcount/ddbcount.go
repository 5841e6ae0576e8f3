// Package ddbcount counts the DynamoDB calls a dynamo.Store makes, by operation, for tests
// and benchmarks that pin the round-trip budget.
package ddbcount

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idem/dynamo"
)

// API wraps a dynamo.API and counts the calls that pass through it. It is safe for
// concurrent use.
type API struct {
	dynamo.API

	mu    sync.Mutex
	calls map[string]int
}

// New wraps api.
func New(api dynamo.API) *API { return &API{API: api} }

func (c *API) count(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[op]++
}

// Take returns the counts by operation name since the last Take, and starts again from zero.
func (c *API) Take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.calls
	c.calls = nil
	if calls == nil {
		calls = map[string]int{}
	}
	return calls
}

// PutItem counts and forwards the call.
func (c *API) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.count("PutItem")
	return c.API.PutItem(ctx, in, optFns...)
}

// GetItem counts and forwards the call.
func (c *API) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.count("GetItem")
	return c.API.GetItem(ctx, in, optFns...)
}

// UpdateItem counts and forwards the call.
func (c *API) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.count("UpdateItem")
	return c.API.UpdateItem(ctx, in, optFns...)
}

// DeleteItem counts and forwards the call.
func (c *API) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.count("DeleteItem")
	return c.API.DeleteItem(ctx, in, optFns...)
}

// TransactWriteItems counts and forwards the call.
func (c *API) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.count("TransactWriteItems")
	return c.API.TransactWriteItems(ctx, in, optFns...)
}

// BatchExecuteStatement counts and forwards the call.
func (c *API) BatchExecuteStatement(ctx context.Context, in *dynamodb.BatchExecuteStatementInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error) {
	c.count("BatchExecuteStatement")
	return c.API.BatchExecuteStatement(ctx, in, optFns...)
}

// BatchGetItem counts and forwards the call.
func (c *API) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.count("BatchGetItem")
	return c.API.BatchGetItem(ctx, in, optFns...)
}
