package dynamo_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
)

// fakeAPI answers with its function fields; a nil field fails the test if called.
type fakeAPI struct {
	dynamo.API
	put      func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error)
	get      func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error)
	update   func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error)
	transact func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error)
	batch    func(*dynamodb.BatchExecuteStatementInput) (*dynamodb.BatchExecuteStatementOutput, error)
	batchGet func(*dynamodb.BatchGetItemInput) (*dynamodb.BatchGetItemOutput, error)
	del      func(*dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error)
	puts     int
	gets     int
	updates  int
}

func (f *fakeAPI) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	f.puts++
	return f.put(in)
}

func (f *fakeAPI) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.gets++
	return f.get(in)
}

func (f *fakeAPI) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	f.updates++
	return f.update(in)
}

func (f *fakeAPI) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return f.del(in)
}

func (f *fakeAPI) BatchExecuteStatement(_ context.Context, in *dynamodb.BatchExecuteStatementInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error) {
	return f.batch(in)
}

func (f *fakeAPI) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return f.batchGet(in)
}

func (f *fakeAPI) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return f.transact(in)
}

var (
	errCCF     = &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	errTooBig  = &smithy.GenericAPIError{Code: "ValidationException", Message: "Item size has exceeded the maximum allowed size"}
	errTxBig   = &smithy.GenericAPIError{Code: "ValidationException", Message: "Transaction payload size cannot exceed 4MB. Payload Size: 4283435"}
	errOutage  = &smithy.GenericAPIError{Code: "InternalServerError", Message: "boom", Fault: smithy.FaultServer}
	holderItem = map[string]types.AttributeValue{
		"id":     &types.AttributeValueMemberS{Value: "k"},
		"status": &types.AttributeValueMemberS{Value: "COMPLETED"},
		"data":   &types.AttributeValueMemberS{Value: `{"n":1}`},
	}
)

// TestClaimWithoutReturnedItem covers stores that do not return the conflicting item with
// the failed condition: the claim reads it, and retries when it has gone.
func TestClaimWithoutReturnedItem(t *testing.T) {
	t.Parallel()
	putFailsThen := func(okAfter int) func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
		n := 0
		return func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
			n++
			if okAfter > 0 && n > okAfter {
				return &dynamodb.PutItemOutput{}, nil
			}
			return nil, errCCF
		}
	}
	getReturns := func(item map[string]types.AttributeValue, err error) func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
		return func(in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			if !aws.ToBool(in.ConsistentRead) {
				return nil, errors.New("read must be strongly consistent")
			}
			return &dynamodb.GetItemOutput{Item: item}, err
		}
	}
	cases := []struct {
		name              string
		api               *fakeAPI
		wantClaimed       bool
		wantPrev          bool
		wantErr           error
		wantPuts, wantGet int
	}{
		{"HolderRead", &fakeAPI{put: putFailsThen(0), get: getReturns(holderItem, nil)}, false, true, nil, 1, 1},
		{"HolderGoneThenClaimed", &fakeAPI{put: putFailsThen(1), get: getReturns(nil, nil)}, true, false, nil, 2, 1},
		{"HolderKeepsVanishing", &fakeAPI{put: putFailsThen(0), get: getReturns(nil, nil)}, false, false, idem.ErrStore, 3, 3},
		// The failed condition says a record holds the key: it comes back (its key only)
		// with the error, so that the guard never fails open over it.
		{"ReadFails", &fakeAPI{put: putFailsThen(0), get: getReturns(nil, errOutage)}, false, true, idem.ErrStore, 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := dynamo.New(tc.api, "t")
			require.NoError(t, err)
			now := time.Now()
			prev, claimed, err := s.Claim(context.Background(), record("k", now, "tok"), now)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.wantClaimed, claimed)
			assert.Equal(t, tc.wantPrev, prev != nil)
			assert.Equal(t, tc.wantPuts, tc.api.puts, "PutItem calls")
			assert.Equal(t, tc.wantGet, tc.api.gets, "GetItem calls")
		})
	}
}

func TestClaimMeetingATransactionReadsTheRecord(t *testing.T) {
	t.Parallel()
	now := time.Now()
	api := &fakeAPI{
		put: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
			return nil, &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item")}
		},
	}
	s, err := dynamo.New(api, "t")
	require.NoError(t, err)
	api.get = func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
		return &dynamodb.GetItemOutput{Item: map[string]types.AttributeValue{
			"id":                     &types.AttributeValueMemberS{Value: "k"},
			"status":                 &types.AttributeValueMemberS{Value: "INPROGRESS"},
			"expiration":             &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Hour).Unix(), 10)},
			"in_progress_expiration": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Minute).UnixMilli(), 10)},
			"lease_token":            &types.AttributeValueMemberS{Value: "owner"},
			"v":                      &types.AttributeValueMemberN{Value: "1"},
		}}, nil
	}
	prev, claimed, err := s.Claim(context.Background(), record("k", now, "mine"), now)
	require.NoError(t, err)
	assert.False(t, claimed)
	require.NotNil(t, prev)
	assert.Equal(t, "owner", prev.LeaseToken, "the owner completing right now holds the key")
	assert.Equal(t, 1, api.gets)
}

