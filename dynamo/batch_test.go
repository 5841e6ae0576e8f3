package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
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
	"github.com/idemkit/idem/memstore"
)

// The compile-time check that the store offers the batch path.
var _ idemstore.BatchStore = (*dynamo.Store)(nil)

// TestClaimMany claims, in one batch, every case of TestClaim plus records that do not
// decode, and checks each result against the in-memory store's single claim: the batch
// path must answer exactly as Claim does. Live records cost the shared read only; records
// that may be taken over fall back to one PutItem each.
func TestClaimMany(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	t0 := wallClock()
	completed := record("", t0, "old")
	completed.Status, completed.LeaseExpires, completed.Data, completed.Encoding, completed.Checkpoint = idemstore.StatusCompleted, time.Time{}, []byte(`{"n":1}`), "json", "cp-done"
	inProgress := record("", t0, "old")
	checkpointed := record("", t0, "old")
	checkpointed.Checkpoint = "cp-1"
	cases := []struct {
		name     string
		existing *idemstore.Record
		at       time.Duration
		carry    string // the checkpoint the claim carries
	}{
		{"Absent", nil, 0, ""},
		{"CompletedLive", completed, 30 * time.Minute, ""},
		{"CompletedAtExpiry", completed, time.Hour, ""},
		{"CompletedPastExpiry", completed, 2 * time.Hour, ""},
		{"InProgressLeaseRunning", inProgress, 30 * time.Second, ""},
		{"InProgressOneMillisecondBeforeLeaseEnd", inProgress, time.Minute - time.Millisecond, ""},
		{"InProgressAtLeaseEnd", inProgress, time.Minute, ""},
		{"InProgressAtLeaseEndCarryingOther", inProgress, time.Minute, "cp-1"},
		{"InProgressPastExpiry", inProgress, 2 * time.Hour, ""},
		{"CheckpointLeaseRunningCarrying", checkpointed, 30 * time.Second, "cp-1"},
		{"CheckpointAtLeaseEnd", checkpointed, time.Minute, ""},
		{"CheckpointAtLeaseEndCarrying", checkpointed, time.Minute, "cp-1"},
		{"CheckpointAtLeaseEndCarryingOther", checkpointed, time.Minute, "cp-0"},
		{"CheckpointPastExpiry", checkpointed, 2 * time.Hour, ""},
	}
	// One batch per instant: a batch has one now.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := "claimmany/" + tc.name
			mem := memstore.New()
			if tc.existing != nil {
				existing := *tc.existing
				existing.Key = key
				mem.Put(existing)
				seed(t, e.store, &existing)
			}
			now := t0.Add(tc.at)
			rec := record(key, now, "new")
			rec.Checkpoint = tc.carry
			memPrev, memClaimed, err := mem.Claim(ctx, rec, now)
			require.NoError(t, err)

			res := e.store.ClaimMany(ctx, []*idemstore.Record{rec}, now)
			require.Len(t, res, 1)
			require.NoError(t, res[0].Err)
			assert.Equal(t, memClaimed, res[0].Claimed)
			if memPrev == nil {
				assert.Nil(t, res[0].Prev)
			} else {
				require.NotNil(t, res[0].Prev)
				assertSameRecord(t, memPrev, res[0].Prev)
			}
			got, err := e.store.Get(ctx, key)
			require.NoError(t, err)
			if memClaimed {
				assertSameRecord(t, rec, got)
			} else {
				assertSameRecord(t, memPrev, got)
			}
		})
	}

	t.Run("Undecodable", func(t *testing.T) {
		t.Parallel()
		now := wallClock()
		live := "claimmany/undecodable-live"
		expired := "claimmany/undecodable-expired"
		e.putRaw(t, map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: live}, "status": &types.AttributeValueMemberS{Value: "WEIRD"},
		})
		e.putRaw(t, map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: expired}, "status": &types.AttributeValueMemberS{Value: "WEIRD"},
			"expiration": &types.AttributeValueMemberN{Value: "1"},
		})
		res := e.store.ClaimMany(ctx, []*idemstore.Record{record(live, now, "new"), record(expired, now, "new")}, now)
		require.ErrorIs(t, res[0].Err, idem.ErrIncompatibleRecord, "a live record that does not decode is an error, as from Claim")
		require.NoError(t, res[1].Err)
		assert.True(t, res[1].Claimed, "an expired one is taken over, as by Claim")
	})
}

