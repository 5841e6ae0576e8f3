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

	// unbounded forwards every call without the caller's deadline and cancellation.
	unbounded bool

	mu    sync.Mutex
	calls map[string]int
}

// New wraps api.
func New(api dynamo.API) *API { return &API{API: api} }

// NewUnbounded wraps api like New, but forwards every call without the caller's deadline
// and cancellation: a call waits for DynamoDB Local's answer however long a loaded machine
// makes it take. idem bounds the calls that record an outcome (10 seconds); a call cut off there
// is resent alone, so on a slow enough machine the count would measure the machine, not
// the code path. A test that pins a call budget uses it, with a deadline far ahead.
func NewUnbounded(api dynamo.API) *API { return &API{API: api, unbounded: true} }

// count counts a call of op and returns the context to forward it with.
func (c *API) count(ctx context.Context, op string) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[op]++
	if c.unbounded {
		return context.WithoutCancel(ctx)
	}
	return ctx
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
	ctx = c.count(ctx, "PutItem")
	return c.API.PutItem(ctx, in, optFns...)
}

// GetItem counts and forwards the call.
func (c *API) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	ctx = c.count(ctx, "GetItem")
	return c.API.GetItem(ctx, in, optFns...)
}

// UpdateItem counts and forwards the call.
func (c *API) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	ctx = c.count(ctx, "UpdateItem")
	return c.API.UpdateItem(ctx, in, optFns...)
}

// DeleteItem counts and forwards the call.
func (c *API) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	ctx = c.count(ctx, "DeleteItem")
	return c.API.DeleteItem(ctx, in, optFns...)
}

// TransactWriteItems counts and forwards the call.
func (c *API) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	ctx = c.count(ctx, "TransactWriteItems")
	return c.API.TransactWriteItems(ctx, in, optFns...)
}

// BatchExecuteStatement counts and forwards the call.
func (c *API) BatchExecuteStatement(ctx context.Context, in *dynamodb.BatchExecuteStatementInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error) {
	ctx = c.count(ctx, "BatchExecuteStatement")
	return c.API.BatchExecuteStatement(ctx, in, optFns...)
}

// BatchGetItem counts and forwards the call.
func (c *API) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	ctx = c.count(ctx, "BatchGetItem")
	return c.API.BatchGetItem(ctx, in, optFns...)
}
