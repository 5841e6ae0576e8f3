package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// The requests of X1 and X2 are those dynamo.Store sends for a claim and a completion with
// the default attribute names and payload validation off, written out against the SDK
// (read from dynamo/store.go, dynamo/expr.go and dynamo/record.go). Keeping them the same
// shape is what makes X1 and X2 the floor under W1 and W2; the test checks that their
// request bytes match.
const (
	rawClaimCondition = "attribute_not_exists(#id) OR #exp <= :now OR (#status = :inprogress AND #lease <= :now_ms AND attribute_not_exists(#cp))"
	rawOwnedCondition = "#token = :token"
	rawCompletion     = "SET #status = :status, #v = :v, #exp = :exp, #enc = :enc, #data = :data REMOVE #lease, #fp"
)

// rawKey is one key of X1 and X2, as the guard stores it, with the result it completes to.
type rawKey struct {
	key  string
	data string
}

func (b *bench) rawKeys() []rawKey {
	if b.raw != nil {
		return b.raw
	}
	keys := make([]rawKey, b.counts.Invocations)
	for i := range keys {
		keys[i] = b.newRawKey()
	}
	b.raw = keys
	return keys
}

// newRawKey returns a fresh key, stored as the guard stores it, with its result.
func (b *bench) newRawKey() rawKey {
	id := uuid4()
	key, err := b.guard.StoredKey(idem.Request{Key: id})
	if err != nil {
		panic(err) // a UUID is always a valid key
	}
	data, _ := json.Marshal(response{OK: true, ID: id})
	return rawKey{key: key, data: string(data)}
}

func s(v string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: v} }

func epoch(t time.Time, unit time.Duration) *types.AttributeValueMemberN {
	per := int64(time.Second / unit)
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.Unix()*per+int64(t.Nanosecond())/int64(unit), 10)}
}

func token() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// claimInput is the claim's conditional PutItem at now, with a lease to ctx's deadline.
func (b *bench) claimInput(ctx context.Context, key, tok string, now time.Time) *dynamodb.PutItemInput {
	lease, _ := ctx.Deadline()
	return &dynamodb.PutItemInput{
		TableName: aws.String(b.table),
		Item: map[string]types.AttributeValue{
			"id":                     s(key),
			"status":                 s(string(idemstore.StatusInProgress)),
			"v":                      &types.AttributeValueMemberN{Value: strconv.Itoa(idemstore.SchemaVersion)},
			"lease_token":            s(tok),
			"expiration":             epoch(now.Add(expiry), time.Second),
			"in_progress_expiration": epoch(lease, time.Millisecond),
		},
		ConditionExpression: aws.String(rawClaimCondition),
		ExpressionAttributeNames: map[string]string{
			"#id": "id", "#exp": "expiration", "#status": "status", "#lease": "in_progress_expiration",
			"#cp": "checkpoint",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now":        epoch(now, time.Second),
			":now_ms":     epoch(now, time.Millisecond),
			":inprogress": s(string(idemstore.StatusInProgress)),
		},
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// completionInput is the completion's UpdateItem, conditional on the lease token.
func (b *bench) completionInput(k rawKey, tok string, now time.Time) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:           aws.String(b.table),
		Key:                 map[string]types.AttributeValue{"id": s(k.key)},
		UpdateExpression:    aws.String(rawCompletion),
		ConditionExpression: aws.String(rawOwnedCondition),
		ExpressionAttributeNames: map[string]string{
			"#status": "status", "#v": "v", "#lease": "in_progress_expiration", "#exp": "expiration",
			"#enc": "enc", "#data": "data", "#fp": "validation", "#token": "lease_token",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":token":  s(tok),
			":status": s(string(idemstore.StatusCompleted)),
			":v":      &types.AttributeValueMemberN{Value: strconv.Itoa(idemstore.SchemaVersion)},
			":exp":    epoch(now.Add(expiry), time.Second),
			":enc":    s(idem.JSONCodec{}.Name()),
			":data":   s(k.data),
		},
	}
}

// rawPutUpdate is X1: per fresh key, the claim and the completion straight from the SDK.
func (b *bench) rawPutUpdate() *Result {
	keys := b.rawKeys()
	r, failed := b.sequential("X1_raw_sdk_put_update", "invocation", len(keys), func(ctx context.Context, i int) bool {
		return b.rawPutUpdateOne(ctx, keys[i])
	})
	r.check(failed == 0, "%d put/update pairs failed", failed)
	return r
}

// rawPutConflict is X2: the claim again on the X1 keys, failing its condition and returning
// the completed item.
func (b *bench) rawPutConflict() *Result {
	keys := b.rawKeys()
	r, failed := b.sequential("X2_raw_sdk_put_conflict", "invocation", len(keys), func(ctx context.Context, i int) bool {
		return b.rawPutConflictOne(ctx, keys[i])
	})
	r.check(failed == 0, "%d puts did not fail their condition with the old item", failed)
	return r
}

// rawPutUpdateOne is one X1 operation on the fresh key k: the claim, then the completion;
// it reports whether both succeeded.
func (b *bench) rawPutUpdateOne(ctx context.Context, k rawKey) bool {
	tok := token()
	if _, err := b.client.PutItem(ctx, b.claimInput(ctx, k.key, tok, time.Now())); err != nil {
		return false
	}
	_, err := b.client.UpdateItem(ctx, b.completionInput(k, tok, time.Now()))
	return err == nil
}

// rawPutConflictOne is one X2 operation on the completed key k: the claim again; it
// reports whether it failed its condition and returned the completed item.
func (b *bench) rawPutConflictOne(ctx context.Context, k rawKey) bool {
	_, err := b.client.PutItem(ctx, b.claimInput(ctx, k.key, token(), time.Now()))
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf) && len(ccf.Item) > 0
}