// TestClaimManyRoundTrips counts the calls of batches over one chunk: new keys cost one
// call per 25, replays (live records) one more, and a mixed batch falls back to PutItem only
// for the keys that may be taken over.
func TestClaimManyRoundTrips(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := wallClock()
	recs := make([]*idemstore.Record, 30)
	for i := range recs {
		recs[i] = record(fmt.Sprintf("rt/%02d", i), now, "tok")
	}
	e.api.Take()
	for i, r := range e.store.ClaimMany(ctx, recs, now) {
		require.NoError(t, r.Err, i)
		assert.True(t, r.Claimed, i)
		assert.Nil(t, r.Prev, i)
	}
	assert.Equal(t, map[string]int{"BatchExecuteStatement": 2}, e.api.Take(), "new: one INSERT batch per 25")

	again := make([]*idemstore.Record, len(recs))
	for i := range again {
		again[i] = record(recs[i].Key, now, "tok2")
	}
	for i, r := range e.store.ClaimMany(ctx, again, now) {
		require.NoError(t, r.Err, i)
		assert.False(t, r.Claimed, i)
		require.NotNil(t, r.Prev, i)
		assert.Equal(t, "tok", r.Prev.LeaseToken, i)
	}
	assert.Equal(t, map[string]int{"BatchExecuteStatement": 2, "BatchGetItem": 1}, e.api.Take(), "live: the INSERT batches and one read-back")

	later := now.Add(2 * time.Minute) // every lease has ended
	mixed := []*idemstore.Record{record("rt/00", later, "tok3"), record("rt/new", later, "tok3")}
	res := e.store.ClaimMany(ctx, mixed, later)
	for i, r := range res {
		require.NoError(t, r.Err, i)
		assert.True(t, r.Claimed, i)
	}
	require.NotNil(t, res[0].Prev, "the taken-over record comes back")
	assert.Equal(t, "tok", res[0].Prev.LeaseToken)
	assert.Nil(t, res[1].Prev)
	assert.Equal(t, map[string]int{"BatchExecuteStatement": 1, "BatchGetItem": 1, "PutItem": 1}, e.api.Take(), "a takeover is a single claim")

	// An ended lease with a checkpoint refuses a claim that does not carry it: the read-back
	// shows it, so no single claim is made; the guard claims again, carrying it.
	require.NoError(t, e.store.SetCheckpoint(ctx, "rt/01", "tok", "charged", 1))
	e.api.Take()
	res = e.store.ClaimMany(ctx, []*idemstore.Record{record("rt/01", later, "tok4")}, later)
	require.NoError(t, res[0].Err)
	assert.False(t, res[0].Claimed)
	require.NotNil(t, res[0].Prev)
	assert.Equal(t, "charged", res[0].Prev.Checkpoint)
	assert.Equal(t, map[string]int{"BatchExecuteStatement": 1, "BatchGetItem": 1}, e.api.Take(), "a refusing record is answered from the read-back")
}

