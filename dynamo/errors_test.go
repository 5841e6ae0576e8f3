package dynamo_test

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/idemkit/idem/internal/ddblocal"
)

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
		{"AttachedTransactionConflict", true, nil, "", reasons("None", "TransactionConflict"), false, notCommitted, 0},
		{"AttachedThrottled", true, nil, "", reasons("None", "None", "ThrottlingError"), false, notCommitted, 1},
		{"NoReasons", true, nil, "", reasons(), false, notCommitted, -2},
		// A request-level refusal for size: the record is too large if it is over the limit
		// (its result is apart, but its checkpoint is not), else an attached write is.
		{"TransactTooLargeRecord", true, nil, string(bigData), errTooBig, false, []error{idemstore.ErrTooLarge}, -2},
		{"TransactTooLargeAttached", true, bigData[:4096], "", errTooBig, false, notCommitted, -1},
		{"TransactOutage", true, nil, "", errOutage, false, []error{idem.ErrStore}, -2},
		// A transaction over 4 MB is refused before it runs: nothing committed.
		{"TransactionOverFourMB", true, nil, "", errTxBig, false, notCommitted, -1},
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
					require.Equal(t, "attribute_not_exists(#id)", aws.ToString(in.ConditionExpression), "a result's item is written once per token")
					if tc.putErr {
						return nil, tc.sdkErr
					}
					return &dynamodb.PutItemOutput{}, nil
				},
				update: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) { return nil, tc.sdkErr },
				// The record a failed condition returned none of is read: gone.
				get: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return &dynamodb.GetItemOutput{}, nil },
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
				assert.Equal(t, errors.Is(err, idem.ErrConditionFailed), awe.Permanent(), "only a failed condition is permanent")
				assert.Equal(t, errors.Is(err, idem.ErrConditionFailed), idem.IsRefused(err))
				assert.NotEmpty(t, awe.Code)
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

func TestSDKErrorsAreStoreErrors(t *testing.T) {
	t.Parallel()
	client := ddblocal.Client(t)
	store, err := dynamo.New(client, "idem-test-no-such-table")
	require.NoError(t, err)
	ctx := context.Background()
	now := wallClock()

	_, _, claimErr := store.Claim(ctx, record("k", now, "tok"), now)
	_, getErr := store.Get(ctx, "k")
	done := record("k", now, "tok")
	done.Status = idemstore.StatusCompleted
	cases := []struct {
		op  string
		err error
	}{
		{"claim", claimErr},
		{"get", getErr},
		{"complete", store.Complete(ctx, done, nil)},
		{"release", store.Release(ctx, "k", "tok", time.Now())},
		{"extend", store.Extend(ctx, "k", "tok", now)},
		{"checkpoint", store.SetCheckpoint(ctx, "k", "tok", "cp", 1)},
	}
	for _, tc := range cases {
		t.Run(tc.op, func(t *testing.T) {
			require.ErrorIs(t, tc.err, idem.ErrStore)
			var se *idem.StoreError
			require.ErrorAs(t, tc.err, &se)
			assert.Equal(t, tc.op, se.Op)
			var notFound *types.ResourceNotFoundException
			assert.ErrorAs(t, tc.err, &notFound)
			var apiErr smithy.APIError
			assert.ErrorAs(t, tc.err, &apiErr)
		})
	}
}

