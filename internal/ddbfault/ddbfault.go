// Package ddbfault wraps a [dynamo.API] and fails chosen calls, for tests of how idem behaves
// when DynamoDB misbehaves: throttling, a 5xx, a timeout, a cancelled context, or a write
// that took effect on the server while its response was lost.
//
// Faults sit below the store and above the SDK client, so they are what the store sees once
// the SDK's own retries are used up. The TCP proxy in this package (see [Proxy]) fails the
// connection instead, so that the SDK's retryer runs.
package ddbfault

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemkit/idem/dynamo"
)

// Step names the store operation a DynamoDB call belongs to.
type Step string

// The steps, each one DynamoDB call.
const (
	Claim      Step = "claim"      // PutItem
	Get        Step = "get"        // GetItem
	Complete   Step = "complete"   // UpdateItem of the status, or TransactWriteItems
	Release    Step = "release"    // UpdateItem of the lease end and the token (a tombstone)
	Extend     Step = "extend"     // UpdateItem of the lease end
	Checkpoint Step = "checkpoint" // UpdateItem of the checkpoint
)

// Steps lists every step.
var Steps = []Step{Claim, Get, Complete, Release, Extend, Checkpoint}

// Fault is a way for a call to fail.
type Fault string

// The faults.
const (
	Throttle     Fault = "throttle"      // ProvisionedThroughputExceededException, not applied
	Throttling   Fault = "throttling"    // ThrottlingException (smithy API error), not applied
	ServerError  Fault = "5xx"           // InternalServerError, not applied
	Timeout      Fault = "timeout"       // context.DeadlineExceeded, not applied
	Canceled     Fault = "canceled"      // context.Canceled, not applied
	ResponseLost Fault = "response-lost" // applied on the server, then an I/O error
)

// Faults lists every fault.
var Faults = []Fault{Throttle, Throttling, ServerError, Timeout, Canceled, ResponseLost}

// Applied reports whether the faulted call takes effect on the server.
func (f Fault) Applied() bool { return f == ResponseLost }

// Err returns the error a call of op fails with under f.
func (f Fault) Err(op string) error {
	var err error
	switch f {
	case Throttle:
		err = &types.ProvisionedThroughputExceededException{Message: ptr("injected: throughput exceeded")}
	case Throttling:
		err = &smithy.GenericAPIError{Code: "ThrottlingException", Message: "injected: rate exceeded", Fault: smithy.FaultClient}
	case ServerError:
		err = &types.InternalServerError{Message: ptr("injected: internal server error")}
	case Timeout:
		err = fmt.Errorf("injected: request timed out: %w", context.DeadlineExceeded)
	case Canceled:
		err = fmt.Errorf("injected: request canceled: %w", context.Canceled)
	case ResponseLost:
		err = errors.New("injected: connection reset after the request was sent")
	default:
		panic("ddbfault: unknown fault " + string(f))
	}
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: err}
}

func ptr(s string) *string { return &s }

// Client is a [dynamo.API] that passes calls to the wrapped client unless a fault is armed
// for their step. It is safe for concurrent use.
type Client struct {
	api api

	mu       sync.Mutex
	rate     float64    // chance that any call fails, see [Client.Random]
	rnd      *rand.Rand // picks random faults; guarded by mu
	armed    map[Step]*arming
	injected map[Step]int
	calls    map[Step]int
}

type arming struct {
	fault Fault
	times int // < 0: every call
}

var _ dynamo.API = (*Client)(nil)

// api is what Client wraps: [dynamo.API], whose batched path is being added, plus
// BatchExecuteStatement, so that Client serves the store either way.
type api interface {
	dynamo.API
	BatchExecuteStatement(ctx context.Context, params *dynamodb.BatchExecuteStatementInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error)
}

// New wraps a DynamoDB client (a *dynamodb.Client, or another wrapper).
func New(api api) *Client {
	return &Client{api: api, armed: map[Step]*arming{}, injected: map[Step]int{}, calls: map[Step]int{}}
}

// Arm makes the next times calls of step fail with f; times < 0 means every call until
// [Client.Disarm].
func (c *Client) Arm(step Step, f Fault, times int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed[step] = &arming{fault: f, times: times}
}

// Random makes every call fail with probability rate, with a fault drawn from [Faults],
// drawn from a source seeded with seed so that a run can be repeated. Armed faults take
// precedence. A rate of 0 turns random faults off.
func (c *Client) Random(rate float64, seed uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rate, c.rnd = rate, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// Disarm removes every armed fault and turns random faults off.
func (c *Client) Disarm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.armed)
	c.rate = 0
}

// Injected returns how many faults were injected at step.
func (c *Client) Injected(step Step) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.injected[step]
}

// InjectedTotal returns how many faults were injected in all.
func (c *Client) InjectedTotal() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.injected {
		n += v
	}
	return n
}

