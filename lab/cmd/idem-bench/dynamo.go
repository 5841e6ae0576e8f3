package main

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/lab/bench"
)

// table is the DynamoDB benchmark's table.
const table = "idem_bench"

// openDynamo starts DynamoDB Local unless o names an endpoint, and builds the one client
// (counted by the meter), the table and the store. Its workloads are W1–W4b and X1, X2.
func openDynamo(ctx context.Context, o options) (t *target, err error) {
	m := &bench.Meter{Wire: true}
	var server *ddblocal.Server
	t = &target{meter: m, sqs: true, close: func() error {
		if server != nil {
			return server.Stop()
		}
		return nil
	}}
	endpoint := o.url
	if endpoint == "" {
		if server, err = ddblocal.Start(ctx); err != nil {
			return nil, err
		}
		m.ServerPID, endpoint = server.PID(), server.Endpoint()
	}
	defer func() {
		if err != nil {
			_ = t.close()
		}
	}()
	// ddblocal's client keeps enough idle connections for W3 and uses the SDK's default
	// retries. DynamoDB Local sends a CRC32 header of 0 on some error responses, which the
	// SDK would log as a warning on every failed condition: the logs are dropped.
	client := dynamodb.New(ddblocal.NewClient(endpoint).Options(), func(opt *dynamodb.Options) {
		opt.APIOptions = append(opt.APIOptions, counter{m}.apiOption)
		opt.Logger = logging.Nop{}
	})
	if err := dynamo.CreateTable(ctx, client, table); err != nil {
		return nil, err
	}
	if t.store, err = dynamo.New(client, table); err != nil {
		return nil, err
	}
	t.extra = func(b *bench.Bench) []bench.Step {
		x := &raw{b: b, client: client, keys: newRawKeys(b.Guard, b.Counts().Invocations)}
		y := &raw{b: b, client: client, keys: newRawKeys(b.Guard, b.Counts().Invocations)}
		return append([]bench.Step{x.putUpdate, x.putConflict}, pairSteps(b, y.newKey, y.replay)...)
	}
	return t, nil
}

// counter reports what a DynamoDB client sends to its meter.
type counter struct{ m *bench.Meter }

// apiOption adds the counting middleware to a client's stack: in front of the retry
// middleware it sees each call once, with its serialized body and its final outcome; the
// Deserialize step sees every HTTP attempt.
func (c counter) apiOption(stack *middleware.Stack) error {
	return errors.Join(
		stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("idemBenchCalls", c.countCall), "Retry", middleware.Before),
		stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("idemBenchAttempts", c.countAttempt), middleware.Before),
	)
}

// countCall counts a call, its bytes and its failed conditions: a
// ConditionalCheckFailedException, or the statements of a BatchExecuteStatement that failed
// with ConditionalCheckFailed or DuplicateItem (how a PartiQL INSERT reports its key taken).
func (c counter) countCall(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	middleware.FinalizeOutput, middleware.Metadata, error,
) {
	var n int64
	if req, ok := in.Request.(*smithyhttp.Request); ok {
		if n = req.ContentLength; n <= 0 {
			n, _, _ = req.StreamLength()
		}
	}
	c.m.Call(awsmiddleware.GetOperationName(ctx), n)
	out, md, err := next.HandleFinalize(ctx, in)
	var failed int64
	if ccf := (*types.ConditionalCheckFailedException)(nil); errors.As(err, &ccf) {
		failed++
	}
	if batch, ok := out.Result.(*dynamodb.BatchExecuteStatementOutput); ok && batch != nil {
		for _, r := range batch.Responses {
			if r.Error != nil && (r.Error.Code == types.BatchStatementErrorCodeEnumConditionalCheckFailed ||
				r.Error.Code == types.BatchStatementErrorCodeEnumDuplicateItem) {
				failed++
			}
		}
	}
	c.m.ConditionFailed(failed)
	return out, md, err
}

func (c counter) countAttempt(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	middleware.DeserializeOutput, middleware.Metadata, error,
) {
	c.m.Attempt()
	return next.HandleDeserialize(ctx, in)
}

// The requests of X1 and X2 are those dynamo.Store sends for a claim and a completion with
// the default attribute names and payload validation off, written out against the SDK
// (from dynamo/store.go, dynamo/expr.go and dynamo/record.go). Their being the same is what
// makes X1 and X2 the floor under W1 and W2; TestRun checks that their bytes match. The
// completion removes data_ref, as the library's does with the result inline: a completion
// sent again after a lost answer may find the record completed with its result apart
// (26 bytes more than before results could be kept apart).
const (
	rawClaimCondition = "attribute_not_exists(#id) OR #exp <= :now OR (#status = :inprogress AND #lease <= :now_ms AND " +
		"(attribute_not_exists(#token) OR #token <> :released) AND (attribute_not_exists(#cp) OR #cp = :empty))"
	rawCompletion = "SET #status = :status, #v = :v, #exp = :exp, #enc = :enc, #data = :data REMOVE #lease, #fp, #dref"
)