// TestLeaseFail checks the mapping of the writes conditional on the lease token other than
// the completion: a failed condition is ErrLeaseLost (another owner holds the key, or
// nobody does), an item over the size limit is ErrTooLarge, anything else an
// *idem.StoreError naming the operation; the SDK error stays reachable either way.
func TestLeaseFail(t *testing.T) {
	t.Parallel()
	ops := []struct {
		name string
		call func(*dynamo.Store) error
	}{
		{"extend", func(s *dynamo.Store) error {
			return s.Extend(context.Background(), "k", "tok", time.Now().Add(time.Minute))
		}},
		{"checkpoint", func(s *dynamo.Store) error { return s.SetCheckpoint(context.Background(), "k", "tok", "cp", 1) }},
		{"release", func(s *dynamo.Store) error { return s.Release(context.Background(), "k", "tok", time.Now()) }},
	}
	cases := []struct {
		name    string
		sdkErr  error
		want    error
		notWant []error
	}{
		{"ConditionFailed", errCCF, idem.ErrLeaseLost, []error{idem.ErrStore, idemstore.ErrTooLarge}},
		{"TooLarge", errTooBig, idemstore.ErrTooLarge, []error{idem.ErrLeaseLost, idem.ErrStore}},
		{"Outage", errOutage, idem.ErrStore, []error{idem.ErrLeaseLost, idemstore.ErrTooLarge}},
	}
	for _, op := range ops {
		for _, tc := range cases {
			t.Run(op.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				api := &fakeAPI{
					update: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) { return nil, tc.sdkErr },
					del:    func(*dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) { return nil, tc.sdkErr },
					// A refused extension without the item reads it: gone, so the lease is lost.
					get: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return &dynamodb.GetItemOutput{}, nil },
				}
				s, err := dynamo.New(api, "t")
				require.NoError(t, err)
				err = op.call(s)
				require.ErrorIs(t, err, tc.want)
				for _, other := range tc.notWant {
					assert.NotErrorIs(t, err, other)
				}
				assert.ErrorIs(t, err, tc.sdkErr, "the SDK error stays reachable")
				var apiErr smithy.APIError
				assert.ErrorAs(t, err, &apiErr)
				if errors.Is(tc.want, idem.ErrStore) {
					var se *idem.StoreError
					require.ErrorAs(t, err, &se)
					assert.Equal(t, op.name, se.Op)
				}
			})
		}
	}
}

// TestAttachedWriteError checks that the error names the attached write by index and
// table (or says that DynamoDB named none) and unwraps to its cause.
func TestAttachedWriteError(t *testing.T) {
	t.Parallel()
	cause := fmt.Errorf("%w: %w", idem.ErrConditionFailed, errCCF)
	cases := []struct {
		name     string
		err      *dynamo.AttachedWriteError
		mentions []string
	}{
		{"Named", &dynamo.AttachedWriteError{Index: 2, Table: "orders", Err: cause}, []string{"attached write 2", `"orders"`}},
		{"Unnamed", &dynamo.AttachedWriteError{Index: -1, Err: cause}, []string{"an attached write"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, m := range tc.mentions {
				assert.Contains(t, tc.err.Error(), m)
			}
			assert.ErrorIs(t, tc.err, idem.ErrConditionFailed)
			var ccf *types.ConditionalCheckFailedException
			assert.ErrorAs(t, tc.err, &ccf, "the SDK error stays reachable")
			assert.Same(t, cause, errors.Unwrap(tc.err))
		})
	}
}

// TestExtendRefusedByALaterEnd: an extension whose condition fails reads the item
// returned with the refusal, in the same round trip: our own in-progress record whose
// lease ends at or after the requested end (a later extension of ours landed first) is
// success; any other record is ErrLeaseLost. Only a refusal without the item costs a read.
func TestExtendRefusedByALaterEnd(t *testing.T) {
	t.Parallel()
	end := time.Date(2100, 3, 1, 12, 5, 0, 0, time.UTC)
	item := func(token, status string, leaseMillis int64) map[string]types.AttributeValue {
		it := map[string]types.AttributeValue{
			"id":          &types.AttributeValueMemberS{Value: "k"},
			"status":      &types.AttributeValueMemberS{Value: status},
			"lease_token": &types.AttributeValueMemberS{Value: token},
		}
		if leaseMillis != 0 {
			it["in_progress_expiration"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(leaseMillis, 10)}
		}
		return it
	}
	ms := end.UnixMilli()
	cases := []struct {
		name  string
		item  map[string]types.AttributeValue
		want  error
		reads int
	}{
		{"ours, later end", item("tok", "INPROGRESS", ms+60_000), nil, 0},
		{"ours, same end", item("tok", "INPROGRESS", ms), nil, 0},
		{"another token", item("other", "INPROGRESS", ms+60_000), idem.ErrLeaseLost, 0},
		{"ours, completed", item("tok", "COMPLETED", 0), idem.ErrLeaseLost, 0},
		{"ours, no lease end", item("tok", "INPROGRESS", 0), idem.ErrLeaseLost, 0},
		{"no item returned: read, gone", nil, idem.ErrLeaseLost, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := &fakeAPI{
				update: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
					return nil, &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed"), Item: tc.item}
				},
				get: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return &dynamodb.GetItemOutput{}, nil },
			}
			s, err := dynamo.New(api, "t")
			require.NoError(t, err)
			err = s.Extend(context.Background(), "k", "tok", end)
			if tc.want == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tc.want)
				assert.NotErrorIs(t, err, idem.ErrStore)
			}
			assert.Equal(t, 1, api.updates)
			assert.Equal(t, tc.reads, api.gets, "reads beyond the refused update")
		})
	}
}