// TestClaimMeetingATransactionOnAClaimableRecord: a claim whose put met a transaction
// reads an expired record, which counts as absent, so it claims again rather than return
// it as the refusal (an expired result would be replayed). If a transaction holds the
// item at every put, the claim answers a retryable ErrStore with the record it met, so the
// guard never fails open over it.
func TestClaimMeetingATransactionOnAClaimableRecord(t *testing.T) {
	t.Parallel()
	now := time.Now()
	expired := map[string]types.AttributeValue{
		"id":          &types.AttributeValueMemberS{Value: "k"},
		"status":      &types.AttributeValueMemberS{Value: "COMPLETED"},
		"expiration":  &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(-time.Minute).Unix(), 10)},
		"lease_token": &types.AttributeValueMemberS{Value: "owner"},
		"data":        &types.AttributeValueMemberS{Value: `"stale"`},
		"encoding":    &types.AttributeValueMemberS{Value: "json"},
		"v":           &types.AttributeValueMemberN{Value: "1"},
	}
	for _, tc := range []struct {
		name        string
		conflicts   int
		wantClaimed bool
		wantPuts    int
	}{
		{"ThenFree", 1, true, 2},
		{"Always", 3, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := &fakeAPI{get: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
				return &dynamodb.GetItemOutput{Item: expired}, nil
			}}
			api.put = func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
				if api.puts <= tc.conflicts {
					return nil, &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item")}
				}
				return &dynamodb.PutItemOutput{Attributes: expired}, nil
			}
			s, err := dynamo.New(api, "t")
			require.NoError(t, err)
			prev, claimed, err := s.Claim(context.Background(), record("k", now, "mine"), now)
			assert.Equal(t, tc.wantClaimed, claimed)
			assert.Equal(t, tc.wantPuts, api.puts, "PutItem calls")
			if tc.wantClaimed {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, idem.ErrStore)
			var conflict *types.TransactionConflictException
			assert.ErrorAs(t, err, &conflict, "the conflict stays reachable")
			require.NotNil(t, prev, "a record holds the key: the guard must not fail open")
			assert.Nil(t, prev.Data, "never the expired record's result")
		})
	}
}

// TestCompletionRequest pins the completion's UpdateItem: with the result inline it sets
// data and removes data_ref (a completion sent again may find the record completed under
// its token with the result apart: see TestResultApartRecompletion); with the result apart
// it names the result's item, removes data and stores schema version 2.
func TestCompletionRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		data  []byte
		apart bool
	}{
		{"Inline", []byte(`{"id":"o-1"}`), false},
		{"Apart", []byte(strings.Repeat("x", 2048)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got *dynamodb.UpdateItemInput
			api := &fakeAPI{
				put: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return &dynamodb.PutItemOutput{}, nil },
				update: func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
					got = in
					return &dynamodb.UpdateItemOutput{}, nil
				},
			}
			s, err := dynamo.New(api, "t")
			require.NoError(t, err)
			const token = "0123456789abcdef0123456789abcdef" // as the guard makes them
			done := record("k", time.Now(), token)
			done.Status, done.Data, done.Encoding = idemstore.StatusCompleted, tc.data, "json"
			require.NoError(t, s.Complete(context.Background(), done, nil))
			require.NotNil(t, got)
			expr := aws.ToString(got.UpdateExpression)
			if !tc.apart {
				assert.Zero(t, api.puts)
				assert.Equal(t, "data_ref", got.ExpressionAttributeNames["#dref"])
				assert.Equal(t, "SET #status = :status, #v = :v, #exp = :exp, #enc = :enc, #data = :data, #fp = :fp REMOVE #lease, #dref", expr)
				assert.Equal(t, &types.AttributeValueMemberN{Value: "1"}, got.ExpressionAttributeValues[":v"])
				return
			}
			assert.Equal(t, 1, api.puts, "the result's item, first")
			assert.Equal(t, "data_ref", got.ExpressionAttributeNames["#dref"])
			assert.Equal(t, "SET #status = :status, #v = :v, #exp = :exp, #enc = :enc, #fp = :fp, #dref = :dref REMOVE #lease, #data", expr)
			assert.Equal(t, &types.AttributeValueMemberS{Value: "k#result#" + token}, got.ExpressionAttributeValues[":dref"])
			assert.Equal(t, &types.AttributeValueMemberN{Value: "2"}, got.ExpressionAttributeValues[":v"])
		})
	}
}
