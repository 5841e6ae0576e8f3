package dynamo_test

import (
	"context"
	"errors"
	"slices"
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
		{"ReadFails", &fakeAPI{put: putFailsThen(0), get: getReturns(nil, errOutage)}, false, false, idem.ErrStore, 1, 1},
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

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	reasons := func(codes ...string) error {
		tce := &types.TransactionCanceledException{Message: aws.String("Transaction cancelled")}
		for _, c := range codes {
			tce.CancellationReasons = append(tce.CancellationReasons, types.CancellationReason{Code: aws.String(c)})
		}
		return tce
	}
	tooBigReason := &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{
		{Code: aws.String("ValidationError"), Message: aws.String("Item size to update has exceeded the maximum allowed size")},
		{Code: aws.String("None")},
	}}
	bigData := []byte(strings.Repeat("x", 410*1024))
	notCommitted := []error{idem.ErrStore, idemstore.ErrNotCommitted}
	cases := []struct {
		name       string
		transact   bool
		data       []byte // the completed record's result
		checkpoint string // the completed record's checkpoint
		sdkErr     error  // the completion's error; or, with putErr, the result's item's
		putErr     bool
		want       []error
		attached   int // the write an *AttachedWriteError names; -2: none
	}{
		{"UpdateConditionIsLeaseLost", false, nil, "", errCCF, false, []error{idem.ErrLeaseLost}, -2},
		{"UpdateTooLarge", false, nil, "", errTooBig, false, []error{idemstore.ErrTooLarge}, -2},
		{"UpdateOutage", false, nil, "", errOutage, false, []error{idem.ErrStore}, -2},
		{"CompletionConditionIsLeaseLost", true, nil, "", reasons("ConditionalCheckFailed", "None"), false, []error{idem.ErrLeaseLost}, -2},
		{"LeaseLostWinsOverAttached", true, nil, "", reasons("ConditionalCheckFailed", "ConditionalCheckFailed"), false, []error{idem.ErrLeaseLost}, -2},
		{"AttachedConditionFails", true, nil, "", reasons("None", "None", "ConditionalCheckFailed"), false, []error{idem.ErrConditionFailed}, 1},
		{"CompletionTooLarge", true, nil, "", tooBigReason, false, []error{idemstore.ErrTooLarge}, -2},
		{"TransactionConflict", true, nil, "", reasons("TransactionConflict", "None"), false, notCommitted, -2},
		{"NoReasons", true, nil, "", reasons(), false, notCommitted, -2},
		// A request-level refusal for size: the record is too large if it is over the limit
		// (its result is apart, but its checkpoint is not), else an attached write is.
		{"TransactTooLargeRecord", true, nil, string(bigData), errTooBig, false, []error{idemstore.ErrTooLarge}, -2},
		{"TransactTooLargeAttached", true, bigData[:4096], "", errTooBig, false, notCommitted, -1},
		{"TransactOutage", true, nil, "", errOutage, false, []error{idem.ErrStore}, -2},
		// A result kept apart whose item DynamoDB refuses is too large, attachments or not;
		// an outage writing it is a store error, and nothing else is sent.
		{"ResultTooLarge", false, bigData, "", errTooBig, true, []error{idemstore.ErrTooLarge}, -2},
		{"ResultTooLargeAttached", true, bigData, "", errTooBig, true, []error{idemstore.ErrTooLarge}, -2},
		{"ResultOutage", true, bigData, "", errOutage, true, []error{idem.ErrStore}, -2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := &fakeAPI{
				put: func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
					require.Nil(t, in.ConditionExpression, "a result's item is written unconditionally")
					if tc.putErr {
						return nil, tc.sdkErr
					}
					return &dynamodb.PutItemOutput{}, nil
				},
				update: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) { return nil, tc.sdkErr },
				transact: func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
					return nil, tc.sdkErr
				},
			}
			if tc.putErr {
				api.update, api.transact = nil, nil // never sent
			}
			s, err := dynamo.New(api, "t")
			require.NoError(t, err)
			var attached []any
			if tc.transact {
				attached = []any{types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{}}}
			}
			const token = "0123456789abcdef0123456789abcdef" // as the guard makes them
			done := record("k", time.Now(), token)
			done.Status, done.Data, done.Encoding, done.Checkpoint = idemstore.StatusCompleted, tc.data, "json+gzip", tc.checkpoint
			err = s.Complete(context.Background(), done, attached)
			assert.Equal(t, len(tc.data) > 1024, api.puts == 1, "the result's item is written when the result is apart")
			for _, want := range tc.want {
				require.ErrorIs(t, err, want)
			}
			assert.ErrorIs(t, err, tc.sdkErr, "the SDK error stays reachable")
			for _, other := range []error{idem.ErrLeaseLost, idem.ErrConditionFailed, idemstore.ErrTooLarge, idem.ErrStore, idemstore.ErrNotCommitted} {
				if !slices.Contains(tc.want, other) {
					assert.NotErrorIs(t, err, other)
				}
			}
			var awe *dynamo.AttachedWriteError
			if tc.attached == -2 {
				assert.False(t, errors.As(err, &awe), "no attached write is blamed")
			} else if assert.ErrorAs(t, err, &awe) {
				assert.Equal(t, tc.attached, awe.Index)
			}
		})
	}
}

func TestCancelledTransactionCommittedNothing(t *testing.T) {
	t.Parallel()
	for _, reason := range []string{"TransactionConflict", "ThrottlingError", "None"} {
		api := &fakeAPI{transact: func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
			return nil, &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{
				{Code: aws.String(reason)}, {Code: aws.String("None")},
			}}
		}}
		s, err := dynamo.New(api, "t")
		require.NoError(t, err)
		done := record("k", time.Now(), "tok")
		done.Status = idemstore.StatusCompleted
		err = s.Complete(context.Background(), done, []any{types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{}}})
		require.ErrorIs(t, err, idemstore.ErrNotCommitted, reason)
		require.ErrorIs(t, err, idem.ErrStore, reason)
		var tce *types.TransactionCanceledException
		assert.ErrorAs(t, err, &tce)
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