// TestCompleteManyAndReleaseMany checks every per-record answer of the batch completion and
// release in batches of more than 25, against what Complete and Release answer.
func TestCompleteManyAndReleaseMany(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := wallClock()
	const n = 28
	var recs, done []*idemstore.Record
	for i := range n {
		rec := record(fmt.Sprintf("cm/%02d", i), now, "tok")
		seed(t, e.store, rec)
		recs = append(recs, rec)
		d := *rec
		d.Status, d.Data, d.Encoding, d.LeaseExpires = idemstore.StatusCompleted, []byte(`{"i":1}`), "json", time.Time{}
		done = append(done, &d)
	}
	done[3].LeaseToken = "stale"                                  // another owner holds it
	done[4].Key = "cm/absent"                                     // nobody does
	done[5].Data, done[5].Encoding = make([]byte, 450_000), "bin" // over the item size limit
	done[6].Fingerprint, done[6].Data, done[6].Encoding = "", nil, idemstore.EncodingNone
	done[7].LeaseToken = ""
	e.api.Take()
	errs := e.store.CompleteMany(ctx, done)
	assert.Equal(t, map[string]int{"BatchExecuteStatement": 3}, e.api.Take(),
		"one INSERT batch of the results kept apart (done[5]'s, refused), one UPDATE batch per 25")
	require.Len(t, errs, n)
	for i, err := range errs {
		switch i {
		case 3, 4:
			require.ErrorIs(t, err, idem.ErrLeaseLost, i)
		case 5:
			require.ErrorIs(t, err, idemstore.ErrTooLarge, i)
		case 7:
			require.Error(t, err, "no lease token")
		default:
			require.NoError(t, err, i)
			got, err := e.store.Get(ctx, done[i].Key)
			require.NoError(t, err)
			assertSameRecord(t, done[i], got)
		}
	}
	var ase *dynamo.StatementError
	require.ErrorAs(t, errs[3], &ase)
	assert.Equal(t, "ConditionalCheckFailed", ase.Code)

	keys := []string{recs[3].Key, recs[5].Key, "cm/absent"}
	toks := []string{"tok", "stale", "tok"}
	errs = e.store.ReleaseMany(ctx, keys, toks, now)
	require.NoError(t, errs[0], "in progress, ours: released")
	require.ErrorIs(t, errs[1], idem.ErrLeaseLost, "another owner's token")
	require.ErrorIs(t, errs[2], idem.ErrLeaseLost, "a record already gone: nothing to release, as Release says")
	got, err := e.store.Get(ctx, recs[3].Key)
	require.NoError(t, err)
	require.NotNil(t, got, "kept as a tombstone")
	assert.Equal(t, idemstore.ReleasedToken("tok"), got.LeaseToken)
	assert.True(t, got.LeaseEnded(time.Now()), "lease ended at the release: %v", got.LeaseExpires)
	got, err = e.store.Get(ctx, recs[5].Key)
	require.NoError(t, err)
	assert.NotNil(t, got, "a wrong token deletes nothing")

	// Every released record is kept with its lease ended, its checkpoint too; a completed
	// one is not released.
	withCP, plain := record("cm/checkpoint", now, "tok"), record("cm/plain", now, "tok")
	seed(t, e.store, withCP)
	seed(t, e.store, plain)
	require.NoError(t, e.store.SetCheckpoint(ctx, withCP.Key, "tok", "charged", 1))
	e.api.Take()
	errs = e.store.ReleaseMany(ctx, []string{withCP.Key, done[9].Key, plain.Key}, []string{"tok", "tok", "tok"}, now)
	assert.Equal(t, map[string]int{"BatchExecuteStatement": 1}, e.api.Take(), "one call, checkpoints or not")
	require.NoError(t, errs[0], "released, checkpoint kept")
	require.ErrorIs(t, errs[1], idem.ErrLeaseLost, "completed: not released")
	require.NoError(t, errs[2])
	got, err = e.store.Get(ctx, plain.Key)
	require.NoError(t, err)
	require.NotNil(t, got, "kept as a tombstone")
	assert.Equal(t, idemstore.ReleasedToken("tok"), got.LeaseToken)
	assert.True(t, got.LeaseEnded(time.Now()), "lease ended at the release: %v", got.LeaseExpires)
	got, err = e.store.Get(ctx, withCP.Key)
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, "charged", got.Checkpoint)
	assert.True(t, got.LeaseEnded(time.Now()), "lease ended at the release: %v", got.LeaseExpires)
	got, err = e.store.Get(ctx, done[9].Key)
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, idemstore.StatusCompleted, got.Status)
}

// TestCompleteManyResent sends a batch of completions again, with other results, after it
// landed (an SDK resend whose first attempt landed, or a second completion under the
// tokens): every record answers nil and keeps the first result, and the refusals decide
// from the records their failed conditions return, with no read.
func TestCompleteManyResent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := wallClock()
	var first, again []*idemstore.Record
	for i := range 3 {
		rec := record(fmt.Sprintf("resent/%d", i), now, "tok")
		seed(t, e.store, rec)
		d := *rec
		d.Status, d.Data, d.Encoding, d.LeaseExpires = idemstore.StatusCompleted, []byte(`{"n":1}`), "json", time.Time{}
		first = append(first, &d)
		d2 := d
		d2.Data = []byte(`{"n":2}`)
		again = append(again, &d2)
	}
	for i, err := range e.store.CompleteMany(ctx, first) {
		require.NoError(t, err, i)
	}
	e.api.Take()
	for i, err := range e.store.CompleteMany(ctx, again) {
		assert.NoError(t, err, "record %d: completed under its token already", i)
	}
	assert.Equal(t, map[string]int{"BatchExecuteStatement": 1}, e.api.Take(), "one call: the refusals carry the records")
	for i := range first {
		got, err := e.store.Get(ctx, first[i].Key)
		require.NoError(t, err)
		assertSameRecord(t, first[i], got)
	}
}