// raw runs X1 and X2 on the bench's DynamoDB client.
type raw struct {
	b      *bench.Bench
	client *dynamodb.Client
	keys   []rawKey
}

// rawKey is one key of X1 and X2, as the guard stores it, with the result it completes to.
type rawKey struct{ key, data string }

func newRawKeys(guard *idem.Guard, n int) []rawKey {
	keys := make([]rawKey, n)
	for i := range keys {
		id := bench.UUID4()
		key, err := guard.StoredKey(idem.Request{Key: id})
		if err != nil {
			panic(err) // a UUID is always a valid key
		}
		data, _ := json.Marshal(bench.Response{OK: true, ID: id})
		keys[i] = rawKey{key: key, data: string(data)}
	}
	return keys
}

func str(v string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: v} }

func epoch(t time.Time, unit time.Duration) *types.AttributeValueMemberN {
	per := int64(time.Second / unit)
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.Unix()*per+int64(t.Nanosecond())/int64(unit), 10)}
}

// claimInput is the claim's conditional PutItem of key by token tok, with a lease to ctx's
// deadline.
func claimInput(ctx context.Context, key, tok string) *dynamodb.PutItemInput {
	now := time.Now()
	lease, _ := ctx.Deadline()
	return &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			"id": str(key), "status": str(string(idemstore.StatusInProgress)),
			"v":           &types.AttributeValueMemberN{Value: strconv.Itoa(idemstore.SchemaVersion)},
			"lease_token": str(tok), "expiration": epoch(now.Add(bench.Expiry), time.Second),
			"in_progress_expiration": epoch(lease, time.Millisecond),
		},
		ConditionExpression: aws.String(rawClaimCondition),
		ExpressionAttributeNames: map[string]string{
			"#id": "id", "#exp": "expiration", "#status": "status", "#lease": "in_progress_expiration", "#cp": "checkpoint",
			"#token": "lease_token",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": epoch(now, time.Second), ":now_ms": epoch(now, time.Millisecond),
			":inprogress": str(string(idemstore.StatusInProgress)),
			":released":   str(idemstore.ReleasedToken(tok)), ":empty": str(""),
		},
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// putUpdate is X1: per fresh key, the claim and the completion straight from the SDK.
func (x *raw) putUpdate() *bench.Result {
	r, failed := x.b.Sequential("X1_raw_sdk_put_update", "invocation", len(x.keys), x.newKey)
	r.Check(failed == 0, "%d put/update pairs failed", failed)
	return r
}

// newKey is X1's operation on key i: the claim and the completion straight from the SDK.
func (x *raw) newKey(ctx context.Context, i int) bool {
	tok := bench.Token()
	if _, err := x.client.PutItem(ctx, claimInput(ctx, x.keys[i].key, tok)); err != nil {
		return false
	}
	_, err := x.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(table),
		Key:                 map[string]types.AttributeValue{"id": str(x.keys[i].key)},
		UpdateExpression:    aws.String(rawCompletion),
		ConditionExpression: aws.String("#token = :token AND #status = :inprogress"),
		ExpressionAttributeNames: map[string]string{
			"#status": "status", "#v": "v", "#lease": "in_progress_expiration", "#exp": "expiration",
			"#enc": "enc", "#data": "data", "#fp": "validation", "#dref": "data_ref", "#token": "lease_token",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":token": str(tok), ":status": str(string(idemstore.StatusCompleted)),
			":inprogress": str(string(idemstore.StatusInProgress)),
			":v":          &types.AttributeValueMemberN{Value: strconv.Itoa(idemstore.SchemaVersion)},
			":exp":        epoch(time.Now().Add(bench.Expiry), time.Second), ":enc": str(idem.JSONCodec{}.Name()),
			":data": str(x.keys[i].data),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return err == nil
}

// putConflict is X2: the claim again on the X1 keys, failing its condition and returning
// the completed item.
func (x *raw) putConflict() *bench.Result {
	r, failed := x.b.Sequential("X2_raw_sdk_put_conflict", "invocation", len(x.keys), x.replay)
	r.Check(failed == 0, "%d puts did not fail their condition with the old item", failed)
	return r
}

// replay is X2's operation on key i: the claim, which fails its condition and returns the
// completed item.
func (x *raw) replay(ctx context.Context, i int) bool {
	_, err := x.client.PutItem(ctx, claimInput(ctx, x.keys[i].key, bench.Token()))
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf) && len(ccf.Item) > 0
}