// Calls returns how many calls of step were made, faulted or not.
func (c *Client) Calls(step Step) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[step]
}

// take reports the fault to inject into this call of step, if any.
func (c *Client) take(step Step) (Fault, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[step]++
	a := c.armed[step]
	if a == nil || a.times == 0 {
		if c.rate > 0 && c.rnd.Float64() < c.rate {
			c.injected[step]++
			return Faults[c.rnd.IntN(len(Faults))], true
		}
		return "", false
	}
	if a.times > 0 {
		a.times--
	}
	c.injected[step]++
	return a.fault, true
}

// call runs real unless a fault is armed for step; a fault that applies runs real first.
func call[Out any](c *Client, ctx context.Context, step Step, op string, real func(context.Context) (*Out, error)) (*Out, error) {
	f, ok := c.take(step)
	if !ok {
		return real(ctx)
	}
	if f.Applied() {
		_, _ = real(ctx)
	}
	return nil, f.Err(op)
}

// PutItem implements [dynamo.API]: the claim.
func (c *Client) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return call(c, ctx, Claim, "PutItem", func(ctx context.Context) (*dynamodb.PutItemOutput, error) {
		return c.api.PutItem(ctx, in, optFns...)
	})
}

// GetItem implements [dynamo.API].
func (c *Client) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return call(c, ctx, Get, "GetItem", func(ctx context.Context) (*dynamodb.GetItemOutput, error) {
		return c.api.GetItem(ctx, in, optFns...)
	})
}

// UpdateItem implements [dynamo.API]: a completion, a lease extension or a checkpoint.
func (c *Client) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return call(c, ctx, UpdateStep(in), "UpdateItem", func(ctx context.Context) (*dynamodb.UpdateItemOutput, error) {
		return c.api.UpdateItem(ctx, in, optFns...)
	})
}

// DeleteItem implements [dynamo.API]; the store releases with UpdateItem, and never
// deletes.
func (c *Client) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return call(c, ctx, Release, "DeleteItem", func(ctx context.Context) (*dynamodb.DeleteItemOutput, error) {
		return c.api.DeleteItem(ctx, in, optFns...)
	})
}

// TransactWriteItems implements [dynamo.API]: a completion with attached writes.
func (c *Client) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return call(c, ctx, Complete, "TransactWriteItems", func(ctx context.Context) (*dynamodb.TransactWriteItemsOutput, error) {
		return c.api.TransactWriteItems(ctx, in, optFns...)
	})
}

// BatchExecuteStatement implements [dynamo.API]: the batch methods of the store. The step
// is that of the first statement: INSERT a claim, UPDATE a completion (which removes the
// lease end) or a release (which sets it and the token, and removes nothing).
func (c *Client) BatchExecuteStatement(ctx context.Context, in *dynamodb.BatchExecuteStatementInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error) {
	return call(c, ctx, BatchStep(in), "BatchExecuteStatement", func(ctx context.Context) (*dynamodb.BatchExecuteStatementOutput, error) {
		return c.api.BatchExecuteStatement(ctx, in, optFns...)
	})
}

// BatchGetItem implements [dynamo.API]: the read-back of a batch claim's taken keys.
func (c *Client) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return call(c, ctx, Get, "BatchGetItem", func(ctx context.Context) (*dynamodb.BatchGetItemOutput, error) {
		return c.api.BatchGetItem(ctx, in, optFns...)
	})
}

// BatchStep tells which step a BatchExecuteStatement belongs to from its first statement.
func BatchStep(in *dynamodb.BatchExecuteStatementInput) Step {
	if len(in.Statements) == 0 || in.Statements[0].Statement == nil {
		return Get
	}
	stmt := *in.Statements[0].Statement
	verb, _, _ := strings.Cut(stmt, " ")
	switch verb {
	case "INSERT":
		return Claim
	case "UPDATE":
		if strings.Contains(stmt, " REMOVE ") {
			return Complete
		}
		return Release
	default:
		return Get
	}
}

// UpdateStep tells which step an UpdateItem belongs to from the first placeholder its
// update expression sets (the dynamo package's placeholders are fixed, whatever the
// attribute names): the lease end (set to :ended by a release), the checkpoint, or else
// the status (a completion).
func UpdateStep(in *dynamodb.UpdateItemInput) Step {
	expr := ""
	if in.UpdateExpression != nil {
		expr = *in.UpdateExpression
	}
	set, _, _ := strings.Cut(strings.TrimPrefix(expr, "SET "), " REMOVE ")
	target, value, _ := strings.Cut(set, " = ")
	switch target {
	case "#lease":
		if value == ":ended" || strings.HasPrefix(value, ":ended,") {
			return Release
		}
		return Extend
	case "#cp":
		return Checkpoint
	default:
		return Complete
	}
}