// TestBatchLayouts runs the three batch methods with renamed attributes (one a PartiQL
// keyword, one with a dot) and in a single-table design.
func TestBatchLayouts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts []dynamo.Option
	}{
		{"Renamed", []dynamo.Option{dynamo.WithAttributes(dynamo.Attributes{
			ID: "pk", Status: "idem.status", Expiration: "ttl", LeaseToken: "lease-token", Data: "value",
		})}},
		{"SingleTable", []dynamo.Option{dynamo.WithAttributes(dynamo.Attributes{ID: "PK"}), dynamo.WithSortKey("SK", "idempotency#orders")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.opts...)
			ctx := context.Background()
			now := wallClock()
			a, b := record("layout/a", now, "tok"), record("layout/b", now, "tok")
			for _, r := range e.store.ClaimMany(ctx, []*idemstore.Record{a, b}, now) {
				require.NoError(t, r.Err)
				require.True(t, r.Claimed)
			}
			res := e.store.ClaimMany(ctx, []*idemstore.Record{record(a.Key, now, "x")}, now)
			require.NoError(t, res[0].Err)
			require.False(t, res[0].Claimed)
			assertSameRecord(t, a, res[0].Prev)

			done := *a
			done.Status, done.Data, done.Encoding, done.LeaseExpires = idemstore.StatusCompleted, []byte(`{}`), "json", time.Time{}
			require.NoError(t, e.store.CompleteMany(ctx, []*idemstore.Record{&done})[0])
			got, err := e.store.Get(ctx, a.Key)
			require.NoError(t, err)
			assertSameRecord(t, &done, got)

			require.NoError(t, e.store.ReleaseMany(ctx, []string{b.Key}, []string{"tok"}, now)[0])
			got, err = e.store.Get(ctx, b.Key)
			require.NoError(t, err)
			require.NotNil(t, got, "kept as a tombstone")
			assert.Equal(t, idemstore.ReleasedToken("tok"), got.LeaseToken)
			assert.True(t, got.LeaseEnded(time.Now()), "lease ended at the release: %v", got.LeaseExpires)
			assert.False(t, strings.Contains(fmt.Sprint(e.api.Take()), "PutItem"), "no fallback to single claims")
		})
	}
}

// TestBatchFallbacks covers what DynamoDB Local does not produce on demand: statements that
// fail for a passing reason and keys BatchGetItem leaves unprocessed go to the single-item
// call; a failed call fails every record of it with idem.ErrStore, the SDK error reachable.
func TestBatchFallbacks(t *testing.T) {
	t.Parallel()
	stmtErr := func(code types.BatchStatementErrorCodeEnum) func(*dynamodb.BatchExecuteStatementInput) (*dynamodb.BatchExecuteStatementOutput, error) {
		return func(in *dynamodb.BatchExecuteStatementInput) (*dynamodb.BatchExecuteStatementOutput, error) {
			out := &dynamodb.BatchExecuteStatementOutput{Responses: make([]types.BatchStatementResponse, len(in.Statements))}
			for i := range out.Responses {
				out.Responses[i].Error = &types.BatchStatementError{Code: code, Message: aws.String(string(code))}
			}
			return out, nil
		}
	}
	putOK := func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return &dynamodb.PutItemOutput{}, nil }
	now := time.Now()
	recs := []*idemstore.Record{record("a", now, "tok"), record("b", now, "tok")}

	t.Run("ThrottledInsertClaimsSingly", func(t *testing.T) {
		t.Parallel()
		api := &fakeAPI{batch: stmtErr(types.BatchStatementErrorCodeEnumThrottlingError), put: putOK}
		s, err := dynamo.New(api, "t")
		require.NoError(t, err)
		for _, r := range s.ClaimMany(context.Background(), recs, now) {
			require.NoError(t, r.Err)
			assert.True(t, r.Claimed)
		}
		assert.Equal(t, 2, api.puts)
	})
	t.Run("UnprocessedKeysClaimSingly", func(t *testing.T) {
		t.Parallel()
		api := &fakeAPI{
			batch: stmtErr(types.BatchStatementErrorCodeEnumDuplicateItem),
			batchGet: func(in *dynamodb.BatchGetItemInput) (*dynamodb.BatchGetItemOutput, error) {
				if !aws.ToBool(in.RequestItems["t"].ConsistentRead) {
					return nil, errors.New("read must be strongly consistent")
				}
				return &dynamodb.BatchGetItemOutput{UnprocessedKeys: in.RequestItems}, nil
			},
			put: putOK,
		}
		s, err := dynamo.New(api, "t")
		require.NoError(t, err)
		for _, r := range s.ClaimMany(context.Background(), recs, now) {
			require.NoError(t, r.Err)
			assert.True(t, r.Claimed)
		}
		assert.Equal(t, 2, api.puts)
	})
	t.Run("FailedCallsAreStoreErrors", func(t *testing.T) {
		t.Parallel()
		api := &fakeAPI{batch: func(*dynamodb.BatchExecuteStatementInput) (*dynamodb.BatchExecuteStatementOutput, error) {
			return nil, errOutage
		}}
		s, err := dynamo.New(api, "t")
		require.NoError(t, err)
		var apiErr smithy.APIError
		for _, r := range s.ClaimMany(context.Background(), recs, now) {
			require.ErrorIs(t, r.Err, idem.ErrStore)
			require.ErrorAs(t, r.Err, &apiErr)
		}
		for _, err := range s.CompleteMany(context.Background(), recs) {
			require.ErrorIs(t, err, idem.ErrStore)
		}
		for _, err := range s.ReleaseMany(context.Background(), []string{"a"}, []string{"tok"}, time.Now()) {
			require.ErrorIs(t, err, idem.ErrStore)
		}
	})
	t.Run("FailedStatementCompletesSingly", func(t *testing.T) {
		t.Parallel()
		api := &fakeAPI{
			batch:  stmtErr(types.BatchStatementErrorCodeEnumInternalServerError),
			update: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) { return nil, errCCF },
			// The record the failed condition returned none of is read: gone.
			get: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return &dynamodb.GetItemOutput{}, nil },
		}
		s, err := dynamo.New(api, "t")
		require.NoError(t, err)
		for _, err := range s.CompleteMany(context.Background(), recs) {
			require.ErrorIs(t, err, idem.ErrLeaseLost, "the single completion's answer")
		}
		assert.Equal(t, 2, api.updates)
	})
}

// TestBatchClaimMetRecordNeverFailsOpen: a batch claim of two keys whose INSERTs
// fail with DuplicateItem has met records that hold the keys (completed, say). When the
// BatchGetItem that should read them fails, ClaimMany returns a bare ErrStore with no Prev,
// and DoClaimed under WithFailOpen runs the handler unguarded: a second run of a key
// that is recorded. The single-claim path never fails open here (the failed condition
// returns the item it met).
func TestBatchClaimMetRecordNeverFailsOpen(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{
		batch: func(in *dynamodb.BatchExecuteStatementInput) (*dynamodb.BatchExecuteStatementOutput, error) {
			out := &dynamodb.BatchExecuteStatementOutput{Responses: make([]types.BatchStatementResponse, len(in.Statements))}
			for i := range out.Responses {
				code := types.BatchStatementErrorCodeEnumDuplicateItem
				out.Responses[i].Error = &types.BatchStatementError{Code: code, Message: aws.String(string(code))}
			}
			return out, nil
		},
		batchGet: func(*dynamodb.BatchGetItemInput) (*dynamodb.BatchGetItemOutput, error) {
			return nil, errOutage // throttled past the SDK's retries, say
		},
	}
	s, err := dynamo.New(api, "t")
	require.NoError(t, err)
	g, err := idem.New(s, "op", idem.WithFailOpen(true))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := g.Claim(ctx, []idem.Request{{Key: "a"}, {Key: "b"}})
	var runs atomic.Int32
	for i := 0; i < b.Len(); i++ {
		_, _, err := idem.DoClaimed(ctx, b, i, func(context.Context) (int, error) {
			runs.Add(1)
			return 1, nil
		})
		t.Logf("DoClaimed(%d): %v", i, err)
	}
	b.Settle(ctx)
	assert.Zero(t, runs.Load(), "the handler ran unguarded on keys the batch claim found taken (DuplicateItem)")
}
